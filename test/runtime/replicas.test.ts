// Many replicas verified here: the roles as separate processes (two gateways behind a round-robin, one admin, two workers) on one PostgreSQL and Redis; admin changes reach both gateways within 1 s, rate budgets and cache invalidation are shared, an approval executes once whichever gateway is asked, and a rolling restart of both gateways in turn under HTTP load and open wire sessions loses no accepted request, no audit entry and runs each approval once.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { baseEnv, startCli, type StartedCli } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { adminToken, bearer } from '../support/admin-client.js';
import { sleep } from '../support/wait.js';

const PASSWORD = 'replica-harness-owner-password-01';
const SOURCE = 'rep_src';
const PG_SOURCE = 'rep_pg';
const PG_DRAIN_MS = 3_000;

let dir: string;
let database: TestDatabase;
/** The PostgreSQL source the wire sessions reach through the gateways. */
let pgSource: TestDatabase;
/** Wire listeners by gateway index. */
let wirePorts: number[] = [];
let upstream: TestUpstream;
let env: Record<string, string>;
const roles: Record<string, StartedCli> = {};
let gateways: string[] = [];
let adminUrl: string;
let token: string;
let docVersion = 1;
let posts = 0;

async function startRole(name: string, role: string): Promise<StartedCli> {
  const started = await startCli(['start', '--role', role], { env: { ...env, SERVICE_AUDIT__SPOOL__DIR: path.join(dir, `spool-${name}`) }, cwd: dir, timeoutMs: 90_000 });
  roles[name] = started;
  return started;
}

async function admin(method: string, p: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await bearer(adminUrl, token, method, p, body);
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${res.text}`);
  return res.json as Record<string, unknown>;
}

const dispatcher = new Agent({ connections: 8 });
let turn = 0;
/** The round-robin in front of the gateways: each call goes to the next live one. */
async function viaGateway(index: number | null, key: string, method: string, p: string, body?: string): Promise<{ status: number; text: string; gateway: number; cache: string | undefined }> {
  const g = index ?? turn++ % gateways.length;
  const res = await request(`${gateways[g]}${p}`, { method: method as 'GET', headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ?? null, dispatcher });
  const cache = res.headers['x-gatehouse-cache'];
  return { status: res.statusCode, text: await res.body.text(), gateway: g, cache: typeof cache === 'string' ? cache : undefined };
}

/** Polls both gateways until each answers `status`; resolves with the milliseconds it took. */
async function untilBoth(key: string, p: string, status: number, limitMs = 5_000): Promise<number> {
  const started = Date.now();
  const seen = new Set<number>();
  while (seen.size < gateways.length) {
    for (let g = 0; g < gateways.length; g++) if (!seen.has(g) && (await viaGateway(g, key, 'GET', p)).status === status) seen.add(g);
    if (Date.now() - started > limitMs) throw new Error(`gateways ${[...Array(gateways.length).keys()].filter((g) => !seen.has(g))} never answered ${status} on ${p}`);
    if (seen.size < gateways.length) await sleep(20);
  }
  return Date.now() - started;
}

async function agent(name: string, grants: Array<{ source_id: string; role_key: string }>): Promise<{ id: number; key: string }> {
  const created = await admin('POST', '/api/identities', { name, generate_key: true });
  for (const g of grants) await admin('POST', `/api/identities/${String(created.id)}/grants`, g);
  return { id: created.id as number, key: created.api_key as string };
}

async function pgSql<T = Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

async function auditCount(where: string, params: unknown[]): Promise<number> {
  const c = await database.connect();
  try {
    return Number((await c.query(`select count(*)::int as n from audit_entries where ${where}`, params)).rows[0].n);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'gh-replicas-'));
  database = await createTestDatabase();
  pgSource = await createTestDatabase();
  await pgSql(pgSource.url, 'create table notes (id serial primary key, body text)');
  upstream = await startUpstream({
    '/base/doc': (req, res) => {
      if (req.method === 'POST') {
        posts += 1;
        docVersion += 1;
        req.resume();
        req.on('end', () => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ v: docVersion })));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300' }).end(JSON.stringify({ v: docVersion }));
    },
  });
  env = baseEnv({
    SERVICE_ENVIRONMENT: 'test',
    SERVICE_GATEWAY__HTTP_PORT: '0',
    SERVICE_GATEWAY__PG_PORT: '0',
    SERVICE_GATEWAY__TIMEOUTS__PG_DRAIN_MS: String(PG_DRAIN_MS),
    SERVICE_ADMIN__PORT: '0',
    SERVICE_DATABASE__URL: database.url,
    SERVICE_REDIS__URL: 'redis://127.0.0.1:6379',
    SERVICE_REDIS__KEY_PREFIX: `ghrr:${randomBytes(6).toString('hex')}:`,
    SERVICE_ADMIN__BOOTSTRAP_PASSWORD: PASSWORD,
    SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: `${SOURCE},${PG_SOURCE}`,
    SERVICE_AUDIT__DURABILITY_MODE: 'strict',
    SERVICE_OBSERVABILITY__LOG_LEVEL: 'info',
  });
  // The admin migrates first (outside production services migrate at start); the others start on a migrated store.
  const adminRole = await startRole('admin', 'admin');
  adminUrl = `http://${adminRole.listeners['admin.port']}`;
  const [a, b] = await Promise.all([startRole('gateway-a', 'gateway'), startRole('gateway-b', 'gateway'), startRole('worker-1', 'worker'), startRole('worker-2', 'worker')]);
  gateways = [a, b].map((s) => `http://${s!.listeners['gateway.http_port']}`);
  wirePorts = [a, b].map((s) => Number(s!.listeners['gateway.pg_port']!.split(':').pop()));
  token = await adminToken(adminUrl, 'admin', PASSWORD);
  await admin('POST', '/api/data-sources', { name: SOURCE, source_id: SOURCE, source_type: 'http', connection_config: { base_url: `http://127.0.0.1:${upstream.port}/base/` }, create_default_roles: true });
  await admin('POST', '/api/data-sources', {
    name: PG_SOURCE,
    source_id: PG_SOURCE,
    source_type: 'postgres',
    connection_config: { host: '127.0.0.1', port: 5432, database: pgSource.name, user: 'postgres', ssl_mode: 'disable', pool_max: 4 },
    create_default_roles: true,
  });
}, 180_000);

