// The protocol's FunctionCall message is a cycle of its own, as in PostgreSQL: answered at once (a result or an error, then ReadyForQuery) without waiting for a Sync, governed as the function it calls, and never swallowing the query after it.
import type net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Backend, FrameReader, message, parseErrorFields, queryMessage } from '../../src/gateway/pgwire/protocol.js';
import { FUNCTION_CALL_RESPONSE } from '../../src/gateway/pgwire/function-call.js';
import { startWireWorld, wireAudit, type WireWorld } from './fixture.js';

let ww: WireWorld;
let reader: { id: number; key: string };
let admin: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld();
  reader = await ww.world.agent('fcall-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  // lo_creat is off the built-in allowlist (deny by default): a role naming it lets the admin's call reach the approval.
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'lo-creator',
    rules: { sql: [{ operations: ['admin'], tables: ['*.*'], functions: ['lo_creat'], approval: 'always' }] },
  });
  if (role.status !== 201) throw new Error(role.text);
  admin = await ww.world.agent('fcall-admin', [{ source_id: ww.sourceId, role_key: 'admin' }, { source_id: ww.sourceId, role_key: 'lo-creator' }]);
}, 60_000);
afterAll(async () => ww?.stop());

interface Answer {
  types: string[];
  errors: string[];
  /** FunctionCallResponse values as text (null for NULL). */
  results: (string | null)[];
  /** The transaction status of the ReadyForQuery that ended the answer. */
  status: string;
}

/** node-postgres logs in (SCRAM); then its socket is driven message by message (the driver has no FunctionCall). */
async function rawSession(user: string, key: string) {
  const client = new pg.Client({ host: '127.0.0.1', port: ww.port, user, password: key, database: ww.sourceId, ssl: false });
  client.on('error', () => undefined);
  await client.connect();
  const socket = (client as unknown as { connection: { stream: net.Socket } }).connection.stream;
  socket.removeAllListeners('data');
  const reader = new FrameReader({ startupBytes: 0, messageBytes: 1 << 20 });
  reader.startup = false;
  const answers: Answer[] = [];
  let answer: Answer = { types: [], errors: [], results: [], status: '' };
  let wake: (() => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    reader.push(chunk);
    for (let f = reader.next(); f !== null; f = reader.next()) {
      answer.types.push(String.fromCharCode(f.type));
      if (f.type === Backend.ErrorResponse) answer.errors.push(parseErrorFields(f.body).get('C') ?? '?');
      if (f.type === FUNCTION_CALL_RESPONSE) {
        const len = f.body.readInt32BE(0);
        answer.results.push(len < 0 ? null : f.body.toString('utf8', 4, 4 + len));
      }
      if (f.type === Backend.ReadyForQuery) {
        answer.status = String.fromCharCode(f.body[0]!);
        answers.push(answer);
        answer = { types: [], errors: [], results: [], status: '' };
        wake?.();
      }
    }
  });
  /** Writes the messages and waits for `cycles` ReadyForQuery (at most 5 s: a hang fails the test, it does not stall it). */
  const send = async (cycles: number, ...messages: Buffer[]): Promise<Answer[]> => {
    answers.length = 0;
    socket.write(Buffer.concat(messages));
    const deadline = Date.now() + 5_000;
    while (answers.length < cycles && Date.now() < deadline) await new Promise<void>((r) => ((wake = r), setTimeout(r, 50)));
    return answers.splice(0);
  };
  return { send, close: () => void socket.end(message(0x58, Buffer.alloc(0))) };
}

/** FunctionCall: OID, text arguments, text result. */
function functionCall(oid: number, args: (string | null)[]): Buffer {
  const parts: Buffer[] = [];
  const head = Buffer.alloc(4 + 2 + 2 + 2);
  head.writeUInt32BE(oid, 0);
  head.writeInt16BE(1, 4); // one format code for all arguments
  head.writeInt16BE(0, 6); // text
  head.writeInt16BE(args.length, 8);
  parts.push(head);
  for (const a of args) {
    const len = Buffer.alloc(4);
    if (a === null) {
      len.writeInt32BE(-1, 0);
      parts.push(len);
    } else {
      const v = Buffer.from(a, 'utf8');
      len.writeInt32BE(v.length, 0);
      parts.push(len, v);
    }
  }
  parts.push(Buffer.from([0, 0])); // text result
  return message(0x46, Buffer.concat(parts));
}

