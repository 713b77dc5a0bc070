// Strict audit durability on the wire: when a statement's answer (CommandComplete / ReadyForQuery, or its refusal) reaches the client, its audit entry is already stored.
import { afterAll, beforeAll, expect, test } from 'vitest';
import pg from 'pg';
import { startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
let agent: { id: number; key: string };
let auditDb: pg.Client;

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'dursrc', env: { SERVICE_AUDIT__DURABILITY_MODE: 'strict' } });
  agent = await ww.world.agent('wire-durable', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  auditDb = new pg.Client({ connectionString: ww.world.svc.database!.url });
  await auditDb.connect();
}, 60_000);
afterAll(async () => {
  await auditDb?.end();
  await ww?.stop();
});

/** Stored entries of the agent, read straight from the audit table: no flush, no wait. */
async function stored(): Promise<number> {
  const r = await auditDb.query("select count(*)::int as n from audit_entries where channel = 'pgwire' and identity_id = $1", [agent.id]);
  return (r.rows[0] as { n: number }).n;
}

test('every answered statement already has its stored entry (simple, extended, refused, pipelined)', async () => {
  const c = await ww.client('wire-durable', agent.key);
  try {
    let n = await stored();
    for (let i = 0; i < 5; i++) {
      await c.query('select 1 as one');
      expect(await stored()).toBe(++n);
      await c.query('select $1::int as v', [i]);
      expect(await stored()).toBe(++n);
      await c.query({ name: 'prepared_one', text: 'select $1::int + 1 as w', values: [i] });
      expect(await stored()).toBe(++n);
    }
    // A refusal (read-only grant running INSERT) is answered only once its entry is stored too.
    await expect(c.query('insert into notes (body) values ($1)', ['x'])).rejects.toMatchObject({ code: '42501' });
    expect(await stored()).toBe(++n);
    await expect(c.query('insert into notes (body) values (1)')).rejects.toMatchObject({ code: '42501' });
    expect(await stored()).toBe(++n);
    // Queries sent without waiting for each other (node-postgres queues them on one connection).
    await Promise.all([c.query('select 2'), c.query('select 3'), c.query('select $1::text', ['x'])]);
    expect(await stored()).toBe(n + 3);
  } finally {
    await c.end();
  }
});