afterAll(async () => {
  await Promise.all(Object.values(roles).map((r) => (r.child.exitCode === null ? r.stop('SIGTERM') : undefined)));
  await dispatcher.close();
  await upstream?.close();
  await database?.drop();
  await pgSource?.drop();
  await rm(dir, { recursive: true, force: true });
});

describe('two gateways, one admin, two workers as separate processes', () => {
  test('a grant, its revocation, a deny policy and a disabled identity reach both gateways within 1 s', async () => {
    const created = await admin('POST', '/api/identities', { name: 'rr-agent', generate_key: true });
    const key = created.api_key as string;
    const grant = await admin('POST', `/api/identities/${String(created.id)}/grants`, { source_id: SOURCE, role_key: 'reader' });
    expect(await untilBoth(key, `/proxy/${SOURCE}/doc`, 200)).toBeLessThan(1_000);

    await admin('DELETE', `/api/identities/${String(created.id)}/grants/${String(grant.id)}`);
    expect(await untilBoth(key, `/proxy/${SOURCE}/doc`, 403)).toBeLessThan(1_000);

    await admin('POST', `/api/identities/${String(created.id)}/grants`, { source_id: SOURCE, role_key: 'reader' });
    await untilBoth(key, `/proxy/${SOURCE}/doc`, 200);
    const policy = await admin('POST', '/api/policies', { name: 'rr: deny /secret', priority: 100, conditions: { source_ids: [SOURCE], paths: ['/secret/**'] }, actions: { effect: 'deny' } });
    // Before the policy /secret/x is allowed by the reader role (the upstream answers it).
    expect(await untilBoth(key, `/proxy/${SOURCE}/secret/x`, 403)).toBeLessThan(1_000);
    await admin('DELETE', `/api/policies/${String(policy.id)}`);

    await admin('PATCH', `/api/identities/${String(created.id)}`, { enabled: false });
    expect(await untilBoth(key, `/proxy/${SOURCE}/doc`, 401)).toBeLessThan(1_000);
  });

  test('a rate budget is shared: the gateways together allow exactly the limit', async () => {
    await admin('POST', '/api/policies', { name: 'rr: budget', priority: 50, conditions: { source_ids: [SOURCE], paths: ['/budget/**'] }, actions: { effect: 'allow', rate_limit: '6/minute', cache: false } });
    const a = await agent('rr-budget', [{ source_id: SOURCE, role_key: 'reader' }]);
    await sleep(1_000);
    const statuses: number[] = [];
    for (let i = 0; i < 14; i++) statuses.push((await viaGateway(null, a.key, 'GET', `/proxy/${SOURCE}/budget/${i}`)).status);
    expect(statuses.filter((s) => s === 200).length).toBe(6);
    expect(statuses.filter((s) => s === 429).length).toBe(8);
  });

  test('a write through one gateway invalidates what the other cached', async () => {
    const reader = await agent('rr-cache-reader', [{ source_id: SOURCE, role_key: 'reader' }]);
    const writer = await agent('rr-cache-writer', [{ source_id: SOURCE, role_key: 'writer' }]);
    await untilBoth(reader.key, `/proxy/${SOURCE}/doc`, 200);
    const before = JSON.parse((await viaGateway(1, reader.key, 'GET', `/proxy/${SOURCE}/doc`)).text) as { v: number };
    const cached = await viaGateway(1, reader.key, 'GET', `/proxy/${SOURCE}/doc`);
    expect(cached.cache).toBe('hit');
    expect(JSON.parse(cached.text)).toEqual(before);
    const write = await viaGateway(0, writer.key, 'POST', `/proxy/${SOURCE}/doc`, '{"x":1}');
    expect(write.status).toBe(201);
    const after = await viaGateway(1, reader.key, 'GET', `/proxy/${SOURCE}/doc`);
    expect(after.cache).not.toBe('hit');
    expect((JSON.parse(after.text) as { v: number }).v).toBe(before.v + 1);
  });

  test('an approval created on one gateway executes exactly once, whichever gateway is asked', async () => {
    await admin('POST', '/api/policies', { name: 'rr: approve writes', priority: 90, conditions: { source_ids: [SOURCE], paths: ['/doc'], operations: ['write'] }, actions: { effect: 'require_approval' } });
    const writer = await agent('rr-approver-agent', [{ source_id: SOURCE, role_key: 'writer' }]);
    await sleep(1_000);
    const postsBefore = posts;
    const queued = await viaGateway(0, writer.key, 'POST', `/proxy/${SOURCE}/doc`, '{"y":2}');
    expect(queued.status, queued.text).toBe(202);
    const approvalId = (JSON.parse(queued.text) as { approval_id: number }).approval_id;
    const [first, second] = await Promise.all([
      bearer(adminUrl, token, 'POST', `/api/approvals/${approvalId}/approve`),
      bearer(adminUrl, token, 'POST', `/api/approvals/${approvalId}/approve`),
    ]);
    expect([first.status, second.status].filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
    const deadline = Date.now() + 10_000;
    let states: string[] = [];
    while (Date.now() < deadline) {
      states = await Promise.all([0, 1].map(async (g) => (JSON.parse((await viaGateway(g, writer.key, 'GET', `/approvals/${approvalId}`)).text) as { status: string }).status));
      if (states.every((s) => s === 'executed')) break;
      await sleep(100);
    }
    expect(states).toEqual(['executed', 'executed']);
    await sleep(500);
    expect(posts - postsBefore).toBe(1);
  });

  test('a rolling restart of both gateways in turn under load: no accepted request fails, every answer is audited, wire sessions finish their transaction, approvals run once', async () => {
    const a = await agent('rr-roll', [{ source_id: SOURCE, role_key: 'writer' }, { source_id: PG_SOURCE, role_key: 'writer' }]);
    await untilBoth(a.key, `/proxy/${SOURCE}/doc`, 200);
    // The approval policy of the test before covers POST /doc for every agent.
    const statuses = new Map<number, number>();
    let retried = 0;
    let stop = false;
    /** The load balancer of the test: round-robin over the live gateways; a connection refused or reset before any answer was never accepted, so it is retried on the next one, as a load balancer does. */
    const load = Promise.all(
      Array.from({ length: 4 }, async (_, client) => {
        for (let n = 0; !stop; n++) {
          for (let attempt = 0; ; attempt++) {
            try {
              const r = await viaGateway(null, a.key, 'GET', `/proxy/${SOURCE}/roll/${client}-${n}`);
              statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
              break;
            } catch (err) {
              if (attempt > 20) throw err;
              retried++;
            }
          }
        }
      }),
    );

    const wireRows: string[] = [];
    const restart = async (index: number, name: string) => {
      // A wire session inside a transaction on the gateway about to stop, and one idle.
      const inTx = new pg.Client({ host: '127.0.0.1', port: wirePorts[index], user: 'rr-roll', password: a.key, database: PG_SOURCE });
      const idle = new pg.Client({ host: '127.0.0.1', port: wirePorts[index], user: 'rr-roll', password: a.key, database: PG_SOURCE });
      // After the FATAL, node-postgres reports the closed socket as a second error: expected, and not the test's concern.
      for (const c of [inTx, idle]) c.on('error', () => undefined);
      await Promise.all([inTx.connect(), idle.connect()]);
      const inTxEnd = new Promise<string | undefined>((resolve) => inTx.once('error', (e: Error & { code?: string }) => resolve(e.code)));
      const idleEnd = new Promise<string | undefined>((resolve) => idle.once('error', (e: Error & { code?: string }) => resolve(e.code)));
      await inTx.query('BEGIN');
      await inTx.query('insert into notes (body) values ($1)', [`roll-${name}`]);
      // An approval queued on this gateway just before it stops.
      const queued = await viaGateway(index, a.key, 'POST', `/proxy/${SOURCE}/doc`, `{"roll":"${name}"}`);
      expect(queued.status, queued.text).toBe(202);
      const approvalId = (JSON.parse(queued.text) as { approval_id: number }).approval_id;

      const stopped = roles[name]!.stop('SIGTERM');
      // The load balancer notices the failing /ready a moment later; until then requests still reach the draining gateway.
      await sleep(200);
      const live = gateways.filter((_, g) => g !== index);
      const others = gateways.length;
      gateways = live;
      // The approval is decided while its gateway drains: twice at once, it executes once.
      const [first, second] = await Promise.all([bearer(adminUrl, token, 'POST', `/api/approvals/${approvalId}/approve`), bearer(adminUrl, token, 'POST', `/api/approvals/${approvalId}/approve`)]);
      expect([first.status, second.status].filter((st) => st === 200).length).toBeGreaterThanOrEqual(1);
      expect(await idleEnd).toBe('57P01');
      // The open transaction goes on through the drain and commits; then its session ends.
      await inTx.query('insert into notes (body) values ($1)', [`roll-${name}`]);
      expect((await inTx.query('COMMIT')).command).toBe('COMMIT');
      expect(await inTxEnd).toBe('57P01');
      wireRows.push(`roll-${name}`, `roll-${name}`);
      const exit = await stopped;
      // On a failure the draining gateway's own last log lines say which closer overran or failed.
      expect(exit.code, roles[name]!.output().stdout.split('\n').filter((l) => /shutdown|drain|grace|error/i.test(l)).slice(-12).join('\n')).toBe(0);
      await Promise.all([inTx.end().catch(() => undefined), idle.end().catch(() => undefined)]);

      const again = await startRole(name, 'gateway');
      const url = `http://${again.listeners['gateway.http_port']}`;
      const list = [...live];
      list.splice(index, 0, url);
      expect(list.length).toBe(others);
      gateways = list;
      wirePorts[index] = Number(again.listeners['gateway.pg_port']!.split(':').pop());
      // The reconnecting client is served by the restarted gateway.
      const back = new pg.Client({ host: '127.0.0.1', port: wirePorts[index], user: 'rr-roll', password: a.key, database: PG_SOURCE });
      await back.connect();
      expect((await back.query('select count(*)::int as n from notes where body = $1', [`roll-${name}`])).rows).toEqual([{ n: 2 }]);
      await back.end();
      return approvalId;
    };

    const postsBefore = posts;
    await sleep(1_000);
    const approvalB = await restart(1, 'gateway-b');
    await sleep(1_000);
    const approvalA = await restart(0, 'gateway-a');
    await sleep(1_000);
    stop = true;
    await load;

    const answered = [...statuses.values()].reduce((x, y) => x + y, 0);
    expect(answered).toBeGreaterThan(40);
    // Accepted requests were answered 200, or 503 by a listener already closing (docs/deployment.md "Rolling restart").
    expect([...statuses.keys()].filter((st) => st !== 200 && st !== 503)).toEqual([]);
    for (const id of [approvalA, approvalB]) {
      const deadline = Date.now() + 10_000;
      let states: string[] = [];
      while (Date.now() < deadline) {
        states = await Promise.all([0, 1].map(async (g) => (JSON.parse((await viaGateway(g, a.key, 'GET', `/approvals/${id}`)).text) as { status: string }).status));
        if (states.every((st) => st === 'executed')) break;
        await sleep(100);
      }
      expect(states).toEqual(['executed', 'executed']);
    }
    await sleep(500);
    expect(posts - postsBefore).toBe(2);
    // Every answered 200 has its audit entry, none is missing or doubled, across four process lifetimes.
    await sleep(300);
    expect(await auditCount(`identity_id = $1 and path like '%/roll/%' and status = 200`, [a.id])).toBe(statuses.get(200) ?? 0);
    expect(await pgSql<{ n: number }>(pgSource.url, 'select count(*)::int as n from notes')).toEqual([{ n: wireRows.length }]);
    console.log(`rolling restart: ${answered} answered (${JSON.stringify(Object.fromEntries(statuses))}), ${retried} connection attempts retried on the other gateway`);
  }, 120_000);
});
