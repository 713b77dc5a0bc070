// gateway.processes through the real CLI: replicas share the gateway ports, serve governed requests (HTTP and wire), learn revocations from each other, restart when they die, and never outlive the service.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client } from 'undici';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { baseEnv, runCli, startCli, type StartedCli } from '../support/cli.js';
import { createTestDatabase } from '../support/pg.js';
import { startUpstream } from '../egress/upstream-server.js';
import { bearer, adminToken } from '../support/admin-client.js';
import { sleep, waitFor } from '../support/wait.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

const PASSWORD = 'replicas-owner-password-0001';

/** Process ids holding sockets on a local port, read from the kernel's socket table (`ss`), by socket state. */
function pidsOn(port: number, state: 'listening' | 'established'): Set<number> {
  const out = execFileSync('ss', ['-Htnp', ...(state === 'listening' ? ['-l'] : ['state', 'established']), `sport = :${port}`], { encoding: 'utf8' });
  return new Set([...out.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1])));
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const portOf = (listener: string | undefined): number => Number(listener!.split(':').pop());

async function startReplicated(): Promise<{ started: StartedCli; parent: number; replicas: number[]; spoolDir: string; gatewayPort: number; pgPort: number; adminUrl: string }> {
  const database = await createTestDatabase();
  cleanups.push(() => database.drop());
  const cwd = await mkdtemp(path.join(tmpdir(), 'gh-replicas-'));
  cleanups.push(() => rm(cwd, { recursive: true, force: true }));
  const env = baseEnv({
    SERVICE_ENVIRONMENT: 'test',
    SERVICE_GATEWAY__HTTP_PORT: '0',
    SERVICE_GATEWAY__PG_PORT: '0',
    SERVICE_ADMIN__PORT: '0',
    SERVICE_GATEWAY__PROCESSES: '2',
    SERVICE_DATABASE__URL: database.url,
    SERVICE_REDIS__URL: 'redis://127.0.0.1:6379',
    SERVICE_REDIS__KEY_PREFIX: `ghrep:${randomBytes(6).toString('hex')}:`,
    SERVICE_ADMIN__BOOTSTRAP_PASSWORD: PASSWORD,
    SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'replicated,replicated-pg',
    SERVICE_AUDIT__SPOOL__DIR: path.join(cwd, 'spool'),
  });
  const started = await startCli(['start'], { env, cwd, timeoutMs: 90_000 });
  // The CLI runs under tsx, which starts the service as its own child: signal the service's processes by pid.
  const { pid: parent, gateway_replicas: replicas } = startedRecord(started);
  cleanups.push(async () => {
    for (const pid of [parent, ...replicas, ...pidsOn(portOf(started.listeners['gateway.http_port']), 'listening')]) if (alive(pid)) process.kill(pid, 'SIGKILL');
    if (started.child.exitCode === null && started.child.signalCode === null) await started.stop('SIGKILL');
  });
  return { started, parent, replicas, spoolDir: path.join(cwd, 'spool'), gatewayPort: portOf(started.listeners['gateway.http_port']), pgPort: portOf(started.listeners['gateway.pg_port']), adminUrl: `http://${started.listeners['admin.port']}` };
}

const WIRE_SESSIONS = 12;

/** A wire session through the gateway's PostgreSQL port, retried while the process serving it has not yet loaded the new source (3D000). */
async function wireSession(port: number, user: string, password: string): Promise<pg.Client> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const c = new pg.Client({ host: '127.0.0.1', port, user, password, database: 'replicated-pg' });
    c.on('error', () => undefined);
    try {
      await c.connect();
      return c;
    } catch (err) {
      if ((err as { code?: string }).code !== '3D000' || Date.now() > deadline) throw err;
      await sleep(50);
    }
  }
}

/** The service's own pid and its replicas', from its "gatehouse started" record. */
function startedRecord(started: StartedCli): { pid: number; gateway_replicas: number[] } {
  const line = started.output().stdout.split('\n').find((l) => l.includes('"gatehouse started"'))!;
  return JSON.parse(line) as { pid: number; gateway_replicas: number[] };
}

