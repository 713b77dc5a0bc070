// Prevents writes that reached the upstream from having no audit entry when the gateway is SIGKILLed before answering: each write's intent is durable before the upstream sees it, and the next start records it with outcome unknown (HTTP proxy and wire listener).
import { mkdtemp, rm } from 'node:fs/promises';
import pg from 'pg';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminToken, bearer } from '../support/admin-client.js';
import { baseEnv, startCli, type StartedCli } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { TEST_REDIS_URL } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { startCountingUpstream, type CountingUpstream } from './support.js';

const PASSWORD = 'write-intents-owner-0001';
let database: TestDatabase;
/** The wire source: a real PostgreSQL database whose rows count the writes that reached it. */
let sqlSource: TestDatabase;
let upstream: CountingUpstream;
let cwd: string;
let running: StartedCli | null = null;

beforeAll(async () => {
  database = await createTestDatabase();
  sqlSource = await createTestDatabase();
  const c = await sqlSource.connect();
  await c.query('create table notes (id serial primary key, body text)');
  await c.end();
  upstream = await startCountingUpstream();
  cwd = await mkdtemp(path.join(tmpdir(), 'gh-intents-'));
}, 30_000);
afterAll(async () => {
  await running?.stop('SIGKILL');
  await upstream?.close();
  await database?.drop();
  await sqlSource?.drop();
  if (cwd) await rm(cwd, { recursive: true, force: true });
});

const env = () =>
  baseEnv({
    SERVICE_GATEWAY__HTTP_PORT: '0',
    SERVICE_GATEWAY__PG_PORT: '0',
    SERVICE_ADMIN__PORT: '0',
    SERVICE_DATABASE__URL: database.url,
    SERVICE_REDIS__URL: TEST_REDIS_URL,
    SERVICE_REDIS__KEY_PREFIX: `ghintents:${path.basename(cwd)}:`,
    SERVICE_ADMIN__BOOTSTRAP_PASSWORD: PASSWORD,
    SERVICE_AUDIT__DURABILITY_MODE: 'strict',
    SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'up,sqlsrc',
  });

async function auditRows(where: string, channel = 'http', sourceId = 'up'): Promise<Array<{ method: string; status: number; error_code: string | null; request_id: string; operation: string }>> {
  const c = await database.connect();
  try {
    return (await c.query(`select method, status, error_code, request_id, operation from audit_entries where channel = $1 and source_id = $2 and ${where}`, [channel, sourceId])).rows;
  } finally {
    await c.end();
  }
}

