// Production invariants of spec §9 through the real CLI: a valid production configuration passes with every secret masked, and each invariant broken alone fails start-up with exit 2 naming its key.
import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/index.js';
import { configCheck, expectConfigFailure, expectNoSecrets, productionCase, runCli, setIn, tempDirs, type ProductionCase } from './helpers.js';

const tempDir = tempDirs();

function fresh(): { dir: string; c: ProductionCase } {
  const dir = tempDir();
  return { dir, c: productionCase(dir) };
}

interface Invariant {
  name: string;
  keyPath: string;
  breakIt: (c: ProductionCase) => void;
}

const SHORT_SIGNING = 'short-signing-secret-31-chars!!';
const SHORT_PEPPER = 'short-pepper-secret-is-31-chars';

const invariants: Invariant[] = [
  { name: 'admin signing secret shorter than 32 characters', keyPath: 'admin.signing_secret_ref', breakIt: (c) => { c.vars.GH_SIGNING = SHORT_SIGNING; c.secrets.push(SHORT_SIGNING); } },
  { name: 'admin cookies not secure', keyPath: 'admin.cookie.secure', breakIt: (c) => setIn(c.yaml, 'admin.cookie.secure', false) },
  { name: 'API-key pepper shorter than 32 characters', keyPath: 'auth.api_key_pepper_ref', breakIt: (c) => { c.vars.GH_PEPPER = SHORT_PEPPER; c.secrets.push(SHORT_PEPPER); } },
  { name: 'legacy unpeppered key hashes allowed', keyPath: 'auth.legacy_unpeppered_keys_allowed', breakIt: (c) => setIn(c.yaml, 'auth.legacy_unpeppered_keys_allowed', true) },
  { name: 'PostgreSQL listener without TLS and without declared offload', keyPath: 'gateway.pg_tls', breakIt: (c) => setIn(c.yaml, 'gateway.pg_tls.trusted_tls_offload', false) },
  { name: 'gateway HTTP listener without TLS and without declared offload', keyPath: 'gateway.tls', breakIt: (c) => setIn(c.yaml, 'gateway.tls.trusted_tls_offload', false) },
  { name: 'admin listener without TLS and without declared offload', keyPath: 'admin.tls', breakIt: (c) => setIn(c.yaml, 'admin.tls.trusted_tls_offload', false) },
  { name: 'database.ssl_mode not verify-full', keyPath: 'database.ssl_mode', breakIt: (c) => setIn(c.yaml, 'database.ssl_mode', 'verify-ca') },
  { name: 'database.ssl_ca_file not set', keyPath: 'database.ssl_ca_file', breakIt: (c) => setIn(c.yaml, 'database.ssl_ca_file', undefined) },
  { name: 'audit durability buffered', keyPath: 'audit.durability_mode', breakIt: (c) => setIn(c.yaml, 'audit.durability_mode', 'buffered') },
  { name: 'OIDC issuer over http', keyPath: 'auth.oidc.issuer_url', breakIt: (c) => setIn(c.yaml, 'auth.oidc.issuer_url', 'http://idp.example.com/realms/gatehouse') },
  { name: 'OIDC redirect over http', keyPath: 'auth.oidc.admin_redirect_uri', breakIt: (c) => setIn(c.yaml, 'auth.oidc.admin_redirect_uri', 'http://gatehouse.example.com/auth/oidc/callback') },
  { name: 'OIDC allow_insecure_endpoints true', keyPath: 'auth.oidc.allow_insecure_endpoints', breakIt: (c) => setIn(c.yaml, 'auth.oidc.allow_insecure_endpoints', true) },
  { name: 'embedded store (no database.url)', keyPath: 'database.url', breakIt: (c) => setIn(c.yaml, 'database.url', undefined) },
  { name: 'in-process coordination (no redis.url)', keyPath: 'redis.url', breakIt: (c) => setIn(c.yaml, 'redis.url', undefined) },
];

describe('production configuration through `gatehouse config check`', () => {
  it('a fully valid production configuration passes, printed with every secret masked', async () => {
    const { dir, c } = fresh();
    c.write();
    const result = await configCheck({ cwd: dir, vars: c.vars });
    expect(result.code, result.stderr).toBe(0);
    expectNoSecrets(result, c.secrets);
    const printed = parse(result.stdout.split('\n').slice(1).join('\n')) as Record<string, Record<string, unknown>>;
    expect(printed.environment).toBe('production');
    expect(printed.database!.url).toBe('postgres://gatehouse:****@db.internal:5432/gatehouse?sslmode=verify-full');
    expect(printed.redis!.url).toBe('redis://:****@redis.internal:6379/0');
    expect(printed.admin!.bootstrap_password).toBe('****');
    // References name where a secret lives, which is safe to show.
    expect(printed.admin!.signing_secret_ref).toBe('env:GH_SIGNING');
  });

  for (const inv of invariants) {
    it(`refuses: ${inv.name}`, async () => {
      const { dir, c } = fresh();
      inv.breakIt(c);
      c.write();
      const result = await configCheck({ cwd: dir, vars: c.vars });
      expectConfigFailure(result, inv.keyPath, { count: 1, secrets: c.secrets });
    });
  }
});

