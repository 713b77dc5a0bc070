// Start-up failures of spec §7 through the real CLI: unknown keys (YAML and environment, top level and nested), unreadable or malformed YAML, out-of-range values, and every problem reported at once.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { configCheck, expectConfigFailure, problemLines, tempDirs, writeYaml } from './helpers.js';

const dir = tempDirs();

describe('unknown keys', () => {
  it('top level, from YAML', async () => {
    const cwd = dir();
    writeYaml(cwd, { environment: 'development', telemetry: { enabled: true } });
    expectConfigFailure(await configCheck({ cwd }), 'telemetry', { count: 1 });
  });

  it('top level, from a SERVICE_ variable (the message names the variable)', async () => {
    const cwd = dir();
    const result = await configCheck({ cwd, vars: { SERVICE_TELEMETRY: 'on' } });
    expectConfigFailure(result, 'telemetry', { count: 1 });
    expect(problemLines(result.stderr)[0]).toContain('SERVICE_TELEMETRY');
  });

  it('nested, from YAML (gateway.limits.foo)', async () => {
    const cwd = dir();
    writeYaml(cwd, { gateway: { limits: { request_body_bytes: 1024, foo: 1 } } });
    expectConfigFailure(await configCheck({ cwd }), 'gateway.limits.foo', { count: 1 });
  });

  it('nested, from a SERVICE_ variable (SERVICE_GATEWAY__LIMITS__FOO)', async () => {
    const cwd = dir();
    const result = await configCheck({ cwd, vars: { SERVICE_GATEWAY__LIMITS__FOO: '1' } });
    expectConfigFailure(result, 'gateway.limits.foo', { count: 1 });
    expect(problemLines(result.stderr)[0]).toContain('SERVICE_GATEWAY__LIMITS__FOO');
  });
});

describe('YAML that cannot be read or parsed', () => {
  it('a syntax error names the file, line and column, and never quotes the offending line', async () => {
    const cwd = dir();
    const secret = 'Unterminated-Bootstrap-Secret-42';
    writeFileSync(path.join(cwd, 'config.yaml'), `admin:\n  port: 9090\n  bootstrap_password: "${secret}\n`);
    const result = await configCheck({ cwd });
    expectConfigFailure(result, `config file ${path.join(cwd, 'config.yaml')}`, { count: 1, secrets: [secret] });
    expect(result.stderr).toMatch(/YAML syntax error at line \d+, column \d+/);
  });

  it('SERVICE_CONFIG_PATH naming a missing file', async () => {
    const cwd = dir();
    const missing = path.join(cwd, 'nowhere', 'gatehouse.yaml');
    // A local config.yaml must not be used instead of the file that was asked for.
    writeYaml(cwd, { environment: 'development' });
    const result = await configCheck({ cwd, vars: { SERVICE_CONFIG_PATH: missing } });
    expectConfigFailure(result, `config file ${missing}`, { count: 1 });
    expect(result.stderr).toContain('cannot be read (ENOENT)');
  });

  it('an unresolved YAML alias is a configuration problem (exit 2), not a crash', async () => {
    const cwd = dir();
    writeFileSync(path.join(cwd, 'config.yml'), 'gateway:\n  http_port: *undefined_anchor\n');
    const result = await configCheck({ cwd });
    expectConfigFailure(result, `config file ${path.join(cwd, 'config.yml')}`, { count: 1 });
  });

  it('in-process: a directory, an alias bomb, a scalar document', () => {
    const cwd = dir();
    mkdirSync(path.join(cwd, 'conf.d'));
    const asDir = loadConfig({ env: { SERVICE_CONFIG_PATH: 'conf.d' }, cwd });
    expect(asDir.ok || asDir.problems).toEqual([`SERVICE_CONFIG_PATH: ${path.join(cwd, 'conf.d')} is not a file`]);

    const bomb = ['a: &a [x,x,x,x,x,x,x,x,x,x]', 'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]', 'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]', 'd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]'];
    writeFileSync(path.join(cwd, 'bomb.yaml'), `${bomb.join('\n')}\n`);
    const bombed = loadConfig({ env: { SERVICE_CONFIG_PATH: 'bomb.yaml' }, cwd });
    expect(bombed.ok || bombed.problems).toEqual([expect.stringContaining('Excessive alias count')]);

    writeFileSync(path.join(cwd, 'scalar.yaml'), 'just-a-string\n');
    const scalar = loadConfig({ env: { SERVICE_CONFIG_PATH: 'scalar.yaml' }, cwd });
    expect(scalar.ok || scalar.problems).toEqual([expect.stringContaining('the top level must be a mapping')]);
  });

  it('in-process: an empty file is an empty configuration; duplicate keys are refused', () => {
    const cwd = dir();
    writeFileSync(path.join(cwd, 'config.yaml'), '# nothing yet\n');
    expect(loadConfig({ env: {}, cwd }).ok).toBe(true);
    writeFileSync(path.join(cwd, 'config.yaml'), 'admin:\n  port: 1\n  port: 2\n');
    const dup = loadConfig({ env: {}, cwd });
    expect(dup.ok || dup.problems).toEqual([expect.stringContaining('Map keys must be unique')]);
  });

  it('in-process: config.yaml wins over config.yml; SERVICE_CONFIG_PATH wins over both', () => {
    const cwd = dir();
    writeYaml(cwd, { gateway: { http_port: 1111 } }, 'config.yml');
    let r = loadConfig({ env: {}, cwd });
    expect(r.ok && r.config.gateway.http_port).toBe(1111);
    writeYaml(cwd, { gateway: { http_port: 2222 } }, 'config.yaml');
    r = loadConfig({ env: {}, cwd });
    expect(r.ok && r.config.gateway.http_port).toBe(2222);
    writeYaml(cwd, { gateway: { http_port: 3333 } }, 'elsewhere.yaml');
    r = loadConfig({ env: { SERVICE_CONFIG_PATH: path.join(cwd, 'elsewhere.yaml') }, cwd });
    expect(r.ok && r.config.gateway.http_port).toBe(3333);
    expect(r.ok && r.file).toBe(path.join(cwd, 'elsewhere.yaml'));
  });
});

