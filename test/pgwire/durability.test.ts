// Strict audit durability on the wire: when a statement's answer (CommandComplete / ReadyForQuery, or its refusal) reaches the client, its audit entry is already stored.
import { afterAll, beforeAll, expect, test } from 'vitest';
import type pg from 'pg';
import { startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
let agent: { id: number; key: string };
let auditDb: pg.Client;

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'dursrc', env: { SERVICE_AUDIT__DURABILITY_MODE: 'strict' } });
  agent = await ww.world.agent('wire-durable', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  auditDb = await ww.world.svc.database!.connect();
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

test('a statement whose entry cannot be recorded does not report success: 57P03, then service resumes', async () => {
  // PostgreSQL refuses the insert (table renamed away) and the spool is too small for any entry: nowhere to record.
  const broken = await startWireWorld({
    sourceId: 'dursrc2',
    env: { SERVICE_AUDIT__DURABILITY_MODE: 'strict', SERVICE_AUDIT__SPOOL__MAX_BYTES: '1', SERVICE_AUDIT__SPOOL__SEGMENT_BYTES: '1' },
  });
  const control = await broken.world.svc.database!.connect();
  try {
    const a = await broken.world.agent('wire-undurable', [{ source_id: broken.sourceId, role_key: 'reader' }]);
    const c = await broken.client('wire-undurable', a.key);
    try {
      expect((await c.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      await control.query('alter table audit_entries rename to audit_entries_away');
      await expect(c.query('select 2 as two')).rejects.toMatchObject({ code: '57P03' });
      await expect(c.query('select $1::int as three', [3])).rejects.toMatchObject({ code: '57P03' });
      await control.query('alter table audit_entries_away rename to audit_entries');
      // The writer finds PostgreSQL again after its backoff; the session itself was never broken.
      const deadline = Date.now() + 10_000;
      for (;;) {
        try {
          expect((await c.query('select $1::int as four', [4])).rows).toEqual([{ four: 4 }]);
          break;
        } catch (err) {
          if ((err as { code?: string }).code !== '57P03' || Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    } finally {
      await c.end();
    }
  } finally {
    await control.query('alter table if exists audit_entries_away rename to audit_entries').catch(() => undefined);
    await control.end();
    await broken.stop();
  }
}, 60_000);
