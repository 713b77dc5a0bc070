// The identity provider as this process knows it: discovery at start (checked, spec §5.6), the shared JWKS resolver, and the `oidc` readiness check.
import { createRemoteJWKSet, customFetch, type JWTVerifyGetKey } from 'jose';
import type { Logger } from '../observability/logger.js';
import type { CheckResult } from '../health/readiness.js';
import { asMetadata, discoveryProblems, discoveryUrl, type OidcSettings, type ProviderMetadata } from './discovery.js';
import type { ProviderFetch } from './fetch.js';

/** Discovery answered with a document that cannot be used (wrong issuer, insecure endpoint, ...): a configuration error. */
export class OidcConfigurationError extends Error {
  readonly code = 'oidc_configuration';
  constructor(readonly problems: string[]) {
    super(problems.join('; '));
    this.name = 'OidcConfigurationError';
  }
}

/** Discovery could not be read (refused, timed out, not JSON, not 200). */
export class OidcUnreachableError extends Error {
  readonly code = 'oidc_unreachable';
  constructor(reason: string, opts?: { cause?: unknown }) {
    super(`auth.oidc.issuer_url: the provider's discovery document could not be read (${reason})`, opts);
    this.name = 'OidcUnreachableError';
  }
}

/** Largest discovery document read. */
const MAX_DISCOVERY_BYTES = 256 * 1024;
/** A missing `kid` triggers at most one JWKS fetch in this window (one in flight; jose's cooldown). */
export const JWKS_COOLDOWN_MS = 5_000;
/** Cached keys are refreshed after this age even when every kid is known. */
const JWKS_MAX_AGE_MS = 10 * 60_000;

export interface OidcProviderOptions {
  settings: OidcSettings;
  fetch: ProviderFetch;
  log: Logger;
  /** Discovery retry after a failure at start (outside production), doubling up to 60 s. */
  retryMs?: number;
  jwksCooldownMs?: number;
}

function reasonOf(err: unknown): string {
  const e = err as { name?: string; code?: string; cause?: { code?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return 'timed out';
  if (e?.code === 'egress_denied' || e?.cause?.code === 'egress_denied') return 'the egress rules refuse its address; a private provider needs auth.oidc.allow_private_network: true';
  const code = e?.cause?.code ?? e?.code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  return typeof code === 'string' ? code : 'request failed';
}

export class OidcProvider {
  readonly settings: OidcSettings;
  readonly fetch: ProviderFetch;
  #metadata: ProviderMetadata | null = null;
  #jwks: ReturnType<typeof createRemoteJWKSet> | null = null;
  #lastProblem = 'discovery not yet attempted';
  #retry: NodeJS.Timeout | null = null;
  #closed = false;
  readonly #log: Logger;
  readonly #retryMs: number;
  readonly #cooldownMs: number;

  constructor(opts: OidcProviderOptions) {
    this.settings = opts.settings;
    this.fetch = opts.fetch;
    this.#log = opts.log;
    this.#retryMs = opts.retryMs ?? 2_000;
    this.#cooldownMs = opts.jwksCooldownMs ?? JWKS_COOLDOWN_MS;
  }

  get issuer(): string {
    return this.settings.issuer_url!;
  }

  /** The checked discovery document, or null until discovery succeeded. */
  get metadata(): ProviderMetadata | null {
    return this.#metadata;
  }

  /** Reads and checks discovery once. Throws OidcConfigurationError or OidcUnreachableError. */
  async discover(): Promise<ProviderMetadata> {
    let text: string;
    try {
      const res = await this.fetch(discoveryUrl(this.issuer), { headers: { accept: 'application/json' } });
      if (res.status !== 200) {
        await res.body?.cancel();
        throw new OidcUnreachableError(`HTTP ${res.status}`);
      }
      text = await res.text();
    } catch (err) {
      if (err instanceof OidcUnreachableError) throw err;
      throw new OidcUnreachableError(reasonOf(err), { cause: err });
    }
    if (text.length > MAX_DISCOVERY_BYTES) throw new OidcUnreachableError('document too large');
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      throw new OidcUnreachableError('not JSON');
    }
    const problems = discoveryProblems(doc, this.settings);
    if (problems.length > 0) throw new OidcConfigurationError(problems);
    const metadata = asMetadata(doc);
    this.#metadata = metadata;
    this.#jwks = createRemoteJWKSet(new URL(metadata.jwks_uri), {
      cooldownDuration: this.#cooldownMs,
      cacheMaxAge: JWKS_MAX_AGE_MS,
      timeoutDuration: 5_000,
      [customFetch]: (url, init) => this.fetch(url, init),
    });
    this.#lastProblem = '';
    return metadata;
  }

  /**
   * Discovery at start. A document that answers but is wrong always fails the start (a configuration error). A
   * provider that cannot be reached fails the start in production (the key is named); elsewhere the process starts
   * not ready (`oidc` check) and retries in the background.
   */
  async start(opts: { production: boolean }): Promise<void> {
    try {
      await this.discover();
      this.#log.info({ issuer: this.issuer }, 'OIDC provider discovered');
    } catch (err) {
      if (err instanceof OidcConfigurationError || opts.production) throw err;
      this.#lastProblem = (err as Error).message;
      this.#log.warn({ problem: this.#lastProblem }, 'OIDC discovery failed; retrying in the background (not ready)');
      this.#scheduleRetry(this.#retryMs);
    }
  }

  #scheduleRetry(delayMs: number): void {
    if (this.#closed) return;
    this.#retry = setTimeout(() => {
      this.discover().then(
        () => this.#log.info({ issuer: this.issuer }, 'OIDC provider discovered'),
        (err: unknown) => {
          this.#lastProblem = (err as Error).message;
          this.#scheduleRetry(Math.min(delayMs * 2, 60_000));
        },
      );
    }, delayMs);
    this.#retry.unref();
  }

  /** The `oidc` readiness check. */
  health(): CheckResult {
    return this.#metadata ? { ok: true, detail: `discovered ${this.issuer}` } : { ok: false, detail: this.#lastProblem };
  }

  /** The JWKS key resolver for jose (cached, one refresh in flight, cooldown between refreshes on an unknown kid). */
  keys(): JWTVerifyGetKey | null {
    return this.#jwks;
  }

  /** Whether an unknown kid would wait for the cooldown instead of fetching the keys again. */
  get jwksCoolingDown(): boolean {
    return this.#jwks?.coolingDown ?? false;
  }

  close(): void {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
  }
}
