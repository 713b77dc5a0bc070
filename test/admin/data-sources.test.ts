// Data sources, connectors, role records and grants over the admin API against real PostgreSQL and Redis: masking, real connection tests, validation, grant expiry.
import { createServer, type Server } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { loadSourceRoleContext } from '../../src/store/repos/grants.js';
import { sourceRoleDecision } from '../../src/governance/source-roles.js';
import { authenticateAgent, agentAuthDeps } from '../../src/identity/index.js';
import { maskSourceConfig } from '../../src/connectors/registry.js';
import { expect422, expectNoSecrets, startResourceFixture, type ResourceFixture } from './support.js';

const PG_PASSWORD = 'pg-literal-s3cret-value-771';
const HTTP_TOKEN = 'http-literal-token-value-9a8b7c';
const FILE_SECRET = 'file-referenced-secret-6d5e4f';

let fx: ResourceFixture;
let dir: string;
let closedPort: number;

async function freeClosedPort(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  fx = await startResourceFixture({ SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'private-ok' });
  dir = await mkdtemp(path.join(tmpdir(), 'gh-ds-'));
  await writeFile(path.join(dir, 'pg-password'), `${FILE_SECRET}\n`, { mode: 0o600 });
  closedPort = await freeClosedPort();
}, 60_000);

