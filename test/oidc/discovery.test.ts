// Discovery and its checks at start (spec §5.6) against a real oidc-provider: exact issuer, trailing slash, HTTPS endpoints, openid scope, private egress, unreachable provider, and the `oidc` readiness check.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestService } from '../support/service.js';
import { TestProvider } from '../support/oidc-provider.js';
import { loadConfig } from '../../src/config/index.js';
import { oidcEnv } from './support.js';
import type { OidcSettings } from '../../src/oidc/index.js';

let provider: TestProvider;
beforeAll(async () => {
  provider = await TestProvider.start();
});
afterAll(() => provider.stop());

function defaultOidc(): OidcSettings {
  const loaded = loadConfig({ env: { SERVICE_ENVIRONMENT: 'test' } });
  if (!loaded.ok) throw new Error('default configuration invalid');
  return loaded.config.auth.oidc;
}

async function startFails(env: Record<string, string>): Promise<string> {
  try {
    const svc = await startTestService({ env, role: 'gateway' });
    await svc.stop();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('the service started');
}

describe('discovery at start', () => {
  test('a provider that matches starts, and /ready reports the oidc check', async () => {
    const svc = await startTestService({ env: oidcEnv(provider), role: 'gateway' });
    try {
      const ready = (await (await fetch(`${svc.gatewayUrl}/ready`)).json()) as { checks: Record<string, { ok: boolean; detail: string }> };
      expect(ready.checks.oidc).toEqual({ ok: true, detail: `discovered ${provider.issuer}` });
    } finally {
      await svc.stop();
    }
  });

  test('a trailing-slash issuer_url differs from the discovered issuer: start fails naming the key', async () => {
    const message = await startFails(oidcEnv(provider, { SERVICE_AUTH__OIDC__ISSUER_URL: `${provider.issuer}/` }));
    expect(message).toContain('auth.oidc.issuer_url');
    expect(message).toContain('trailing slash');
  });

  test('a discovery document naming another issuer is refused', async () => {
    const other = await TestProvider.start({ discoveryOverride: (d) => ({ ...d, issuer: 'https://evil.example' }) });
    try {
      const message = await startFails(oidcEnv(other));
      expect(message).toContain('auth.oidc.issuer_url: discovery names the issuer "https://evil.example"');
    } finally {
      await other.stop();
    }
  });

  test('plain-HTTP endpoints without allow_insecure_endpoints are refused (and so is an HTTP issuer)', async () => {
    const loaded = loadConfig({ env: { SERVICE_ENVIRONMENT: 'test', ...oidcEnv(provider, { SERVICE_AUTH__OIDC__ALLOW_INSECURE_ENDPOINTS: 'false' }) } });
    expect(loaded.ok).toBe(false);
    if (!loaded.ok) expect(loaded.problems.join('\n')).toContain('auth.oidc.issuer_url: must use https unless auth.oidc.allow_insecure_endpoints');
    // An HTTPS issuer whose discovery lists an HTTP endpoint: the document itself is checked.
    const mixed = await TestProvider.start({ discoveryOverride: (d) => ({ ...d, issuer: 'https://idp.example', jwks_uri: 'http://idp.example/jwks' }) });
    try {
      const { discoveryProblems } = await import('../../src/oidc/index.js');
      const doc = await (await fetch(`${mixed.issuer}/.well-known/openid-configuration`)).json();
      const problems = discoveryProblems({ ...(doc as object), authorization_endpoint: 'https://idp.example/auth', token_endpoint: 'https://idp.example/token', userinfo_endpoint: 'https://idp.example/me' }, {
        ...defaultOidc(),
        issuer_url: 'https://idp.example',
        allow_insecure_endpoints: false,
      });
      expect(problems).toEqual([expect.stringContaining("auth.oidc.allow_insecure_endpoints: discovery's jwks_uri (http://idp.example/jwks) is not HTTPS")]);
    } finally {
      await mixed.stop();
    }
  });

  test('scopes without openid are refused at load', () => {
    const loaded = loadConfig({ env: { SERVICE_ENVIRONMENT: 'test', ...oidcEnv(provider, { SERVICE_AUTH__OIDC__SCOPES: 'email,groups' }) } });
    expect(loaded.ok).toBe(false);
    if (!loaded.ok) expect(loaded.problems.join('\n')).toMatch(/auth\.oidc\.scopes.*openid/);
  });

  test('allow_insecure_endpoints is refused in production', () => {
    const loaded = loadConfig({ env: { SERVICE_ENVIRONMENT: 'production', ...oidcEnv(provider) } });
    expect(loaded.ok).toBe(false);
    if (!loaded.ok) expect(loaded.problems).toContain('auth.oidc.allow_insecure_endpoints: must be false in production');
  });

  test('a loopback provider needs allow_private_network: the egress rules refuse it otherwise', async () => {
    const svc = await startTestService({ env: oidcEnv(provider, { SERVICE_AUTH__OIDC__ALLOW_PRIVATE_NETWORK: 'false' }), role: 'gateway' });
    try {
      const res = await fetch(`${svc.gatewayUrl}/ready`);
      expect(res.status).toBe(503);
      const ready = (await res.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
      expect(ready.checks.oidc?.ok).toBe(false);
      expect(ready.checks.oidc?.detail).toContain('auth.oidc.allow_private_network');
    } finally {
      await svc.stop();
    }
  });

  test('an unreachable provider: not ready outside production', async () => {
    const late = await TestProvider.start();
    const issuer = late.issuer;
    await late.stop();
    const svc = await startTestService({ env: oidcEnv(provider, { SERVICE_AUTH__OIDC__ISSUER_URL: issuer }), role: 'gateway' });
    try {
      const ready = (await (await fetch(`${svc.gatewayUrl}/ready`)).json()) as { checks: Record<string, { ok: boolean; detail: string }> };
      expect(ready.checks.oidc).toEqual({ ok: false, detail: expect.stringContaining('auth.oidc.issuer_url: the provider\'s discovery document could not be read (connection refused)') });
    } finally {
      await svc.stop();
    }
  });

  test('an unreachable provider fails the start in production, naming the key', async () => {
    const late = await TestProvider.start();
    const issuer = late.issuer;
    await late.stop();
    const { OidcProvider, providerEgress } = await import('../../src/oidc/index.js');
    const { createLogger } = await import('../../src/observability/logger.js');
    const log = createLogger({ level: 'silent', service: 'test', role: 'gateway' });
    const egress = providerEgress({ allowPrivate: true, connectTimeoutMs: 1_000, timeoutMs: 2_000, log });
    const base = defaultOidc();
    const p = new OidcProvider({ settings: { ...base, enabled: true, issuer_url: issuer, allow_insecure_endpoints: true }, fetch: egress.fetch, log });
    try {
      await expect(p.start({ production: true })).rejects.toThrow(/^auth\.oidc\.issuer_url: the provider's discovery document could not be read \(connection refused\)$/);
      expect(p.health().ok).toBe(false);
    } finally {
      p.close();
      await egress.close();
    }
  });
});
