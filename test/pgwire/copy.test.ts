// COPY through the wire listener, governed as the reads and writes it is: COPY … TO STDOUT passes the column rules of a SELECT of what it moves and its stream is redacted (text, CSV) or refused (binary with a redacted column); COPY FROM STDIN is a write; COPY to a file stays refused. Through psql (COPY and \copy) and node-postgres with pg-copy-streams.
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startWireWorld, sqlError, wireAudit, type WireWorld } from './fixture.js';

const SETUP = `
create table customers (id int primary key, name text, email text, ssn text, internal_note text, secret_code text, phone text);
insert into customers values
  (1, 'Ada', 'ada@example.com', '123-45-6789', 'vip: owes 4000', 'SC-111', '+1 555 0100'),
  (2, 'O"Brien, Jr.' || chr(10) || 'second line', 'bob@example.com', '987-65-4321', E'tab\\there, "quoted"', 'SC-222', '+1 555 0101'),
  (3, 'Null Person', null, null, null, null, null),
  (4, '', '', '', '', 'SC-444', '');
create table notes (id serial primary key, body text);
create table hosts (id int primary key, addr inet, label text);
insert into hosts values (1, '203.0.113.7/24', 'edge'), (2, null, 'none');
`;
const SECRETS = ['ada@example.com', 'bob@example.com', '123-45-6789', '987-65-4321', 'vip: owes 4000', 'tab', 'SC-111', 'SC-222', '+1 555 0100'];

let ww: WireWorld;
let agent: { id: number; key: string };
let writer: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ setupSql: SETUP });
  agent = await ww.world.agent('copy-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  writer = await ww.world.agent('copy-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
  for (const who of [agent, writer]) {
    await ww.world.policy({ name: `redact for ${who.id}`, conditions: { identity_ids: [who.id], source_ids: [ww.sourceId] }, actions: { effect: 'allow', redact_columns: ['ssn', 'email', 'internal_note'] } });
    await ww.world.policy({ name: `deny for ${who.id}`, priority: 10, conditions: { identity_ids: [who.id], source_ids: [ww.sourceId], columns: ['secret_code', 'phone'] }, actions: { effect: 'deny' } });
  }
}, 60_000);
afterAll(async () => ww?.stop());

function noSecrets(out: string | Buffer): void {
  for (const s of SECRETS) expect(out.includes(s), `"${s}" came back`).toBe(false);
}

async function captureThrough(c: pg.Client, sql: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of c.query(copyTo(sql))) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Loads a stream into a fresh table directly (ungoverned), as a client of the gateway would read it. */
async function readBack(stream: Buffer, columns: string, options: string): Promise<Record<string, unknown>[]> {
  return ww.direct(async (d) => {
    await d.query(`drop table if exists back; create table back (${columns})`);
    const source = new PassThrough();
    source.end(stream);
    await pipeline(source, d.query(copyFrom(`copy back from stdin ${options}`)));
    return (await d.query('select * from back order by 1')).rows;
  });
}

describe('psql', () => {
  test('copy (list of allowed columns) to stdout: redacted columns replaced, the others intact', async () => {
    const r = await ww.psql('copy-reader', agent.key, ['-c', 'copy customers (id, name, email, ssn, internal_note) to stdout']);
    expect(r.code, r.stderr).toBe(0);
    noSecrets(r.stdout);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^1\tAda\t\[REDACTED:[a-z_]+\]\t\[REDACTED:[a-z_]+\]\t\[REDACTED:[a-z_]+\]$/);
    expect(lines[1]).toMatch(/^2\tO"Brien, Jr\.\\nsecond line\t/);
    expect(lines[2]).toBe('3\tNull Person\t\\N\t\\N\t\\N');
  });

  test('\\copy … to stdout is governed the same way', async () => {
    const r = await ww.psql('copy-reader', agent.key, ['-c', '\\copy (select id, email, internal_note from customers order by id) to stdout with csv header']);
    expect(r.code, r.stderr).toBe(0);
    noSecrets(r.stdout);
    expect(r.stdout.split('\n')[0]).toBe('id,email,internal_note');
    expect(r.stdout).toMatch(/REDACTED/);
  });

  test('copy (select email, internal_note …) to stdout (format csv)', async () => {
    const r = await ww.psql('copy-reader', agent.key, ['-c', 'copy (select email, internal_note from customers order by id) to stdout (format csv)']);
    expect(r.code, r.stderr).toBe(0);
    noSecrets(r.stdout);
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(4);
  });

  test('COPY (query) is redacted by provenance, not by output name: aliases, functions, aggregates, whole rows', async () => {
    for (const q of [
      'select internal_note as n, lower(email) as e, upper(ssn) as s from customers',
      `select string_agg(internal_note, ',') from customers`,
      'select x.email from (select id, email from customers where id < 3) x',
      'select to_jsonb(c) from (select id, email, ssn from customers) c',
    ]) {
      for (const format of ['', '(format csv)']) {
        const r = await ww.psql('copy-reader', agent.key, ['-c', `copy (${q}) to stdout ${format}`]);
        expect(r.code, `${q}: ${r.stderr}`).toBe(0);
        noSecrets(r.stdout.toLowerCase());
        noSecrets(r.stdout);
        expect(r.stdout).toMatch(/REDACTED/);
      }
    }
  });

  test('copy of a table with a denied column is refused with 42501 naming the column; without it, allowed', async () => {
    for (const sql of ['copy customers to stdout', 'copy customers to stdout (format csv)', 'copy public.customers to stdout with binary']) {
      const r = await ww.psql('copy-reader', agent.key, ['-c', sql]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/secret_code/);
      noSecrets(r.stdout);
    }
    const q = await ww.psql('copy-reader', agent.key, ['-c', 'copy (select id, phone from customers) to stdout']);
    expect(q.code).not.toBe(0);
    expect(q.stdout).not.toContain('555');
  });

  test('binary COPY of a redacted column is refused (0A000); of clean columns it is relayed and reads back', async () => {
    const r = await ww.psql('copy-reader', agent.key, ['-c', 'copy customers (id, email) to stdout (format binary)']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/email.*binary/);
    const c = await ww.client('copy-reader', agent.key);
    try {
      expect((await sqlError(captureThrough(c, 'copy (select id, ssn from customers) to stdout (format binary)'))).code).toBe('0A000');
      const stream = await captureThrough(c, 'copy (select id, name from customers order by id) to stdout (format binary)');
      const back = await readBack(stream, 'id int, name text', '(format binary)');
      expect(back.map((b) => b.name)).toEqual(['Ada', 'O"Brien, Jr.\nsecond line', 'Null Person', '']);
    } finally {
      await c.end();
    }
  });

  test('COPY to a server file or program stays refused', async () => {
    for (const sql of [`copy customers (id, name) to '/tmp/gatehouse-copy-test'`, `copy (select 1) to program 'true'`]) {
      const r = await ww.psql('copy-reader', agent.key, ['-c', sql]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/42501|not allowed|denied|role/i);
    }
  });
});