describe('gateway.processes', () => {
  it('runs replicas on the same gateway ports that serve governed requests and learn revocations from each other', { timeout: 150_000 }, async () => {
    const upstream = await startUpstream({});
    cleanups.push(() => upstream.close());
    const upstreamDb = await createTestDatabase();
    cleanups.push(() => upstreamDb.drop());
    const setup = new pg.Client({ connectionString: upstreamDb.url });
    await setup.connect();
    await setup.query('create table items (id int primary key); insert into items values (1), (2)');
    await setup.end();
    const { started, parent, replicas, spoolDir, gatewayPort, pgPort, adminUrl } = await startReplicated();
    const [replica] = replicas;
    // A spool has one writer: the replica spools under its own subdirectory, and nobody's spool is refused.
    expect(existsSync(path.join(spoolDir, 'gateway-replica-1'))).toBe(true);
    expect(started.output().stdout).not.toContain('audit spool unavailable');
    expect(replica).toBeTypeOf('number');
    expect(pidsOn(gatewayPort, 'listening')).toEqual(new Set([parent, replica]));
    expect(pidsOn(pgPort, 'listening')).toEqual(new Set([parent, replica]));

    const token = await adminToken(adminUrl, 'admin', PASSWORD);
    const admin = async (method: string, p: string, body?: unknown) => {
      const res = await bearer(adminUrl, token, method, p, body);
      expect(res.status, `${method} ${p}: ${res.text}`).toBeLessThan(300);
      return res.json as Record<string, unknown>;
    };
    await admin('POST', '/api/data-sources', { name: 'replicated', source_id: 'replicated', source_type: 'http', connection_config: { base_url: `http://127.0.0.1:${upstream.port}/` }, create_default_roles: true });
    await admin('POST', '/api/data-sources', {
      name: 'replicated-pg',
      source_id: 'replicated-pg',
      source_type: 'postgres',
      connection_config: { host: '127.0.0.1', port: 5432, database: upstreamDb.name, user: 'postgres', ssl_mode: 'disable', pool_max: WIRE_SESSIONS },
      create_default_roles: true,
    });
    const identity = await admin('POST', '/api/identities', { name: 'replicated-agent', generate_key: true });
    await admin('POST', `/api/identities/${String(identity.id)}/grants`, { source_id: 'replicated', role_key: 'reader' });
    await admin('POST', `/api/identities/${String(identity.id)}/grants`, { source_id: 'replicated-pg', role_key: 'reader' });
    const auth = { authorization: `Bearer ${String(identity.api_key)}` };

    // Twenty connections: the kernel spreads them over both processes (all on one has odds of 2^-19).
    const clients = Array.from({ length: 20 }, () => new Client(`http://127.0.0.1:${gatewayPort}`, { pipelining: 1 }));
    cleanups.push(async () => void (await Promise.all(clients.map((c) => c.close()))));
    const statuses = async () =>
      Promise.all(
        clients.map(async (c, i) => {
          const res = await c.request({ method: 'GET', path: `/proxy/replicated/items/${i}`, headers: auth });
          await res.body.text();
          return res.statusCode;
        }),
      );
    // The registry and grants reach each replica through its own change subscription.
    await waitFor(async () => (await statuses()).every((s) => s === 200), 15_000, 'every connection answered 200');
    expect([...pidsOn(gatewayPort, 'established')].sort()).toEqual([parent, replica].sort());

    // Wire sessions too, spread over both processes (all on one has odds of 2^-11); each runs a statement.
    const sessions = await Promise.all(Array.from({ length: WIRE_SESSIONS }, () => wireSession(pgPort, 'replicated-agent', String(identity.api_key))));
    cleanups.push(async () => void (await Promise.all(sessions.map((c) => c.end().catch(() => undefined)))));
    const wireCodes = () => Promise.all(sessions.map((c) => c.query('select count(*) from items').then(() => null, (err: { code?: string }) => err.code ?? 'unknown')));
    const readAt = performance.now();
    expect(await wireCodes()).toEqual(Array(WIRE_SESSIONS).fill(null));
    expect([...pidsOn(pgPort, 'established')].sort()).toEqual([parent, replica].sort());

    // Disabling the identity on the admin side must reach both processes' key-session memos and wire listeners.
    await admin('PATCH', `/api/identities/${String(identity.id)}`, { enabled: false });
    // Redis delivers the broadcast within milliseconds, far inside the second each process reuses an identity's state:
    // the sessions are asked again until all refuse, but only within that second, where only the broadcast explains it.
    let codes = await wireCodes();
    while (codes.some((c) => c !== '28000') && performance.now() - readAt < 900) {
      await sleep(20);
      codes = await wireCodes();
    }
    expect(codes).toEqual(Array(WIRE_SESSIONS).fill('28000'));
    await waitFor(async () => (await statuses()).every((s) => s === 401), 3_000, 'every connection refused');
    expect(await statuses()).toEqual(Array(20).fill(401));

    const exit = await started.stop('SIGTERM');
    expect(exit.code).toBe(0);
    expect(alive(replica!)).toBe(false);
    expect(started.output().stdout).toContain('shutdown complete');
  });

  it('restarts a replica that dies, and a replica whose parent is killed exits on its own', { timeout: 150_000 }, async () => {
    const { started, parent, replicas, gatewayPort } = await startReplicated();
    const [first] = replicas;
    process.kill(first!, 'SIGKILL');
    await waitFor(() => !alive(first!), 5_000, 'the replica died');
    await waitFor(() => pidsOn(gatewayPort, 'listening').size === 2, 30_000, 'a new replica listening');
    const [restarted] = [...pidsOn(gatewayPort, 'listening')].filter((p) => p !== parent);
    expect(restarted).not.toBe(first);
    expect(started.output().stdout).toContain('gateway replica exited; restarting it');
    const health = await fetch(`http://127.0.0.1:${gatewayPort}/health`);
    expect(health.status).toBe(200);

    process.kill(parent, 'SIGKILL');
    await waitFor(() => !alive(restarted!), 20_000, 'the orphaned replica exited');
    expect(pidsOn(gatewayPort, 'listening').size).toBe(0);
  });

  it('refuses more than one process on the embedded store or in-process coordination', async () => {
    const cwd = await mkdtemp(path.join(tmpdir(), 'gh-replicas-'));
    cleanups.push(() => rm(cwd, { recursive: true, force: true }));
    const result = await runCli(['config', 'check'], { env: baseEnv({ SERVICE_GATEWAY__PROCESSES: '2' }), cwd });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('gateway.processes: more than one gateway process needs database.url');
    expect(result.stderr).toContain('gateway.processes: more than one gateway process needs redis.url');
  });
});
