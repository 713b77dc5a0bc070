// Client pools through the gateway: 20 concurrent sessions from pg.Pool all get an upstream connection under the source's default pool_max, a session past it gets 53300 naming the setting to raise, and /stats shows the pool's waits. With the old default of 5, the sixth session waited 5 s and failed.
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startWireWorld, sqlError, type WireWorld } from './fixture.js';

let ww: WireWorld;
let writer: { id: number; key: string };

beforeAll(async () => {
  // pool_max left to its default (the fixture sets 10 otherwise).
  ww = await startWireWorld({ sourceId: 'poolsrc', sourceConfig: { pool_max: undefined } });
  writer = await ww.world.agent('pool-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
}, 60_000);
afterAll(async () => ww?.stop());

async function stats(): Promise<Array<Record<string, number | string>>> {
  const r = await fetch(`${ww.world.svc.gatewayUrl}/stats`, { headers: { authorization: `Bearer ${writer.key}` } });
  return ((await r.json()) as { upstream_pools: Array<Record<string, number | string>> }).upstream_pools;
}

test('20 concurrent pg.Pool sessions, each holding its connection through a transaction, all do their work', async () => {
  const pool = new pg.Pool({ host: '127.0.0.1', port: ww.port, user: 'pool-writer', password: writer.key, database: ww.sourceId, max: 20 });
  try {
    const clients = await Promise.all(Array.from({ length: 20 }, () => pool.connect()));
    try {
      // Every session is open at once, each in its own transaction on its own upstream connection.
      await Promise.all(clients.map((c, i) => c.query('BEGIN').then(() => c.query('insert into notes(body) values ($1)', [`pool ${i}`]))));
      const pids = await Promise.all(clients.map(async (c) => (await c.query('select count(*)::int as n from notes')).rows[0].n as number));
      expect(pids.every((n) => n >= 1)).toBe(true);
      await Promise.all(clients.map((c) => c.query('COMMIT')));
    } finally {
      for (const c of clients) c.release();
    }
    // And the pool keeps serving many more queries than connections.
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => pool.query('select $1::int as i', [i])));
    expect(results.map((r) => r.rows[0].i)).toEqual(Array.from({ length: 200 }, (_, i) => i));
  } finally {
    await pool.end();
  }
  expect(await ww.direct(async (d) => (await d.query("select count(*)::int as n from notes where body like 'pool %'")).rows[0].n)).toBe(20);
  const s = (await stats()).find((p) => p.source_id === ww.sourceId)!;
  expect(s.max).toBe(20);
  expect(s.wait_timeouts).toBe(0);
}, 60_000);

test('the session past pool_max waits, then gets 53300 saying what to raise; /stats counts the wait', async () => {
  const held = await Promise.all(Array.from({ length: 20 }, () => ww.client('pool-writer', writer.key)));
  try {
    const e = await sqlError(ww.client('pool-writer', writer.key));
    expect(e.code).toBe('53300');
    expect(e.message).toContain('pool_max');
    expect(e.message).toContain('poolsrc');
    const s = (await stats()).find((p) => p.source_id === ww.sourceId)!;
    expect(s.open).toBe(20);
    expect(s.wait_timeouts).toBeGreaterThanOrEqual(1);
    expect(Number(s.wait_ms_max)).toBeGreaterThanOrEqual(1000);
  } finally {
    await Promise.all(held.map((c) => c.end()));
  }
}, 60_000);
