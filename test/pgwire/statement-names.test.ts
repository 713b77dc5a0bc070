// Named statements as PostgreSQL holds them: a Parse the upstream refused (the name is in use) or skipped (after an error, up to Sync) must not change what the gateway thinks the name means, or the next Execute would be governed as one statement while the upstream runs another. (A portal name reused inside a transaction aborts it, so the same trick cannot run a portal.)
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { bindMessage, executeMessage, parseMessage, queryMessage, syncMessage } from '../../src/gateway/pgwire/protocol.js';
import { openRawSession, startWireWorld, type RawSession, type WireWorld } from './fixture.js';

let ww: WireWorld;
let writer: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld();
  writer = await ww.world.agent('names-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
}, 60_000);
afterAll(async () => ww?.stop());

function rawSession(): Promise<RawSession> {
  return openRawSession(ww, 'names-writer', writer.key);
}

const pwned = () => ww.direct(async (d) => (await d.query<{ n: number }>(`select count(*)::int as n from customers where name = 'PWNED'`)).rows[0]!.n);

describe('named statements follow the upstream', () => {
  test('a Parse refused upstream for reusing a name leaves the name meaning what the upstream holds', async () => {
    const s = await rawSession();
    try {
      // An UPDATE without WHERE needs approval (writer role, high risk), but only at execution: its Parse is allowed.
      const prepared = await s.send(parseMessage('s1', `update customers set name = 'PWNED'`), syncMessage());
      expect(prepared.errors).toEqual([]);
      // The name is taken upstream: PostgreSQL refuses this Parse (42P05) and keeps the UPDATE under s1.
      const reuse = await s.send(parseMessage('s1', 'select 1'), syncMessage());
      expect(reuse.errors).toEqual(['42P05']);
      // Executing s1 is executing the UPDATE: it must be governed as the UPDATE (approval required), not as select 1.
      const run = await s.send(bindMessage('', 's1', []), executeMessage('', 0), syncMessage());
      expect(run.errors).toEqual(['WA001']);
    } finally {
      await s.close();
    }
    expect(await pwned()).toBe(0);
  });

  test('a Parse skipped upstream after an earlier error in its pipeline does not rename anything either', async () => {
    const s = await rawSession();
    try {
      expect((await s.send(parseMessage('s2', `update customers set name = 'PWNED'`), syncMessage())).errors).toEqual([]);
      // The gateway allows the first Parse (a read of customers); PostgreSQL refuses it (no such column, 42703) and
      // skips everything behind it up to Sync, the re-Parse of s2 included: s2 is still the UPDATE upstream.
      const skipped = await s.send(parseMessage('', 'select no_such_column from customers'), parseMessage('s2', 'select 1'), syncMessage());
      expect(skipped.errors).toEqual(['42703']);
      expect((await s.send(bindMessage('', 's2', []), executeMessage('', 0), syncMessage())).errors).toEqual(['WA001']);
    } finally {
      await s.close();
    }
    expect(await pwned()).toBe(0);
  });

  test('a name DEALLOCATEd and PREPAREd again in SQL is forgotten: its Bind is refused instead of governed as the old text', async () => {
    const notes = () => ww.direct(async (d) => (await d.query<{ n: number }>('select count(*)::int as n from notes')).rows[0]!.n);
    const before = await notes();
    const s = await rawSession();
    try {
      expect((await s.send(parseMessage('s3', 'select 1'), syncMessage())).errors).toEqual([]);
      // SQL acts on the same names: s3 is now an INSERT upstream, governed (and audited) once, as the PREPARE.
      expect((await s.send(queryMessage('deallocate s3'))).errors).toEqual([]);
      expect((await s.send(queryMessage(`prepare s3 as insert into notes(body) values ('smuggled')`))).errors).toEqual([]);
      // Executing s3 through the protocol would run the INSERT under the audit of select 1.
      const run = await s.send(bindMessage('', 's3', []), executeMessage('', 0), syncMessage());
      expect(run.errors).toEqual(['26000']);
      // DEALLOCATE ALL forgets every name.
      expect((await s.send(parseMessage('s4', 'select 1'), syncMessage())).errors).toEqual([]);
      expect((await s.send(queryMessage('deallocate all'))).errors).toEqual([]);
      expect((await s.send(bindMessage('', 's4', []), executeMessage('', 0), syncMessage())).errors).toEqual(['26000']);
    } finally {
      await s.close();
    }
    expect(await notes()).toBe(before);
  });

  test('a portal name CLOSEd and DECLAREd again in SQL is forgotten: its Execute is refused instead of governed as the old portal', async () => {
    const s = await rawSession();
    try {
      expect((await s.send(queryMessage('begin'))).errors).toEqual([]);
      expect((await s.send(parseMessage('one', 'select 1'), bindMessage('p1', 'one', []), syncMessage())).errors).toEqual([]);
      // SQL cursors are portals: p1 now reads customers upstream (governed once, as the DECLARE).
      expect((await s.send(queryMessage('close p1'))).errors).toEqual([]);
      expect((await s.send(queryMessage('declare p1 cursor for select name from customers'))).errors).toEqual([]);
      expect((await s.send(executeMessage('p1', 0), syncMessage())).errors).toEqual(['34000']);
    } finally {
      await s.close();
    }
  });
});
