// Loading order (defaults → YAML → SERVICE_ environment) through the CLI and in-process, and the typed coercion of environment strings.
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig, type Config } from '../../src/config/index.js';
import { configCheck, tempDirs, writeYaml } from './helpers.js';

const dir = tempDirs();

function loaded(env: Record<string, string>, cwd = dir()): Config {
  const r = loadConfig({ env, cwd });
  if (!r.ok) throw new Error(`unexpected problems:\n${r.problems.join('\n')}`);
  return r.config;
}

function problems(env: Record<string, string>, cwd = dir()): string[] {
  const r = loadConfig({ env, cwd });
  return r.ok ? [] : r.problems;
}

describe('loading order', () => {
  it('through the CLI: a default, a YAML value over a default, and an environment value over YAML', async () => {
    const cwd = dir();
    writeYaml(cwd, { gateway: { http_port: 3100 }, catalog: { refresh_interval_seconds: 1800 } });
    const result = await configCheck({ cwd, vars: { SERVICE_CATALOG__REFRESH_INTERVAL_SECONDS: '3600' } });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.split('\n')[0]).toContain(`(file: ${cwd}/config.yaml)`);
    const printed = parse(result.stdout) as Config;
    expect(printed.admin.port).toBe(9090); // default only
    expect(printed.gateway.http_port).toBe(3100); // YAML over the default 3000
    expect(printed.catalog.refresh_interval_seconds).toBe(3600); // environment over YAML 1800 over the default 86400
  });

  it('in-process, one key through all three layers', () => {
    const cwd = dir();
    expect(loaded({}, cwd).gateway.http_port).toBe(3000);
    writeYaml(cwd, { gateway: { http_port: 3100 } });
    expect(loaded({}, cwd).gateway.http_port).toBe(3100);
    expect(loaded({ SERVICE_GATEWAY__HTTP_PORT: '3200' }, cwd).gateway.http_port).toBe(3200);
  });

  it('sections merge key by key: YAML siblings survive an environment override; lists are replaced, not merged', () => {
    const cwd = dir();
    writeYaml(cwd, { gateway: { limits: { request_body_bytes: 2048, sql_bytes: 4096 }, egress: { allow_private_sources: ['a', 'b'] } } });
    const c = loaded({ SERVICE_GATEWAY__LIMITS__SQL_BYTES: '8192', SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'c' }, cwd);
    expect(c.gateway.limits.request_body_bytes).toBe(2048);
    expect(c.gateway.limits.sql_bytes).toBe(8192);
    expect(c.gateway.limits.header_bytes).toBe(16 * 1024);
    expect(c.gateway.egress.allow_private_sources).toEqual(['c']);
  });

  it('a whole section may come from one variable as a JSON object, and nested variables refine it', () => {
    const c = loaded({ SERVICE_GATEWAY__LIMITS: '{"sql_bytes": 1000, "result_rows": 7}', SERVICE_GATEWAY__LIMITS__RESULT_ROWS: '9' });
    expect(c.gateway.limits.sql_bytes).toBe(1000);
    expect(c.gateway.limits.result_rows).toBe(9);
  });

  it('the loaded configuration is frozen', () => {
    const c = loaded({});
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.gateway.limits)).toBe(true);
    expect(Object.isFrozen(c.auth.oidc.scopes)).toBe(true);
  });

  it('only SERVICE_ (upper case) variables are read, and SERVICE_CONFIG_PATH is not a key', () => {
    const cwd = dir();
    writeYaml(cwd, { gateway: { http_port: 3300 } }, 'other.yaml');
    const c = loaded({ service_gateway__http_port: '1', GATEWAY__HTTP_PORT: '2', SERVICE_CONFIG_PATH: 'other.yaml' }, cwd);
    expect(c.gateway.http_port).toBe(3300);
  });
});

