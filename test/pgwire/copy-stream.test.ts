// CopyData from the client is streamed to the upstream, not bounded like a statement: a 20 MiB row (one CopyData message above gateway.limits.pg_message_bytes, 16 MiB by default) arrives whole, as PostgreSQL accepts it directly. Before, the message was refused with 08P01 and the connection closed.
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { from as copyFrom } from 'pg-copy-streams';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
let writer: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'copystreamsrc' });
  writer = await ww.world.agent('copy-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
}, 60_000);
afterAll(async () => ww?.stop());

test('node-postgres COPY FROM STDIN with one 20 MiB CopyData message stores the row', async () => {
  const c = await ww.client('copy-writer', writer.key);
  const body = 'x'.repeat(20 * 1024 * 1024);
  try {
    const stream = c.query(copyFrom('COPY notes(body) FROM STDIN'));
    // One chunk: pg-copy-streams sends it as one CopyData message.
    await pipeline(Readable.from([Buffer.from(`${body}\n`)]), stream);
    // The session goes on.
    expect((await c.query('select 1 as one')).rows[0].one).toBe(1);
  } finally {
    await c.end();
  }
  expect(await ww.direct(async (d) => (await d.query("select length(body) as n from notes where body like 'xxx%'")).rows[0].n)).toBe(body.length);
}, 60_000);