describe('production start-up', () => {
  let holder: Server | undefined;
  afterAll(() => holder?.close());

  it('`gatehouse start` exits 2 on an unmet invariant before binding any listener', async () => {
    // A port held here: had start-up reached the listeners it would fail on this port (exit 1), not on configuration.
    holder = createServer();
    await new Promise<void>((r) => holder!.listen(0, '127.0.0.1', r));
    const port = (holder.address() as { port: number }).port;
    const { dir, c } = fresh();
    setIn(c.yaml, 'gateway.http_port', port);
    setIn(c.yaml, 'admin.cookie.secure', false);
    c.write();
    const result = await runCli(['start'], { cwd: dir, vars: c.vars });
    expectConfigFailure(result, 'admin.cookie.secure', { count: 1, secrets: c.secrets });
    expect(result.stdout, 'no log line: nothing was started').toBe('');
  });
});

describe('production invariants in-process (role-dependent and alternative forms)', () => {
  const load = (c: ProductionCase, dir: string) => {
    c.write();
    return loadConfig({ env: c.vars, cwd: dir });
  };

  it('the PostgreSQL listener may terminate TLS itself: cert, key and require_client_tls', () => {
    const { dir, c } = fresh();
    setIn(c.yaml, 'gateway.pg_tls', { cert_file: `${dir}/pg.crt`, key_file: `${dir}/pg.key`, require_client_tls: true, trusted_tls_offload: false });
    expect(load(c, dir).ok).toBe(true);
    setIn(c.yaml, 'gateway.pg_tls.require_client_tls', false);
    const failed = load(c, dir);
    expect(failed.ok).toBe(false);
    if (!failed.ok) expect(failed.problems).toEqual([expect.stringMatching(/^gateway\.pg_tls:/)]);
  });

  it('missing signing secret and pepper are each a problem', () => {
    const { dir, c } = fresh();
    setIn(c.yaml, 'admin.signing_secret_ref', undefined);
    setIn(c.yaml, 'auth.api_key_pepper_ref', undefined);
    const r = load(c, dir);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems.sort()).toEqual(['admin.signing_secret_ref: required in production', 'auth.api_key_pepper_ref: required in production']);
  });

  it('exactly 32 characters is enough', () => {
    const { dir, c } = fresh();
    c.vars.GH_SIGNING = 'x'.repeat(32);
    c.vars.GH_PEPPER = 'y'.repeat(32);
    expect(load(c, dir).ok).toBe(true);
  });

  it('admin-only invariants do not apply to a gateway-only role; the listener invariant does not apply to an admin-only role', () => {
    const { dir, c } = fresh();
    setIn(c.yaml, 'service_role', 'gateway');
    setIn(c.yaml, 'admin.cookie.secure', false);
    setIn(c.yaml, 'admin.signing_secret_ref', undefined);
    expect(load(c, dir).ok).toBe(true);
    setIn(c.yaml, 'service_role', 'admin');
    setIn(c.yaml, 'admin.cookie.secure', true);
    setIn(c.yaml, 'admin.signing_secret_ref', 'env:GH_SIGNING');
    setIn(c.yaml, 'gateway.pg_tls.trusted_tls_offload', false);
    expect(load(c, dir).ok).toBe(true);
  });

  it('the same configuration in development accepts what production refuses', () => {
    const { dir, c } = fresh();
    setIn(c.yaml, 'environment', 'development');
    setIn(c.yaml, 'audit.durability_mode', 'buffered');
    setIn(c.yaml, 'admin.cookie.secure', false);
    setIn(c.yaml, 'database.url', undefined);
    setIn(c.yaml, 'redis.url', undefined);
    expect(load(c, dir).ok).toBe(true);
  });

  it('every invariant broken at once yields one problem each', () => {
    const { dir, c } = fresh();
    for (const inv of invariants) inv.breakIt(c);
    const r = load(c, dir);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      for (const inv of invariants) expect(r.problems.some((p) => p.startsWith(`${inv.keyPath}:`)), inv.keyPath).toBe(true);
      expect(r.problems).toHaveLength(invariants.length);
    }
  });
});
