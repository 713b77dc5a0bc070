// OIDC test helpers: the SERVICE_AUTH__OIDC__* environment for a service pointed at a test provider.
import type { TestProvider } from '../support/oidc-provider.js';

export const ADMIN_CLIENT = { client_id: 'gatehouse-admin', client_secret: 'admin-client-secret-for-tests-0001' };
export const AGENT_AUDIENCE = 'https://gatehouse.test/agents';

export function oidcEnv(provider: TestProvider, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    SERVICE_AUTH__OIDC__ENABLED: 'true',
    SERVICE_AUTH__OIDC__ISSUER_URL: provider.issuer,
    SERVICE_AUTH__OIDC__ADMIN_CLIENT_ID: ADMIN_CLIENT.client_id,
    SERVICE_AUTH__OIDC__ADMIN_CLIENT_SECRET_REF: 'env:GH_TEST_OIDC_CLIENT_SECRET',
    GH_TEST_OIDC_CLIENT_SECRET: ADMIN_CLIENT.client_secret,
    SERVICE_AUTH__OIDC__ADMIN_REDIRECT_URI: 'http://127.0.0.1:1/auth/oidc/callback',
    SERVICE_AUTH__OIDC__AGENT_AUDIENCE: AGENT_AUDIENCE,
    SERVICE_AUTH__OIDC__SCOPES: 'openid,email,groups',
    SERVICE_AUTH__OIDC__ALLOW_INSECURE_ENDPOINTS: 'true',
    SERVICE_AUTH__OIDC__ALLOW_PRIVATE_NETWORK: 'true',
    ...overrides,
  };
}

export const REDIRECT_URI = 'http://127.0.0.1:1/auth/oidc/callback';

/** A tiny browser over fetch: manual redirects, one cookie jar per origin. */
export class CookieBrowser {
  readonly jar = new Map<string, Map<string, string>>();

  async get(url: string, init: RequestInit = {}): Promise<Response> {
    const u = new URL(url);
    const cookies = this.jar.get(u.origin);
    const headers = new Headers(init.headers);
    if (cookies && cookies.size > 0) headers.set('cookie', [...cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const jar = this.jar.get(u.origin) ?? new Map<string, string>();
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
      this.jar.set(u.origin, jar);
    }
    return res;
  }
}

function formOf(html: string, base: string): { action: string; fields: Record<string, string> } | null {
  const form = /<form[^>]*action="([^"]+)"[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
  if (!form) return null;
  const fields: Record<string, string> = {};
  for (const m of form[2]!.matchAll(/<input([^>]*)>/gi)) {
    const name = /name="([^"]+)"/.exec(m[1]!)?.[1];
    if (name !== undefined) fields[name] = /value="([^"]*)"/.exec(m[1]!)?.[1] ?? '';
  }
  return { action: new URL(form[1]!.replace(/&amp;/g, '&'), base).href, fields };
}

/**
 * Follows the provider's pages from an authorization URL as a user would (devInteractions: the login form with any
 * login, then consent) until the provider redirects to `redirectUri`; returns that redirect's URL.
 */
export async function signInAtProvider(browser: CookieBrowser, authorizationUrl: string, login: string, redirectUri = REDIRECT_URI): Promise<URL> {
  let url = authorizationUrl;
  let init: RequestInit = {};
  for (let step = 0; step < 12; step++) {
    const res = await browser.get(url, init);
    init = {};
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      const next = new URL(location, url);
      if (next.href.startsWith(redirectUri)) return next;
      url = next.href;
      continue;
    }
    const html = await res.text();
    const form = formOf(html, url);
    if (!form) throw new Error(`provider page without a form (${res.status}): ${html.slice(0, 300)}`);
    if ('login' in form.fields) Object.assign(form.fields, { login, password: 'any' });
    url = form.action;
    init = { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form.fields).toString() };
  }
  throw new Error('the provider never redirected back');
}
