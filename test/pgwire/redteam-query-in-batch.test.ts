// A simple Query sent inside an extended-protocol batch that has not been Synced must not overtake the batch upstream: the relay would then match the Query's rows to the batch's Execute and relay them under that statement's governance (here: a redacted column in clear).
import type net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Backend, FrameReader, bindMessage, executeMessage, message, parseDataRow, parseErrorFields, parseMessage, queryMessage, syncMessage } from '../../src/gateway/pgwire/protocol.js';
import { startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
let agent: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'qbatchsrc' });
  agent = await ww.world.agent('qbatch-agent', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  await ww.world.policy({ name: 'qbatch redact', conditions: { identity_ids: [agent.id] }, actions: { effect: 'allow', redact_columns: ['email', 'ssn'] } });
}, 60_000);
afterAll(async () => ww?.stop());

/** Logs in with node-postgres, then drives the socket by hand; returns what came back (data rows as text, errors, ReadyForQuery, close). */
async function session(): Promise<{ seen: string[]; write(b: Buffer): void; settle(): Promise<void> }> {
  const client = new pg.Client({ host: '127.0.0.1', port: ww.port, user: 'qbatch-agent', password: agent.key, database: ww.sourceId, ssl: false });
  client.on('error', () => undefined);
  await client.connect();
  const socket = (client as unknown as { connection: { stream: net.Socket } }).connection.stream;
  socket.removeAllListeners('data');
  const reader = new FrameReader({ startupBytes: 0, messageBytes: 1 << 20 });
  reader.startup = false;
  const seen: string[] = [];
  let closed = false;
  socket.on('close', () => {
    closed = true;
    seen.push('closed');
  });
  socket.on('data', (chunk: Buffer) => {
    reader.push(chunk);
    for (let f = reader.next(); f !== null; f = reader.next()) {
      if (f.type === Backend.DataRow) seen.push(`row:${parseDataRow(f.body).map((v) => v?.toString()).join('|')}`);
      else if (f.type === Backend.ErrorResponse) seen.push(`error:${parseErrorFields(f.body).get('C')}`);
      else if (f.type === Backend.ReadyForQuery) seen.push('ready');
    }
  });
  return {
    seen,
    write: (b) => socket.write(b),
    settle: async () => {
      const deadline = Date.now() + 5_000;
      while (!closed && Date.now() < deadline && seen.filter((s) => s === 'ready').length < 1) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300));
    },
  };
}

for (const [label, end] of [['without Sync', Buffer.alloc(0)], ['after a Flush', message(0x48, Buffer.alloc(0))]] as const) {
  test(`a Query behind an unsynced Execute (${label}) ends the session; no redacted value is sent in clear`, async () => {
    const s = await session();
    s.write(Buffer.concat([parseMessage('', 'select id from customers'), bindMessage('', '', []), executeMessage('', 0), end, queryMessage('select ssn, email from customers')]));
    await s.settle();
    s.write(syncMessage());
    await s.settle();
    const text = s.seen.join(' ');
    expect(text).not.toContain('123-45-6789');
    expect(text).not.toContain('ada@example.com');
    expect(s.seen).toContain('error:08P01');
    expect(s.seen.at(-1)).toBe('closed');
  });
}

test('a Query after the batch is Synced runs as usual, redacted', async () => {
  const s = await session();
  s.write(Buffer.concat([parseMessage('', 'select id from customers'), bindMessage('', '', []), executeMessage('', 0), syncMessage(), queryMessage('select ssn from customers order by id')]));
  await s.settle();
  await new Promise((r) => setTimeout(r, 300));
  expect(s.seen.filter((x) => x.startsWith('row:'))).toEqual(['row:1', 'row:2', 'row:[REDACTED:column]', 'row:[REDACTED:column]']);
});