afterAll(async () => {
  await fx?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('data sources', () => {
  it('creates with a generated unique slug, default roles, and masked credentials everywhere', async () => {
    const body = { name: 'Orders DB', source_type: 'postgres', connection_config: { host: '127.0.0.1', database: 'postgres', user: 'postgres', password: PG_PASSWORD }, create_default_roles: true };
    const a = await fx.api('POST', '/api/data-sources', body);
    expect(a.status, a.text).toBe(201);
    expect(a.json.source_id).toBe('orders-db');
    expect(a.json.connection_config).toMatchObject({ host: '127.0.0.1', port: 5432, password: '****', credential_mode: 'literal' });
    expect(Object.keys(a.json).sort()).toEqual(['cache_strategy', 'connection_config', 'created_at', 'enabled', 'id', 'metadata', 'name', 'source_id', 'source_type', 'updated_at']);
    const b = await fx.api('POST', '/api/data-sources', body);
    expect(b.json.source_id).toBe('orders-db-2');
    expect((await fx.api('POST', '/api/data-sources', { ...body, source_id: 'orders-db' })).status).toBe(409);

    const roles = await fx.api('GET', '/api/data-sources/orders-db/roles');
    expect(roles.json.map((r: { role_key: string }) => r.role_key)).toEqual(['reader', 'writer', 'admin']);
    expect(roles.json[0].rules.sql[0]).toMatchObject({ operations: ['read'], tables: ['*.*'] });

    // The stored row keeps the literal (the source needs it); only views are masked.
    const row = await fx.svc.running.services.db.selectFrom('data_sources').select('connection_config').where('source_id', '=', 'orders-db').executeTakeFirstOrThrow();
    expect(row.connection_config.password).toBe(PG_PASSWORD);

    // Sending back the mask keeps the stored credential.
    const patched = await fx.api('PATCH', '/api/data-sources/orders-db', { connection_config: { ...a.json.connection_config, credential_mode: undefined, database: 'template1' } });
    expect(patched.status, patched.text).toBe(200);
    const after = await fx.svc.running.services.db.selectFrom('data_sources').select('connection_config').where('source_id', '=', 'orders-db').executeTakeFirstOrThrow();
    expect(after.connection_config).toMatchObject({ database: 'template1', password: PG_PASSWORD });

    const list = await fx.api('GET', '/api/data-sources');
    expect(list.json.length).toBe(2);
    expect(fx.svc.running.services.registry.get('orders-db') ?? (await fx.svc.running.services.registry.reload(), fx.svc.running.services.registry.get('orders-db'))).toBeDefined();
  });

  it('http sources: references are shown, literals masked; the connector list counts usage', async () => {
    const ref = await fx.api('POST', '/api/data-sources', { name: 'CRM', source_type: 'http', source_id: 'crm', connection_config: { base_url: 'https://crm.example.com/api', token_ref: 'env:CRM_TOKEN' } });
    expect(ref.status, ref.text).toBe(201);
    expect(ref.json.connection_config).toMatchObject({ token_ref: 'env:CRM_TOKEN', credential_mode: 'reference', auth_header: 'Authorization' });
    const lit = await fx.api('POST', '/api/data-sources', { name: 'Tickets', source_type: 'http', connection_config: { base_url: 'https://tickets.example.com', token: HTTP_TOKEN } });
    expect(lit.json.connection_config).toMatchObject({ token: '****', credential_mode: 'literal' });
    const none = await fx.api('POST', '/api/data-sources', { name: 'Open data', source_type: 'http', connection_config: { base_url: 'https://open.example.com' } });
    expect(none.json.connection_config.credential_mode).toBe('none');

    const connectors = await fx.api('GET', '/api/connectors');
    expect(connectors.status).toBe(200);
    const byKey = Object.fromEntries(connectors.json.map((c: { key: string }) => [c.key, c]));
    expect(byKey.postgres).toMatchObject({ active: true, usage: 2, capabilities: ['sql'] });
    expect(byKey.http).toMatchObject({ active: true, usage: 3, capabilities: ['http'] });
  });

  it('maskSourceConfig hides literals, URL passwords and undeclared secret-looking keys', () => {
    const masked = maskSourceConfig({ password: 'p', token_ref: 'env:X', nested: { api_key: 'k', url: 'postgres://u:pw@h/db' } }, [{ literal: 'token', ref: 'token_ref' }]);
    expect(JSON.stringify(masked)).not.toMatch(/"p"|"k"|:pw@/);
    expect(masked).toMatchObject({ password: '****', token_ref: 'env:X', credential_mode: 'reference' });
    expect(maskSourceConfig({ token_ref: 'not-a-ref-but-a-secret' }, [{ literal: 'token', ref: 'token_ref' }]).token_ref).toBe('****');
  });

  it('delete, unknown ids', async () => {
    expect((await fx.api('GET', '/api/data-sources/nope')).status).toBe(404);
    expect((await fx.api('PATCH', '/api/data-sources/nope', { enabled: false })).status).toBe(404);
    expect((await fx.api('DELETE', '/api/data-sources/orders-db-2')).status).toBe(200);
    expect((await fx.api('DELETE', '/api/data-sources/orders-db-2')).status).toBe(404);
  });
});

describe('connection test', () => {
  it('connects to the real local PostgreSQL', async () => {
    const res = await fx.api('POST', '/api/data-sources/test', { source_type: 'postgres', source_id: 'private-ok', connection_config: { host: '127.0.0.1', port: 5432, database: 'postgres', user: 'postgres' } });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ ok: true, error: null });
    expect(res.json.latency_ms).toBeGreaterThan(0);
  });

  it('a password from a file reference is resolved at use time (trust auth ignores it, the resolution must still work)', async () => {
    const res = await fx.api('POST', '/api/data-sources/test', { source_type: 'postgres', source_id: 'private-ok', connection_config: { host: '127.0.0.1', database: 'postgres', user: 'postgres', password_ref: `file:${dir}/pg-password` } });
    expect(res.json).toMatchObject({ ok: true });
    const missing = await fx.api('POST', '/api/data-sources/test', { source_type: 'postgres', source_id: 'private-ok', connection_config: { host: '127.0.0.1', database: 'postgres', user: 'postgres', password_ref: `file:${dir}/absent` } });
    expect(missing.json).toMatchObject({ ok: false, error: 'credential reference could not be resolved' });
    expect(missing.text).not.toContain(dir);
  });

  it('a closed port fails fast with a safe error; nothing is stored', async () => {
    const before = (await fx.api('GET', '/api/data-sources')).json.length;
    const started = Date.now();
    const res = await fx.api('POST', '/api/data-sources/test', { source_type: 'postgres', source_id: 'private-ok', name: 'x', connection_config: { host: '127.0.0.1', port: closedPort, database: 'postgres', user: 'postgres', password: PG_PASSWORD } });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(res.json).toEqual({ ok: false, latency_ms: expect.any(Number), error: 'connection refused' });
    expect(res.text).not.toContain(String(closedPort));
    // The HTTP test honours the egress rules: loopback only for a source_id the operator listed for private egress.
    const http = await fx.api('POST', '/api/data-sources/test', { source_type: 'http', source_id: 'private-ok', connection_config: { base_url: `http://127.0.0.1:${closedPort}/`, token: HTTP_TOKEN } });
    expect(http.json).toMatchObject({ ok: false, error: 'connection refused' });
    const refused = await fx.api('POST', '/api/data-sources/test', { source_type: 'http', connection_config: { base_url: `http://127.0.0.1:${closedPort}/`, token: HTTP_TOKEN } });
    expect(refused.json).toMatchObject({ ok: false, error: expect.stringMatching(/^target address not allowed/) });
    expect(refused.text).not.toContain('127.0.0.1');
    const wrongDb = await fx.api('POST', '/api/data-sources/test', { source_type: 'postgres', source_id: 'private-ok', connection_config: { host: '127.0.0.1', database: 'no_such_db_here', user: 'postgres' } });
    expect(wrongDb.json).toMatchObject({ ok: false, error: 'database does not exist' });
    expect(wrongDb.text).not.toContain('no_such_db_here');
    expect((await fx.api('GET', '/api/data-sources')).json.length).toBe(before);
  });
});

