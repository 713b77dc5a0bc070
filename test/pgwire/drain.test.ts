// Shutdown of the wire listener (docs/pgwire.md "Shutdown"): new connections are refused, idle sessions end with 57P01 at once, a session inside a transaction or a statement finishes it and then ends with 57P01, and what is still open at gateway.timeouts.pg_drain_ms ends with 57P01 and its transaction rolled back. Real clients: node-postgres and psql.
import net from 'node:net';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startWireWorld, type WireWorld } from './fixture.js';
import { sleep } from '../support/wait.js';

const DRAIN_MS = 2_000;

let ww: WireWorld;
let writer: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'drainsrc', env: { SERVICE_GATEWAY__TIMEOUTS__PG_DRAIN_MS: String(DRAIN_MS), SERVICE_GATEWAY__TIMEOUTS__SHUTDOWN_GRACE_MS: '15000' } });
  // pg_sleep is outside the built-in function allowlist: the role names it (docs/governance/sql.md).
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'drainer',
    rules: { http: [], sql: [{ operations: ['read', 'write'], tables: ['public.*'], approval: 'never', functions: ['pg_sleep'] }] },
  });
  if (role.status >= 300) throw new Error(role.text);
  writer = await ww.world.agent('drain-writer', [{ source_id: ww.sourceId, role_key: 'drainer' }]);
}, 90_000);
afterAll(async () => {
  await ww?.stop();
});

async function notes(body: string): Promise<number> {
  return ww.direct(async (d) => (await d.query('select count(*)::int as n from notes where body = $1', [body])).rows[0].n);
}

/** When (ms after `t0`) the session's unsolicited FATAL arrived, and its SQLSTATE. */
function endOf(c: pg.Client, t0: () => number): Promise<{ code: string | undefined; at: number }> {
  return new Promise((resolve) => c.once('error', (err: Error & { code?: string }) => resolve({ code: err.code, at: Date.now() - t0() })));
}

/** Resolves once another backend is running a statement containing `query` (pg_stat_activity), or fails after 20 s. */
async function waitForUpstreamQuery(query: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const running = await ww.direct(async (d) => (await d.query("select count(*)::int as n from pg_stat_activity where state = 'active' and pid <> pg_backend_pid() and strpos(query, $1) > 0", [query])).rows[0].n);
    if (running > 0) return;
    if (Date.now() > deadline) throw new Error(`no backend ran ${query} within 20 s`);
    await sleep(25);
  }
}

function connectRefused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
}

describe('SIGTERM drain of the wire listener', () => {
  test('idle sessions end at once, transactions and statements finish first, the rest end at the drain timeout with 57P01', async () => {
    const idle = await ww.client('drain-writer', writer.key);
    const finishing = await ww.client('drain-writer', writer.key);
    const abandoned = await ww.client('drain-writer', writer.key);
    const sleeping = await ww.client('drain-writer', writer.key);
    await finishing.query('BEGIN');
    await finishing.query("insert into notes (body) values ('drain-finished')");
    await abandoned.query('BEGIN');
    await abandoned.query("insert into notes (body) values ('drain-abandoned')");
    // psql inside a transaction that is still running its pg_sleep when shutdown begins, then commits.
    const psql = ww.psql('drain-writer', writer.key, ['-v', 'ON_ERROR_STOP=1'], "BEGIN;\ninsert into notes (body) values ('drain-psql');\nselect pg_sleep(1);\ninsert into notes (body) values ('drain-psql');\nCOMMIT;\n");
    // Shutdown begins only once psql is inside its transaction, running the sleep (a loaded machine may take its time to get there).
    await waitForUpstreamQuery('select pg_sleep(1)');

    let started = 0;
    const t0 = () => started;
    const idleEnd = endOf(idle, t0);
    const finishingEnd = endOf(finishing, t0);
    const abandonedEnd = endOf(abandoned, t0);
    const sleepingEnd = endOf(sleeping, t0);
    const slow = sleeping.query('select pg_sleep(0.8) as slept');
    await sleep(100);
    started = Date.now();
    const stopping = ww.world.svc.running.shutdown('drain test');

    // An idle session is told at once.
    const i = await idleEnd;
    expect(i.code).toBe('57P01');
    expect(i.at).toBeLessThan(DRAIN_MS / 2);
    // No new session is accepted.
    expect(await connectRefused(ww.port)).toBe(true);

    // A statement running at SIGTERM finishes and is answered; the session then ends.
    expect((await slow).rows).toEqual([{ slept: '' }]);
    const s = await sleepingEnd;
    expect(s.code).toBe('57P01');
    expect(s.at).toBeLessThan(DRAIN_MS);

    // A transaction open at SIGTERM goes on and commits; the session ends at that boundary.
    await finishing.query("insert into notes (body) values ('drain-finished')");
    expect((await finishing.query('COMMIT')).command).toBe('COMMIT');
    const f = await finishingEnd;
    expect(f.code).toBe('57P01');
    expect(f.at).toBeLessThan(DRAIN_MS);

    // A transaction never finished is ended at the drain timeout, and rolled back.
    const a = await abandonedEnd;
    expect(a.code).toBe('57P01');
    expect(a.at).toBeGreaterThanOrEqual(DRAIN_MS - 50);
    expect(a.at).toBeLessThan(DRAIN_MS + 1_500);

    const p = await psql;
    expect(p.stderr).not.toMatch(/ERROR/);
    expect(p.code).toBe(0);
    await stopping;
    expect(await notes('drain-finished')).toBe(2);
    expect(await notes('drain-psql')).toBe(2);
    expect(await notes('drain-abandoned')).toBe(0);
  }, 30_000);
});