describe('environment coercion', () => {
  it('numbers: integers, surrounding spaces, exponents, fractions where the field allows them', () => {
    const c = loaded({
      SERVICE_GATEWAY__HTTP_PORT: ' 3005 ',
      SERVICE_GATEWAY__LIMITS__SQL_BYTES: '1e3',
      SERVICE_NOTIFICATIONS__TIMEOUT_SECONDS: '2.5',
      SERVICE_AUTH__OIDC__CLOCK_TOLERANCE_SECONDS: '0',
    });
    expect(c.gateway.http_port).toBe(3005);
    expect(c.gateway.limits.sql_bytes).toBe(1000);
    expect(c.notifications.timeout_seconds).toBe(2.5);
    expect(c.auth.oidc.clock_tolerance_seconds).toBe(0);
  });

  it('a non-number for a number field is a problem naming the key and the variable', () => {
    for (const raw of ['abc', '3000ms', '0x10', '', 'Infinity']) {
      expect(problems({ SERVICE_GATEWAY__HTTP_PORT: raw }), raw).toEqual(['gateway.http_port: expected a number (from SERVICE_GATEWAY__HTTP_PORT)']);
    }
  });

  it('booleans: true/false, 1/0, yes/no, on/off in any case; anything else is a problem', () => {
    for (const raw of ['true', 'TRUE', '1', 'yes', 'On']) expect(loaded({ SERVICE_GATEWAY__TRUST_PROXY: raw }).gateway.trust_proxy, raw).toBe(true);
    for (const raw of ['false', 'False', '0', 'no', 'off']) expect(loaded({ SERVICE_CACHE__ENABLED: raw }).cache.enabled, raw).toBe(false);
    expect(problems({ SERVICE_CACHE__ENABLED: 'maybe' })).toEqual(['cache.enabled: expected a boolean (true or false) (from SERVICE_CACHE__ENABLED)']);
  });

  it('lists: comma-separated (trimmed, empty items dropped) or a JSON array; an empty string is an empty list', () => {
    const key = 'SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES';
    expect(loaded({ [key]: 'billing-db, crm-api,,warehouse ' }).gateway.egress.allow_private_sources).toEqual(['billing-db', 'crm-api', 'warehouse']);
    expect(loaded({ [key]: '["a,b", "c"]' }).gateway.egress.allow_private_sources).toEqual(['a,b', 'c']);
    expect(loaded({ [key]: '' }).gateway.egress.allow_private_sources).toEqual([]);
    expect(loaded({ SERVICE_NOTIFICATIONS__APPROVAL_EVENTS: 'pending,expired' }).notifications.approval_events).toEqual(['pending', 'expired']);
    expect(problems({ [key]: '[not json' })).toEqual([`gateway.egress.allow_private_sources: expected a JSON array (from ${key})`]);
    expect(problems({ SERVICE_NOTIFICATIONS__APPROVAL_EVENTS: 'pending,sometimes' })).toEqual([expect.stringMatching(/^notifications\.approval_events\.1: must be one of .* \(from SERVICE_NOTIFICATIONS__APPROVAL_EVENTS\)$/)]);
  });

  it('maps: a JSON object', () => {
    const c = loaded({ SERVICE_AUTH__OIDC__ADMIN_GROUP_ROLE_MAP: '{"platform-ops": ["admin", "approver"]}' });
    expect(c.auth.oidc.admin_group_role_map).toEqual({ 'platform-ops': ['admin', 'approver'] });
    expect(problems({ SERVICE_AUTH__OIDC__ADMIN_GROUP_ROLE_MAP: '["admin"]' })).toEqual([
      'auth.oidc.admin_group_role_map: expected a JSON object (from SERVICE_AUTH__OIDC__ADMIN_GROUP_ROLE_MAP)',
    ]);
  });

  it('nullable fields: an empty string or "null" is null, overriding a YAML value', () => {
    const cwd = dir();
    writeYaml(cwd, { database: { url: 'postgres://localhost/gatehouse', migrate_on_start: true }, gateway: { pg_host: '0.0.0.0' } });
    const c = loaded({ SERVICE_DATABASE__URL: '', SERVICE_DATABASE__MIGRATE_ON_START: 'null', SERVICE_GATEWAY__PG_HOST: ' ' }, cwd);
    expect(c.database.url).toBeNull();
    expect(c.database.migrate_on_start).toBeNull();
    expect(c.gateway.pg_host).toBeNull();
  });

  it('strings and enums are taken as written', () => {
    const c = loaded({ SERVICE_DATABASE__SSL_MODE: 'verify-full', SERVICE_SERVICE_ROLE: 'worker', SERVICE_REDIS__KEY_PREFIX: 'tenant-a:' });
    expect(c.database.ssl_mode).toBe('verify-full');
    expect(c.service_role).toBe('worker');
    expect(c.redis.key_prefix).toBe('tenant-a:');
  });

  it('malformed variable names are problems naming the variable', () => {
    expect(problems({ SERVICE_GATEWAY____HTTP_PORT: '1' })).toEqual([expect.stringContaining('malformed environment variable name SERVICE_GATEWAY____HTTP_PORT')]);
    expect(problems({ SERVICE_GATEWAY__HTTP_PORT__X: '1' })).toEqual(['gateway.http_port.x: unknown key (from SERVICE_GATEWAY__HTTP_PORT__X)']);
  });
});