describe('data source validation (422 with exact loc)', () => {
  it('create, update and test bodies', async () => {
    expect422(await fx.api('POST', '/api/data-sources', { source_type: 'postgres' }), ['body', 'name']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x' }), ['body', 'source_type']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'mongodb' }), ['body', 'source_type']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'postgres', source_id: 'Bad Id!' }), ['body', 'source_id']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'postgres', connection_config: { database: 'd', user: 'u' } }), ['body', 'connection_config', 'host']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'postgres', connection_config: { host: 'h', database: 'd', user: 'u', port: 70000 } }), ['body', 'connection_config', 'port']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'postgres', connection_config: { host: 'h', database: 'd', user: 'u', password_ref: 'hunter2' } }), ['body', 'connection_config', 'password_ref']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'postgres', connection_config: { host: 'h', database: 'd', user: 'u', sslmode: 'x' } }), ['body', 'connection_config', 'sslmode']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'http', connection_config: { base_url: 'ftp://x' } }), ['body', 'connection_config', 'base_url']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'http', connection_config: { base_url: 'https://u:p@x.example' } }), ['body', 'connection_config', 'base_url']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'http', connection_config: { base_url: 'https://x.example', token: 't', token_ref: 'env:T' } }), ['body', 'connection_config', 'token_ref']);
    expect422(await fx.api('POST', '/api/data-sources', { name: 'x', source_type: 'http', connector_key: 'postgres', connection_config: {} }), ['body', 'source_type']);
    expect422(await fx.api('PATCH', '/api/data-sources/crm', { connection_config: { base_url: 'nope' } }), ['body', 'connection_config', 'base_url']);
    expect422(await fx.api('PATCH', '/api/data-sources/crm', { enabled: 'no' }), ['body', 'enabled']);
    expect422(await fx.api('POST', '/api/data-sources/test', {}), ['body', 'source_type']);
    expect422(await fx.api('POST', '/api/data-sources/test', { source_type: 'postgres', source_id: 'private-ok', connection_config: { host: 'h' } }), ['body', 'connection_config', 'database']);
    expect422(await fx.api('GET', '/api/data-sources/bad%20id'), ['path', 'source_id']);
  });
});

describe('roles and grants', () => {
  it('grants by role_key and role_id, advance the grant version, and honour expiry through loadSourceRoleContext', async () => {
    const { db } = fx.svc.running.services;
    const identity = await fx.api('POST', '/api/identities', { name: 'grantee', generate_key: true });
    const id = identity.json.id as number;
    const key = identity.json.api_key as string;
    const deps = agentAuthDeps(fx.svc.running.services);
    const v0 = (await authenticateAgent(deps, `Bearer ${key}`)).grant_version;

    const g = await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'orders-db', role_key: 'reader' });
    expect(g.status, g.text).toBe(201);
    expect(Object.keys(g.json).sort()).toEqual(['enabled', 'expires_at', 'granted_by', 'id', 'identity_id', 'role_id', 'role_key', 'source_id']);
    expect(g.json).toMatchObject({ identity_id: id, source_id: 'orders-db', role_key: 'reader', enabled: true, expires_at: null });
    expect(typeof g.json.granted_by).toBe('number');
    // The key session was revoked: the next authentication sees the advanced version.
    const v1 = (await authenticateAgent(deps, `Bearer ${key}`)).grant_version;
    expect(v1).toBeGreaterThan(v0);
    expect((await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'orders-db', role_id: g.json.role_id })).status).toBe(409);

    const read = { kind: 'sql', operation: 'read', tables: ['public.orders'] } as const;
    let ctx = await loadSourceRoleContext(db, id, 'orders-db');
    expect(ctx?.grant_version).toBe(v1);
    expect(sourceRoleDecision(ctx!, read).allowed).toBe(true);
    expect(sourceRoleDecision(ctx!, { kind: 'sql', operation: 'write', tables: ['public.orders'] }).allowed).toBe(false);

    const soon = new Date(Date.now() + 60_000).toISOString();
    const dated = await fx.api('PATCH', `/api/identities/${id}/grants/${g.json.id}`, { expires_at: soon });
    expect(dated.status, dated.text).toBe(200);
    expect(Date.parse(dated.json.expires_at)).toBe(Date.parse(soon));
    ctx = await loadSourceRoleContext(db, id, 'orders-db');
    expect(ctx!.grant_version).toBeGreaterThan(v1);
    expect(sourceRoleDecision(ctx!, read).allowed).toBe(true);
    // Past its expiry the same grant allows nothing.
    expect(sourceRoleDecision({ ...ctx!, now: new Date(Date.now() + 120_000) }, read)).toMatchObject({ allowed: false });
    await db.updateTable('source_role_grants').set({ expires_at: sql<Date>`now() - interval '1 second'` }).where('id', '=', g.json.id).execute();
    ctx = await loadSourceRoleContext(db, id, 'orders-db');
    const d = sourceRoleDecision(ctx!, read);
    expect(d.allowed).toBe(false);
    expect(d.reason).toContain('expired');

    const off = await fx.api('PATCH', `/api/identities/${id}/grants/${g.json.id}`, { enabled: false, expires_at: null });
    expect(off.json).toMatchObject({ enabled: false, expires_at: null });
    expect(sourceRoleDecision((await loadSourceRoleContext(db, id, 'orders-db'))!, read).allowed).toBe(false);

    const byId = await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'crm', role_key: 'reader' });
    expect(byId.status).toBe(404); // crm has no roles yet
    const defaults = await fx.api('POST', '/api/data-sources/crm/roles/defaults');
    expect(defaults.json.map((r: { role_key: string }) => r.role_key)).toEqual(['reader', 'writer', 'admin']);
    const writer = defaults.json[1];
    const w = await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'crm', role_id: writer.id, role_key: 'writer' });
    expect(w.status, w.text).toBe(201);
    const httpCtx = (await loadSourceRoleContext(db, id, 'crm'))!;
    expect(sourceRoleDecision(httpCtx, { kind: 'http', method: 'POST', path: '/tickets' }).allowed).toBe(true);
    expect(sourceRoleDecision(httpCtx, { kind: 'http', method: 'DELETE', path: '/tickets/1' }).allowed).toBe(false);

    const list = await fx.api('GET', `/api/identities/${id}/grants`);
    expect(list.json.length).toBe(2);
    expect((await fx.api('DELETE', `/api/identities/${id}/grants/${w.json.id}`)).status).toBe(200);
    expect((await fx.api('DELETE', `/api/identities/${id}/grants/${w.json.id}`)).status).toBe(404);
    expect(await loadSourceRoleContext(db, 999_999, 'crm')).toBeNull();
  });

  it('custom role records and their validation', async () => {
    const created = await fx.api('POST', '/api/data-sources/crm/roles', {
      role_key: 'ticket-triage',
      description: 'read tickets, update their status',
      rules: { http: [{ methods: ['GET'], paths: ['/tickets/**'], approval: 'never' }, { methods: ['PATCH'], paths: ['/tickets/*/status'], approval: 'always' }] },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ source_id: 'crm', role_key: 'ticket-triage', enabled: true });
    expect((await fx.api('POST', '/api/data-sources/crm/roles', { role_key: 'ticket-triage', rules: {} })).status).toBe(409);
    expect((await fx.api('POST', '/api/data-sources/nope/roles', { role_key: 'r', rules: {} })).status).toBe(404);
    expect422(await fx.api('POST', '/api/data-sources/crm/roles', { role_key: 'Bad Key', rules: {} }), ['body', 'role_key']);
    expect422(await fx.api('POST', '/api/data-sources/crm/roles', { role_key: 'r1', rules: { http: [{ methods: ['GET'], paths: ['no-slash'] }] } }), ['body', 'rules', 'http', 0, 'paths', 0]);
    expect422(await fx.api('POST', '/api/data-sources/crm/roles', { role_key: 'r1', rules: { http: [{ methods: ['FETCH'], paths: ['/x'] }] } }), ['body', 'rules', 'http', 0, 'methods', 0]);
    expect422(await fx.api('POST', '/api/data-sources/crm/roles', { role_key: 'r1', rules: { sql: [{ operations: ['drop'], tables: ['*.*'] }] } }), ['body', 'rules', 'sql', 0, 'operations', 0]);
    const patched = await fx.api('PATCH', `/api/data-sources/crm/roles/${created.json.id}`, { enabled: false });
    expect(patched.json.enabled).toBe(false);
    expect422(await fx.api('PATCH', '/api/data-sources/crm/roles/abc', { enabled: false }), ['path', 'role_id']);
    expect((await fx.api('DELETE', `/api/data-sources/orders-db/roles/${created.json.id}`)).status).toBe(404);
    expect((await fx.api('DELETE', `/api/data-sources/crm/roles/${created.json.id}`)).status).toBe(200);
  });

  it('grant validation (422 with exact loc) and unknown ids', async () => {
    const identity = await fx.api('POST', '/api/identities', { name: 'grant-validation', generate_key: true });
    const id = identity.json.id as number;
    expect422(await fx.api('POST', `/api/identities/${id}/grants`, { role_key: 'reader' }), ['body', 'source_id']);
    expect422(await fx.api('POST', `/api/identities/${id}/grants`, { source_id: '', role_key: 'reader' }), ['body', 'source_id']);
    expect422(await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'crm' }), ['body', 'role_key']);
    expect422(await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'crm', role_id: 'one' }), ['body', 'role_id']);
    expect422(await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'crm', role_key: 'reader', expires_at: 'tomorrow' }), ['body', 'expires_at']);
    expect422(await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'crm', role_key: 'reader', expires_at: '2001-01-01T00:00:00Z' }), ['body', 'expires_at']);
    expect422(await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'crm', role_key: 'admin', role_id: (await fx.api('GET', '/api/data-sources/crm/roles')).json[0].id }), ['body', 'role_key']);
    expect422(await fx.api('GET', '/api/identities/x/grants'), ['path', 'id']);
    expect422(await fx.api('DELETE', `/api/identities/${id}/grants/x`), ['path', 'grant_id']);
    expect422(await fx.api('PATCH', `/api/identities/${id}/grants/1`, { enabled: 'maybe' }), ['body', 'enabled']);
    expect((await fx.api('POST', '/api/identities/999999/grants', { source_id: 'crm', role_key: 'reader' })).status).toBe(404);
    expect((await fx.api('POST', `/api/identities/${id}/grants`, { source_id: 'nope', role_key: 'reader' })).status).toBe(404);
    expect((await fx.api('PATCH', `/api/identities/${id}/grants/999999`, { enabled: false })).status).toBe(404);
    expect((await fx.api('GET', '/api/identities/999999/grants')).status).toBe(404);
  });
});