describe('node-postgres with pg-copy-streams', () => {
  test.each([
    ['text', ''],
    ['CSV with header, quotes, delimiters, newlines and NULLs', '(format csv, header)'],
    ['CSV with a custom delimiter, quote and NULL string', `(format csv, delimiter ';', quote '''', null 'NULL')`],
  ])('%s: every protected value replaced, the rest reads back unchanged', async (_name, options) => {
    const c = await ww.client('copy-reader', agent.key);
    try {
      const stream = await captureThrough(c, `copy customers (id, name, email, ssn, internal_note) to stdout ${options}`);
      noSecrets(stream);
      const back = await readBack(stream, 'id int, name text, email text, ssn text, internal_note text', options);
      expect(back.map((b) => b.name)).toEqual(['Ada', 'O"Brien, Jr.\nsecond line', 'Null Person', '']);
      expect(back[0]).toMatchObject({ email: expect.stringMatching(/^\[REDACTED:/), ssn: expect.stringMatching(/^\[REDACTED:/), internal_note: expect.stringMatching(/^\[REDACTED:/) });
      expect(back[2]).toMatchObject({ email: null, ssn: null, internal_note: null });
      expect(back[3]).toMatchObject({ email: '', ssn: '', internal_note: '' });
      // The session goes on.
      expect((await c.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await c.end();
    }
  });

  test('a redacted value of a non-text type is written as NULL, so the stream still loads as its type', async () => {
    const c = await ww.client('copy-reader', agent.key);
    try {
      for (const options of ['', '(format csv)']) {
        const stream = await captureThrough(c, `copy hosts to stdout ${options}`);
        expect(stream.includes('203.0.113.7')).toBe(false);
        expect(stream.includes('REDACTED')).toBe(false);
        const back = await readBack(stream, 'id int, addr inet, label text', options);
        expect(back).toEqual([
          { id: 1, addr: null, label: 'edge' },
          { id: 2, addr: null, label: 'none' },
        ]);
      }
    } finally {
      await c.end();
    }
  });

  test('the audit entry of a COPY counts its redactions', async () => {
    const c = await ww.client('copy-reader', agent.key);
    try {
      await captureThrough(c, 'copy customers (email, id) to stdout');
    } finally {
      await c.end();
    }
    const e = (await wireAudit(ww)).find((x) => /customers\s*\(email, id\)/i.test(String(x.sql_normalized ?? '')));
    expect(e).toMatchObject({ decision: 'allow', status: 200 });
    expect(Number(e!.redactions)).toBeGreaterThanOrEqual(2);
  });
});

describe('COPY FROM STDIN is a write', () => {
  const notes = () => ww.direct(async (d) => Number((await d.query<{ n: number }>('select count(*)::int as n from notes')).rows[0]!.n));

  test('a read-only role is refused (42501) and nothing is stored, through psql \\copy and pg-copy-streams', async () => {
    const r = await ww.psql('copy-reader', agent.key, ['-c', '\\copy notes (body) from stdin'], 'smuggled\n\\.\n');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/not allowed|role|42501/i);
    const c = await ww.client('copy-reader', agent.key);
    try {
      const source = new PassThrough();
      source.end('smuggled too\n');
      const e = await sqlError(pipeline(source, c.query(copyFrom('copy notes (body) from stdin'))));
      expect(e.code).toBe('42501');
    } finally {
      await c.end();
    }
    expect(await notes()).toBe(0);
  });

  test('a writer copies in as it would insert', async () => {
    const r = await ww.psql('copy-writer', writer.key, ['-c', '\\copy notes (body) from stdin'], 'first\nsecond\n\\.\n');
    expect(r.code, r.stderr).toBe(0);
    expect(await notes()).toBe(2);
    const e = (await wireAudit(ww)).filter((x) => /copy\s+notes/i.test(String(x.sql_normalized ?? '')));
    expect(e.some((x) => x.operation === 'write' && x.decision === 'allow')).toBe(true);
  });
});