const oidOf = (signature: string) => ww.direct(async (c) => Number((await c.query<{ oid: number }>(`select $1::regprocedure::oid::int8 as oid`, [signature])).rows[0]!.oid));
const largeObjects = () => ww.direct(async (c) => Number((await c.query<{ n: number }>('select count(*)::int as n from pg_largeobject_metadata')).rows[0]!.n));

describe('raw FunctionCall', () => {
  test('a refused large-object call is answered with 42501 and ReadyForQuery at once, and the next query is answered', async () => {
    const s = await rawSession('fcall-reader', reader.key);
    try {
      const loCreat = await oidOf('lo_creat(integer)');
      const [call, query] = await s.send(2, functionCall(loCreat, ['-1']), queryMessage('select 42 as answer'));
      expect(call, 'FunctionCall answered without a Sync').toMatchObject({ types: ['E', 'Z'], errors: ['42501'], status: 'I' });
      expect(query, 'the Query after it is answered').toMatchObject({ types: ['T', 'D', 'C', 'Z'], errors: [] });
    } finally {
      s.close();
    }
    expect(await largeObjects()).toBe(0);
  });

  test('an allowed call answers FunctionCallResponse, its text result scanned for personal data like a row', async () => {
    const s = await rawSession('fcall-reader', reader.key);
    try {
      // textcat needs no collation (a fast-path call has none to give, so PostgreSQL refuses lower() this way: 42P22).
      const textcat = await oidOf('textcat(text,text)');
      const [plain] = await s.send(1, functionCall(textcat, ['hello', ' world']));
      expect(plain).toMatchObject({ types: ['V', 'Z'], results: ['hello world'] });
      const [email] = await s.send(1, functionCall(textcat, ['ada@', 'example.com']));
      expect(email!.types).toEqual(['V', 'Z']);
      expect(email!.results[0]).not.toContain('ada@example.com');
      expect(email!.results[0]).toMatch(/REDACTED/);
      const [nul] = await s.send(1, functionCall(textcat, [null, 'x']));
      expect(nul).toMatchObject({ types: ['V', 'Z'], results: [null] });
    } finally {
      s.close();
    }
    const entries = (await wireAudit(ww)).filter((e) => String(e.sql_normalized ?? '').includes('textcat'));
    expect(entries.length).toBeGreaterThanOrEqual(3);
    expect(entries.every((e) => e.decision === 'allow' && e.status === 200)).toBe(true);
  });

  test('a call needing approval answers the approval error and ReadyForQuery, inside a transaction with its status', async () => {
    const s = await rawSession('fcall-admin', admin.key);
    try {
      const loCreat = await oidOf('lo_creat(integer)');
      const [begin, call, query] = await s.send(3, queryMessage('begin'), functionCall(loCreat, ['-1']), queryMessage('select 1'));
      expect(begin!.status).toBe('T');
      expect(call!.types).toEqual(['E', 'Z']);
      expect(call!.errors).toEqual(['WA001']);
      // As after PostgreSQL's own error: the block is aborted on both sides.
      expect(call!.status).toBe('E');
      expect(query).toMatchObject({ errors: ['25P02'], status: 'E' });
      await s.send(1, queryMessage('rollback'));
    } finally {
      s.close();
    }
    expect(await largeObjects()).toBe(0);
  });

  test('an unknown function OID is 42883, and the session goes on', async () => {
    const s = await rawSession('fcall-reader', reader.key);
    try {
      const [call, query] = await s.send(2, functionCall(4_000_000_000, []), queryMessage('select 1'));
      expect(call).toMatchObject({ types: ['E', 'Z'], errors: ['42883'] });
      expect(query!.errors).toEqual([]);
    } finally {
      s.close();
    }
  });
});

describe('psql', () => {
  test('\\lo_import is refused with an error, not a hang', async () => {
    const started = Date.now();
    const r = await ww.psql('fcall-reader', reader.key, ['-c', '\\lo_import /etc/hostname', '-c', 'select 7 as after']);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(r.stderr).toMatch(/not allowed|denied|permission|source role|42501/i);
    expect(await largeObjects()).toBe(0);
  });
});