it('every write cut by SIGKILL after it reached the upstream has an entry, with outcome unknown, after the restart', { timeout: 59_000 }, async () => {
  running = await startCli(['start'], { env: env(), cwd });
  const gateway = `http://${running.listeners['gateway.http_port']}`;
  const admin = `http://${running.listeners['admin.port']}`;
  const token = await adminToken(admin, 'admin', PASSWORD);
  const source = await bearer(admin, token, 'POST', '/api/data-sources', { name: 'up', source_id: 'up', source_type: 'http', connection_config: { base_url: upstream.url }, create_default_roles: true });
  expect(source.status, source.text).toBeLessThan(300);
  const identity = await bearer(admin, token, 'POST', '/api/identities', { name: 'intent-writer', generate_key: true });
  const key = identity.json.api_key as string;
  expect((await bearer(admin, token, 'POST', `/api/identities/${identity.json.id}/grants`, { source_id: 'up', role_key: 'writer' })).status).toBeLessThan(300);
  const send = (method: string, p: string) => fetch(`${gateway}/proxy/up/${p}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(method === 'GET' ? {} : { body: '{"n":1}' }) });
  await waitFor(async () => (await send('GET', 'warm')).status === 200, 10_000, 'source registered', 100);

  // Two writes finish normally: one entry each, never an unknown one besides.
  for (const p of ['done-1', 'done-2']) expect((await send('POST', p)).status).toBe(200);

  // Eight writes and three reads reach the upstream, which does not answer; then the gateway is killed.
  upstream.hold();
  const before = upstream.hits.length;
  const cut = [...Array.from({ length: 8 }, (_, i) => send(i % 2 ? 'PUT' : 'POST', `cut-${i}`)), ...[0, 1, 2].map((i) => send('GET', `read-${i}`))];
  for (const c of cut) c.catch(() => undefined);
  await waitFor(() => upstream.hits.length - before === 11, 15_000, 'all cut requests at the upstream', 20);
  await running.stop('SIGKILL');
  running = null;
  upstream.release();
  const writesAtUpstream = upstream.hits.slice(before).filter((h) => h.method !== 'GET').length;
  expect(writesAtUpstream).toBe(8);
  expect(await auditRows(`path like '/cut-%'`)).toEqual([]);

  // The restarted gateway (same directory, so the same spool) records them.
  running = await startCli(['start'], { env: env(), cwd });
  await waitFor(async () => (await auditRows(`path like '/cut-%'`)).length >= writesAtUpstream, 20_000, 'interrupted writes recorded', 200);
  const cutRows = await auditRows(`path like '/cut-%'`);
  expect(cutRows).toHaveLength(writesAtUpstream);
  expect(cutRows.every((r) => r.error_code === 'outcome_unknown' && (r.method === 'POST' || r.method === 'PUT'))).toBe(true);
  // Reads keep their plain path: a read cut the same way has no entry.
  expect(await auditRows(`path like '/read-%'`)).toEqual([]);
  const done = await auditRows(`path like '/done-%'`);
  expect(done.map((r) => [r.status, r.error_code])).toEqual([
    [200, null],
    [200, null],
  ]);
});

it('every SQL write on the wire cut by SIGKILL while at the source database (three seen waiting there) has an entry after the restart', { timeout: 59_000 }, async () => {
  // One gateway per directory (its spool): the previous test's goes first.
  await running?.stop('SIGTERM');
  running = await startCli(['start'], { env: env(), cwd });
  const admin = `http://${running.listeners['admin.port']}`;
  const token = await adminToken(admin, 'admin', PASSWORD);
  const created = await bearer(admin, token, 'POST', '/api/data-sources', {
    name: 'sqlsrc', source_id: 'sqlsrc', source_type: 'postgres',
    connection_config: { host: '127.0.0.1', port: 5432, database: sqlSource.name, user: 'postgres', ssl_mode: 'disable' },
    create_default_roles: true,
  });
  expect(created.status, created.text).toBeLessThan(300);
  const identity = await bearer(admin, token, 'POST', '/api/identities', { name: 'wire-intent-writer', generate_key: true });
  expect((await bearer(admin, token, 'POST', `/api/identities/${identity.json.id}/grants`, { source_id: 'sqlsrc', role_key: 'writer' })).status).toBeLessThan(300);
  const [host, port] = running.listeners['gateway.pg_port']!.split(':');
  const connect = async () => {
    const c = new pg.Client({ host: host === '0.0.0.0' ? '127.0.0.1' : host, port: Number(port), user: 'wire-intent-writer', password: identity.json.api_key as string, database: 'sqlsrc' });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  };
  let clients: pg.Client[] = [];
  await waitFor(async () => {
    try {
      clients.push(await connect());
      return true;
    } catch {
      return false;
    }
  }, 10_000, 'wire source registered', 200);
  clients = [...clients, await connect(), await connect()];

  // An uncommitted insert of the same keys, made directly on the source, keeps the three inserts waiting there,
  // already sent by the gateway (a row wait: the gateway's own planning of the statement is not held up).
  const locker = await sqlSource.connect();
  locker.on('error', () => undefined);
  await locker.query('begin');
  await locker.query("insert into notes (id, body) values (1001, 'held'), (1002, 'held'), (1003, 'held')");
  for (const [i, c] of clients.entries()) c.query('insert into notes (id, body) values ($1, $2)', [1001 + i, `cut-${i}`]).catch(() => undefined);
  // Watched from outside the locking transaction: activity statistics are a snapshot per transaction.
  const watcher = await sqlSource.connect();
  watcher.on('error', () => undefined);
  await waitFor(async () => {
    const r = await watcher.query("select count(*)::int as n from pg_stat_activity where datname = current_database() and query like 'insert into notes%' and wait_event_type = 'Lock'");
    return (r.rows[0] as { n: number }).n === 3;
  }, 15_000, 'three inserts waiting at the source', 50);
  await watcher.end();
  await running.stop('SIGKILL');
  running = null;
  // Whether each insert commits now depends on whether its Sync reached the source before the gateway died:
  // the outcome is really unknown, which is what the entries must say. What is known is that all three arrived.
  await locker.query('rollback');
  await locker.end();
  expect(await auditRows(`operation = 'write'`, 'pgwire', 'sqlsrc')).toEqual([]);

  running = await startCli(['start'], { env: env(), cwd });
  await waitFor(async () => (await auditRows(`operation = 'write'`, 'pgwire', 'sqlsrc')).length >= 3, 20_000, 'interrupted SQL writes recorded', 200);
  const rows = await auditRows(`operation = 'write'`, 'pgwire', 'sqlsrc');
  expect(rows).toHaveLength(3);
  expect(rows.every((r) => r.error_code === 'outcome_unknown')).toBe(true);
});