describe('out-of-range values', () => {
  it('gateway.http_port 70000', async () => {
    const cwd = dir();
    writeYaml(cwd, { gateway: { http_port: 70000 } });
    const result = await configCheck({ cwd });
    expectConfigFailure(result, 'gateway.http_port', { count: 1 });
    expect(result.stderr).toContain('at most 65535');
  });

  it('catalog.refresh_interval_seconds 100 (< 900)', async () => {
    const cwd = dir();
    writeYaml(cwd, { catalog: { refresh_interval_seconds: 100 } });
    const result = await configCheck({ cwd });
    expectConfigFailure(result, 'catalog.refresh_interval_seconds', { count: 1 });
    expect(result.stderr).toContain('at least 900');
  });

  it('a negative number (worker.concurrency -1, from the environment)', async () => {
    const cwd = dir();
    const result = await configCheck({ cwd, vars: { SERVICE_WORKER__CONCURRENCY: '-1' } });
    expectConfigFailure(result, 'worker.concurrency', { count: 1 });
    expect(problemLines(result.stderr)[0]).toContain('SERVICE_WORKER__CONCURRENCY');
  });

  it('a value outside an enum (database.ssl_mode)', async () => {
    const cwd = dir();
    writeYaml(cwd, { database: { ssl_mode: 'sometimes' } });
    const result = await configCheck({ cwd });
    expectConfigFailure(result, 'database.ssl_mode', { count: 1 });
    expect(result.stderr).toContain('"verify-full"');
  });

  it('in-process: bounds at the edges, fractions, wrong types, reserved semantic_cache', () => {
    const cwd = dir();
    const problems = (vars: Record<string, string>) => {
      const r = loadConfig({ env: vars, cwd });
      return r.ok ? [] : r.problems;
    };
    expect(problems({ SERVICE_CATALOG__REFRESH_INTERVAL_SECONDS: '900', SERVICE_GATEWAY__HTTP_PORT: '65535', SERVICE_ADMIN__PORT: '0' })).toEqual([]);
    expect(problems({ SERVICE_CATALOG__REFRESH_INTERVAL_SECONDS: '899' })).toEqual([expect.stringMatching(/^catalog\.refresh_interval_seconds: must be at least 900/)]);
    expect(problems({ SERVICE_GATEWAY__HTTP_PORT: '-1' })).toEqual([expect.stringMatching(/^gateway\.http_port: must be at least 0/)]);
    expect(problems({ SERVICE_WORKER__CONCURRENCY: '1.5' })).toEqual([expect.stringMatching(/^worker\.concurrency: /)]);
    expect(problems({ SERVICE_SERVICE_ROLE: 'everything' })).toEqual([expect.stringMatching(/^service_role: must be one of "all"/)]);
    expect(problems({ SERVICE_ENVIRONMENT: 'staging' })).toEqual([expect.stringMatching(/^environment: must be one of "development", "test", "production"/)]);
    expect(problems({ SERVICE_SEMANTIC_CACHE__ENABLED: 'true' })).toEqual([expect.stringMatching(/^semantic_cache\.enabled: /)]);
    expect(problems({ SERVICE_AUTH__OIDC__SCOPES: 'profile,email' })).toEqual([expect.stringMatching(/^auth\.oidc\.scopes: must include openid/)]);
    writeYaml(cwd, { gateway: { limits: 'big' } });
    expect(problems({})).toEqual([expect.stringMatching(/^gateway\.limits: expected object/)]);
  });

  it('in-process: cross-field rules name the key', () => {
    const cwd = dir();
    const problems = (tree: unknown) => {
      writeYaml(cwd, tree);
      const r = loadConfig({ env: { GH_TOKEN: 'xoxb-token-for-the-test' }, cwd });
      return r.ok ? [] : r.problems;
    };
    expect(problems({ gateway: { http_port: 9090 } })).toEqual([expect.stringMatching(/^admin\.port: 9090 is also used by gateway\.http_port/)]);
    expect(problems({ gateway: { tls: { cert_file: '/etc/gh/cert.pem' } } })).toEqual(['gateway.tls: cert_file and key_file must be set together']);
    expect(problems({ gateway: { pg_port: 15432, pg_tls: { require_client_tls: true } } })).toEqual([expect.stringMatching(/^gateway\.pg_tls\.require_client_tls: /)]);
    expect(problems({ audit: { spool: { max_bytes: 1000, segment_bytes: 2000 } } })).toEqual([expect.stringMatching(/^audit\.spool\.segment_bytes: /)]);
    expect(problems({ audit: { retry: { initial_backoff_ms: 5000, max_backoff_ms: 1000 } } })).toEqual([expect.stringMatching(/^audit\.retry\.initial_backoff_ms: /)]);
    expect(problems({ redis: { url: 'redis://s1:26379', sentinels: ['s2:26379'] } })).toEqual([expect.stringMatching(/^redis\.sentinels: needs redis\.sentinel_master/)]);
    expect(problems({ redis: { url: 'redis://n1:6379', cluster_nodes: ['n2:6379'] } })).toEqual([expect.stringMatching(/^redis\.cluster_nodes: needs redis\.cluster: true/)]);
    expect(problems({ redis: { url: 'redis://n1:6379', cluster: true, sentinel_master: 'm' } })).toEqual([expect.stringMatching(/^redis\.cluster: a Redis Cluster is not managed by sentinels/)]);
    expect(problems({ redis: { sentinel_master: 'm' } })).toEqual([expect.stringMatching(/^redis\.sentinel_master: needs redis\.url/)]);
    expect(problems({ redis: { url: 'redis://n1:6379/2', cluster: true } })).toEqual(['redis.url: a Redis Cluster has only database 0']);
    expect(problems({ redis: { url: 'redis://:pw@n1:6379/0', cluster: true, cluster_nodes: ['n2:6379', '[::1]:6380'] } })).toEqual([]);
    expect(problems({ redis: { url: 'redis://s1:26379', sentinel_master: 'mymaster', sentinels: ['s2:26379'] } })).toEqual([]);
    expect(problems({ gateway: { timeouts: { shutdown_grace_ms: 5000, pg_drain_ms: 5000 } } })).toEqual([expect.stringMatching(/^gateway\.timeouts\.pg_drain_ms: must be shorter than gateway\.timeouts\.shutdown_grace_ms/)]);
    expect(problems({ gateway: { timeouts: { shutdown_grace_ms: 5000, pg_drain_ms: 4000 } } })).toEqual([]);
    expect(problems({ pii: { default_mode: 'deep' } })).toEqual([expect.stringMatching(/^pii\.default_mode: /)]);
    expect(problems({ admin: { session_ttl_seconds: 600, session_idle_seconds: 900 } })).toEqual([expect.stringMatching(/^admin\.session_idle_seconds: /)]);
    expect(problems({ notifications: { enabled: true } })).toEqual([expect.stringMatching(/^notifications\.enabled: needs at least one Slack target/)]);
    expect(problems({ notifications: { slack_bot_token_ref: 'env:GH_TOKEN' } })).toEqual([expect.stringMatching(/^notifications\.slack_channel: required/)]);
    expect(problems({ auth: { oidc: { enabled: true } } }).map((p) => p.split(':')[0]).sort()).toEqual([
      'auth.oidc.admin_client_id',
      'auth.oidc.admin_client_secret_ref',
      'auth.oidc.admin_redirect_uri',
      'auth.oidc.issuer_url',
    ]);
  });
});

describe('`config check` prints every problem', () => {
  it('a file with four different problems gives four lines', async () => {
    const cwd = dir();
    const literal = 'a-literal-signing-secret-value-4242';
    writeYaml(cwd, {
      colour: 'blue',
      gateway: { http_port: 70000 },
      database: { ssl_mode: 'always' },
      admin: { signing_secret_ref: literal },
    });
    const result = await configCheck({ cwd });
    expectConfigFailure(result, 'colour', { count: 4, secrets: [literal] });
    const keys = problemLines(result.stderr).map((l) => l.split(':')[0]).sort();
    expect(keys).toEqual(['admin.signing_secret_ref', 'colour', 'database.ssl_mode', 'gateway.http_port']);
  });
});
