// OpenID Connect discovery and its checks (spec §5.6): the issuer must match auth.oidc.issuer_url exactly, endpoints must be HTTPS unless allowed otherwise.
import type { Config } from '../config/index.js';

export type OidcSettings = Readonly<Config['auth']['oidc']>;

/** The discovery fields Gatehouse uses; the rest of the document is kept for openid-client. */
export interface ProviderMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  userinfo_endpoint?: string;
  id_token_signing_alg_values_supported?: string[];
  [key: string]: unknown;
}

/** Endpoints that carry tokens or keys: each must be HTTPS unless auth.oidc.allow_insecure_endpoints (spec §5.6). */
const ENDPOINTS = ['authorization_endpoint', 'token_endpoint', 'userinfo_endpoint', 'jwks_uri'] as const;
const REQUIRED = new Set<string>(['authorization_endpoint', 'token_endpoint', 'jwks_uri']);

/**
 * Where discovery lives for an issuer (OpenID Connect Discovery 1.0 §4): a terminating slash is removed before the
 * well-known suffix is appended, so `https://idp/` and `https://idp` are looked up at the same place, and the
 * document's `issuer` then tells which of the two the provider really is.
 */
export function discoveryUrl(issuerUrl: string): string {
  return `${issuerUrl.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

function isUrl(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  try {
    new URL(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * Every problem of a discovery document against the settings, each naming the configuration key it concerns.
 * An empty list means the document is usable.
 */
export function discoveryProblems(doc: unknown, settings: OidcSettings): string[] {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return ['auth.oidc.issuer_url: the discovery document is not a JSON object'];
  const d = doc as Record<string, unknown>;
  const problems: string[] = [];
  if (d.issuer !== settings.issuer_url) {
    const said = typeof d.issuer === 'string' ? JSON.stringify(d.issuer.slice(0, 256)) : 'no issuer';
    problems.push(`auth.oidc.issuer_url: discovery names the issuer ${said}, not ${JSON.stringify(settings.issuer_url)} (the match is exact; a trailing slash differs)`);
  }
  for (const key of ENDPOINTS) {
    const value = d[key];
    if (value === undefined) {
      if (REQUIRED.has(key)) problems.push(`auth.oidc.issuer_url: discovery has no ${key}`);
      continue;
    }
    if (!isUrl(value)) {
      problems.push(`auth.oidc.issuer_url: discovery's ${key} is not a URL`);
      continue;
    }
    if (new URL(value).protocol !== 'https:' && !settings.allow_insecure_endpoints) {
      problems.push(`auth.oidc.allow_insecure_endpoints: discovery's ${key} (${value.slice(0, 256)}) is not HTTPS; HTTP endpoints need allow_insecure_endpoints: true (development only)`);
    }
  }
  if (!settings.scopes.includes('openid')) problems.push('auth.oidc.scopes: must include openid');
  return problems;
}

/** The document as ProviderMetadata once discoveryProblems found nothing. */
export function asMetadata(doc: unknown): ProviderMetadata {
  return doc as ProviderMetadata;
}
