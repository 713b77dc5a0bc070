// The control store behind a real PgBouncer in transaction pooling mode (docs/operations.md "PgBouncer"): what transaction pooling breaks, shown on PgBouncer itself, and Gatehouse running through it with database.pooler: transaction and database.direct_url — migrations, admin API, governed proxy requests, rate budget, approvals and audit search.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { startPgBouncer, type PgBouncerHandle } from '../support/pgbouncer.js';
import { startWorld, type World } from '../support/world.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { loadConfig } from '../../src/config/index.js';
import { openControlStore } from '../../src/store/db.js';
import { sleep } from '../support/wait.js';

let bouncer: PgBouncerHandle;
/** One server connection per database: every client of the pooler shares one server session, so leaks show at once. */
let shared: PgBouncerHandle;
let scratch: TestDatabase;

beforeAll(async () => {
  [bouncer, shared, scratch] = await Promise.all([startPgBouncer(), startPgBouncer({ poolSize: 1 }), createTestDatabase()]);
}, 60_000);
afterAll(async () => {
  await Promise.all([bouncer?.stop(), shared?.stop()]);
  await scratch?.drop();
});

async function client(url: string, extra: Partial<pg.ClientConfig> = {}): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, ...extra });
  c.on('error', () => undefined);
  await c.connect();
  return c;
}

describe('what transaction pooling breaks (PgBouncer 1.18, pool_mode = transaction)', () => {
  it('a statement_timeout startup parameter is refused: the pool Gatehouse opened before (database.pooler: none) cannot connect', async () => {
    await expect(client(shared.urlOf(scratch.name), { statement_timeout: 30_000 } as pg.ClientConfig)).rejects.toThrow(/unsupported startup parameter: statement_timeout/);
    await expect(openControlStore({ url: bouncer.urlOf(scratch.name), embeddedDir: '/nonexistent', poolMax: 2, connectTimeoutMs: 3_000, statementTimeoutMs: 30_000, ssl: { mode: 'disable' } })).rejects.toThrow();
    const store = await openControlStore({ url: bouncer.urlOf(scratch.name), embeddedDir: '/nonexistent', poolMax: 2, connectTimeoutMs: 3_000, statementTimeoutMs: 30_000, pooler: 'transaction', ssl: { mode: 'disable' } });
    await store.ping();
    await store.close();
  });

  it('a session advisory lock excludes nobody: another client of the same server connection takes it too', async () => {
    const [a, b] = [await client(shared.urlOf(scratch.name)), await client(shared.urlOf(scratch.name))];
    try {
      expect((await a.query('select pg_try_advisory_lock(42) as got')).rows[0].got).toBe(true);
      // Direct, the second session would be refused (false); through the pooler it is the same server session.
      expect((await b.query('select pg_try_advisory_lock(42) as got')).rows[0].got).toBe(true);
    } finally {
      await b.query('select pg_advisory_unlock_all()');
      await Promise.all([a.end(), b.end()]);
    }
  });

  it('a session setting leaks to the next client, and a named prepared statement collides with another client’s', async () => {
    const [a, b] = [await client(shared.urlOf(scratch.name)), await client(shared.urlOf(scratch.name))];
    try {
      await a.query("set application_name = 'set-by-a'");
      expect((await b.query('show application_name')).rows[0].application_name).toBe('set-by-a');
      await a.query({ name: 'stmt', text: 'select 1 as one' });
      await expect(b.query({ name: 'stmt', text: 'select 2 as two' })).rejects.toThrow(/prepared statement "stmt" already exists/);
    } finally {
      await a.query('reset application_name');
      await a.query('deallocate all');
      await Promise.all([a.end(), b.end()]);
    }
  });

  it('configuration: database.pooler transaction without database.direct_url is refused', () => {
    const r = loadConfig({ env: { SERVICE_ENVIRONMENT: 'test', SERVICE_DATABASE__URL: bouncer.urlOf('x'), SERVICE_DATABASE__POOLER: 'transaction' }, cwd: '/nonexistent' });
    expect(r.ok ? [] : r.problems).toEqual([expect.stringMatching(/^database\.direct_url: required with database\.pooler: transaction/)]);
  });
});