describe('secrets', () => {
  it('no response body in this suite contains a test secret', async () => {
    const { db } = fx.svc.running.services;
    const keys = (await db.selectFrom('identities').select(['api_key_digest', 'scram_verifier']).execute()).flatMap((r) => [r.api_key_digest, r.scram_verifier]).filter((v): v is string => typeof v === 'string');
    expectNoSecrets(fx.bodies.filter((b) => !/"api_key":"gh_/.test(b)), [PG_PASSWORD, HTTP_TOKEN, FILE_SECRET, ...keys]);
  });

  it('no admin audit entry contains a test secret, and changes are recorded with before/after', async () => {
    expectNoSecrets(fx.audits, [PG_PASSWORD, HTTP_TOKEN, FILE_SECRET]);
    expect(fx.audits.join('\n')).not.toMatch(/gh_[A-Za-z0-9_-]{43}/);
    const update = fx.audits.map((a) => JSON.parse(a)).find((e) => e.action === 'data_source.update');
    expect(update).toMatchObject({ target: { type: 'data_source', id: 'orders-db' }, outcome: 'success', changes: { before: { connection_config: { password: '****' } }, after: { connection_config: { database: 'template1' } } } });
    expect(typeof update.admin_user_id).toBe('number');
    for (const action of ['data_source.create', 'data_source.delete', 'data_source.test', 'grant.create', 'grant.update', 'grant.delete', 'source_role.create', 'identity.create']) {
      expect(fx.audits.some((a) => a.includes(`"action":"${action}"`)), action).toBe(true);
    }
  });

  it('the OpenAPI document describes these routes', async () => {
    const doc = await fx.api('GET', '/api/openapi.json');
    for (const p of ['/api/identities', '/api/identities/{id}/rotate-key', '/api/data-sources/{source_id}', '/api/data-sources/test', '/api/connectors', '/api/identities/{id}/grants/{grant_id}', '/api/data-sources/{source_id}/roles']) {
      expect(doc.json.paths[p], p).toBeDefined();
    }
  });
});
