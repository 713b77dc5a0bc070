// database.read_url on a real streaming replica (docs/operations.md "A read replica for audit search"): a private primary and a pg_basebackup standby started here; audit search reads the standby, an entry appears there once replayed, replay paused (lag) hides new entries until it resumes, and a standby that is down makes audit search 503 while the rest of the admin API works.
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startPgServer, startStandby, type PgServerHandle } from '../support/pg-server.js';
import type { TestDatabase } from '../support/pg.js';
import { startWorld, type World } from '../support/world.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { sleep } from '../support/wait.js';

const DB = 'gh_control';
let primary: PgServerHandle;
let standby: PgServerHandle;
let world: World;
let upstream: TestUpstream;
let reader: { id: number; key: string };

const urlOf = (server: PgServerHandle) => server.url.replace(/\/postgres$/, `/${DB}`);

async function onStandby<T>(sql: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: urlOf(standby) });
  await c.connect();
  try {
    return (await c.query(sql)).rows as T[];
  } finally {
    await c.end();
  }
}

/** Audit search through the admin API (it reads database.read_url): the request ids it finds for the agent. */
async function searched(): Promise<{ status: number; ids: string[] }> {
  const r = await world.admin('GET', `/api/audit?identity_id=${reader.id}&limit=100`);
  return { status: r.status, ids: r.status === 200 ? (r.json.items as Array<{ path: string }>).map((e) => e.path) : [] };
}

async function request(path: string): Promise<void> {
  expect((await world.proxy(reader.key, 'GET', `/proxy/rr/${path}`)).status).toBe(200);
  await world.svc.running.services.audit.flush();
}

beforeAll(async () => {
  primary = await startPgServer();
  const admin = await primary.connect();
  await admin.query(`create database ${DB}`);
  await admin.end();
  standby = await startStandby(primary);
  const database: TestDatabase = {
    name: DB,
    url: urlOf(primary),
    async connect() {
      const c = new pg.Client({ connectionString: urlOf(primary) });
      await c.connect();
      return c;
    },
    drop: async () => undefined,
  };
  upstream = await startUpstream({});
  world = await startWorld({ database, privateSources: ['rr'], env: { SERVICE_DATABASE__READ_URL: urlOf(standby), SERVICE_DATABASE__CONNECT_TIMEOUT_MS: '1500' } });
  await world.httpSource('rr', `http://127.0.0.1:${upstream.port}/`);
  reader = await world.agent('rr-reader', [{ source_id: 'rr', role_key: 'reader' }]);
}, 120_000);

afterAll(async () => {
  await world?.stop();
  await upstream?.close();
  await standby?.remove();
  await primary?.remove();
});

test('audit search reads the streaming standby: entries appear once replayed, lag hides them, a standby outage is 503 for search only', async () => {
  expect(await onStandby<{ standby: boolean }>('select pg_is_in_recovery() as standby')).toEqual([{ standby: true }]);

  // Streaming: an entry written on the primary is found through the standby shortly after.
  await request('first');
  const started = Date.now();
  while (!(await searched()).ids.includes('/first')) {
    if (Date.now() - started > 5_000) throw new Error('entry never replicated');
    await sleep(20);
  }
  const visibleAfterMs = Date.now() - started;

  // Lag: replay paused on the standby; the entry is committed on the primary but search does not find it yet.
  await onStandby('select pg_wal_replay_pause()');
  await request('second');
  const onPrimary = await world.svc.database!.connect();
  try {
    expect((await onPrimary.query("select count(*)::int as n from audit_entries where path = '/second'")).rows[0].n).toBe(1);
  } finally {
    await onPrimary.end();
  }
  await sleep(500);
  const lagging = await searched();
  expect(lagging.status).toBe(200);
  expect(lagging.ids).toContain('/first');
  expect(lagging.ids).not.toContain('/second');
  await onStandby('select pg_wal_replay_resume()');
  const resumed = Date.now();
  while (!(await searched()).ids.includes('/second')) {
    if (Date.now() - resumed > 5_000) throw new Error('entry never replayed after resume');
    await sleep(20);
  }

  // The standby down: audit search answers 503, writes and the rest of the admin API go on against the primary.
  await standby.kill();
  expect((await searched()).status).toBe(503);
  expect((await world.admin('GET', '/api/identities')).status).toBe(200);
  await request('third');
  await standby.start();
  const back = Date.now();
  while (!(await searched()).ids.includes('/third')) {
    if (Date.now() - back > 15_000) throw new Error('standby never caught up');
    await sleep(100);
  }
  console.log(`streaming standby: an entry was searchable ${visibleAfterMs} ms after the audit flush`);
}, 90_000);