describe('Gatehouse with its control store behind PgBouncer (transaction pooling)', () => {
  let control: TestDatabase;
  let world: World;
  let upstream: TestUpstream;
  let posts = 0;

  beforeAll(async () => {
    control = await createTestDatabase();
    upstream = await startUpstream({
      '/base/doc': (req, res) => {
        if (req.method === 'POST') posts++;
        req.resume();
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      },
    });
    world = await startWorld({
      database: control,
      privateSources: ['pgb'],
      // Migrations run on direct_url at start; everything else goes through the pooler.
      env: { SERVICE_DATABASE__URL: bouncer.urlOf(control.name), SERVICE_DATABASE__POOLER: 'transaction', SERVICE_DATABASE__DIRECT_URL: control.url, SERVICE_AUDIT__DURABILITY_MODE: 'strict' },
    });
  }, 90_000);
  afterAll(async () => {
    await world?.stop();
    await upstream?.close();
    await control?.drop();
  });

  it('migrated, then the admin API, governed requests, a rate budget, an approval and audit search all work through the pooler', async () => {
    expect((await fetch(`${world.svc.gatewayUrl}/ready`)).status).toBe(200);
    await world.httpSource('pgb', `http://127.0.0.1:${upstream.port}/base/`);
    const reader = await world.agent('pgb-reader', [{ source_id: 'pgb', role_key: 'reader' }]);
    const writer = await world.agent('pgb-writer', [{ source_id: 'pgb', role_key: 'writer' }]);
    await world.policy({ name: 'pgb budget', priority: 50, conditions: { source_ids: ['pgb'], paths: ['/limited/**'] }, actions: { effect: 'allow', rate_limit: '3/minute', cache: false } });
    await world.policy({ name: 'pgb approval', priority: 60, conditions: { source_ids: ['pgb'], paths: ['/doc'], operations: ['write'] }, actions: { effect: 'require_approval' } });

    // Concurrent governed requests: each writes its audit entry through the pooler (strict durability).
    const statuses = await Promise.all(Array.from({ length: 20 }, (_, i) => world.proxy(reader.key, 'GET', `/proxy/pgb/item/${i}`).then((r) => r.status)));
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    const limited: number[] = [];
    for (let i = 0; i < 5; i++) limited.push((await world.proxy(reader.key, 'GET', `/proxy/pgb/limited/${i}`)).status);
    expect(limited).toEqual([200, 200, 200, 429, 429]);

    const queued = await world.proxy(writer.key, 'POST', '/proxy/pgb/doc', { body: '{}', headers: { 'content-type': 'application/json' } });
    expect(queued.status, queued.text).toBe(202);
    const approvalId = (queued.json as { approval_id: number }).approval_id;
    const [first, second] = await Promise.all([world.admin('POST', `/api/approvals/${approvalId}/approve`), world.admin('POST', `/api/approvals/${approvalId}/approve`)]);
    expect([first.status, second.status]).toContain(200);
    const deadline = Date.now() + 10_000;
    while (posts < 1 && Date.now() < deadline) await sleep(50);
    await sleep(300);
    expect(posts).toBe(1);

    await world.svc.running.services.audit.flush();
    const search = await world.admin('GET', `/api/audit?identity_id=${reader.id}&limit=100`);
    expect(search.status).toBe(200);
    expect((search.json as { items: unknown[] }).items.length).toBe(25);

    // The traffic really went through PgBouncer: its statistics for the control database count the queries.
    const stats = (await bouncer.admin('SHOW STATS')).find((r) => r.database === control.name);
    expect(Number(stats?.total_query_count)).toBeGreaterThan(50);
  });
});
