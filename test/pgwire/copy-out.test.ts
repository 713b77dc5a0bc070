// The COPY-out redactor on streams PostgreSQL itself wrote (text, CSV, binary, with every option that shapes them): split at every byte it gives the same output as whole, PostgreSQL reads the output back to the expected values, and a row past the bound ends it without buffering.
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { copyFormatOf, type CopyFormat, type CopyOption } from '../../src/gateway/pgwire/copy-format.js';
import { CopyOutError, CopyOutRedactor, type CopyRowRedactor } from '../../src/gateway/pgwire/copy-out.js';
import { createPiiScanner } from '../../src/governance/pii/index.js';
import { guardedParse, initSqlParser } from '../../src/governance/sql/parser.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';

let db: TestDatabase;
let c: pg.Client;

const COLUMNS = ['id', 'name', 'email', 'note', 'blob'];
const TEXT_LIKE = [false, true, true, true, false];
const ROWS = [
  [1, 'Ada', 'ada@example.com', 'plain', '\\x00ff'],
  [2, 'tab\there', 'bob@example.com', 'line one\nline two\r\nthree', null],
  [3, 'comma, "quoted"', null, 'back\\slash and \\N literal', '\\x'],
  [4, '', '', 'semi;colon|pipe', '\\x0a0d'],
  [5, 'ünïcødé ✓', 'carol@example.com', 'mail me at dave@example.com please', '\\x5c'],
  [6, 'NULL', 'x', '"', '\\x22'],
];
const MARKER = /\[REDACTED:[a-z_]+\]/;

beforeAll(async () => {
  await initSqlParser();
  db = await createTestDatabase();
  c = await db.connect();
  await c.query('create table t (id int, name text, email text, note text, blob bytea)');
  for (const r of ROWS) await c.query('insert into t values ($1, $2, $3, $4, $5::bytea)', r);
}, 30_000);
afterAll(async () => {
  await c?.end();
  await db?.drop();
});

/** The options of a COPY statement as the gateway reads them. */
function formatOf(sql: string): CopyFormat {
  const parsed = guardedParse(sql);
  if (!parsed.ok) throw new Error('parse');
  const stmt = (parsed.tree as { stmts: { stmt: { CopyStmt: { options?: { DefElem: { defname: string; arg?: unknown } }[] } } }[] }).stmts[0]!.stmt.CopyStmt;
  const options: CopyOption[] = (stmt.options ?? []).map((o) => ({ name: o.DefElem.defname, arg: o.DefElem.arg }));
  const f = copyFormatOf(options);
  if (!f.ok) throw new Error(f.message);
  return f.format;
}

async function capture(sql: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const stream = c.query(copyTo(sql));
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The redactor a policy `redact_columns: [email]` with the fast scan gives on the wire. */
const redact: CopyRowRedactor = createPiiScanner({}).rowRedactor(COLUMNS, { mode: 'fast', redactColumns: ['email'] });

function redactor(format: CopyFormat, maxRowBytes = 1 << 20): CopyOutRedactor {
  return new CopyOutRedactor({ format, columns: COLUMNS.length, textColumns: format.kind === 'binary' ? TEXT_LIKE : COLUMNS.map(() => true), redact, maxRowBytes });
}

function run(r: CopyOutRedactor, chunks: Buffer[]): Buffer {
  const out = chunks.map((ch) => r.push(ch));
  r.end();
  return Buffer.concat(out);
}

/** Loads a redacted stream back into a fresh table with the same options: what a client of the gateway would read. */
async function readBack(stream: Buffer, options: string): Promise<Record<string, unknown>[]> {
  await c.query('drop table if exists back; create table back (id int, name text, email text, note text, blob bytea)');
  const source = new PassThrough();
  source.end(stream);
  await pipeline(source, c.query(copyFrom(`copy back from stdin ${options}`)));
  return (await c.query('select id, name, email, note, encode(blob, $$hex$$) as blob from back order by id')).rows;
}

/** Name, COPY TO options, and the COPY FROM options that read the output back. */
const CASES: [string, string, string?][] = [
  ['text', ''],
  ['text, custom delimiter and NULL', `(delimiter '|', null 'NULL')`],
  ['text with header', '(header)'],
  ['csv', '(format csv)'],
  ['csv with header, force_quote, custom quote and escape', `(format csv, header, force_quote *, quote '''', escape '\\')`, `(format csv, header, quote '''', escape '\\')`],
  ['csv, legacy syntax with a NULL string', `with csv header delimiter ';' null 'NULL'`],
  ['binary', '(format binary)'],
];

describe.each(CASES)('%s', (_name, options, readOptions = options) => {
  test('split at every byte, the output is the same as whole; read back, only what the policy and the scanner hide is hidden', async () => {
    const sql = `copy t to stdout ${options}`;
    const format = formatOf(sql);
    const stream = await capture(sql);
    const whole = run(redactor(format), [stream]);
    for (let at = 0; at <= stream.length; at++) {
      expect(run(redactor(format), [stream.subarray(0, at), stream.subarray(at)]).equals(whole), `split at ${at}`).toBe(true);
    }
    const r = redactor(format);
    const bytewise = run(r, [...stream].map((b) => Buffer.of(b)));
    expect(bytewise.equals(whole)).toBe(true);
    expect(r.rows).toBe(ROWS.length);
    // Several rows in one message, and rows cut in three: the same again.
    const third = Math.floor(stream.length / 3);
    expect(run(redactor(format), [stream.subarray(0, third), stream.subarray(third, 2 * third), stream.subarray(2 * third)]).equals(whole)).toBe(true);

    for (const secret of ['ada@example.com', 'bob@example.com', 'carol@example.com', 'dave@example.com']) expect(whole.includes(secret), secret).toBe(false);
    const back = await readBack(whole, readOptions);
    expect(back.map((b) => b.id)).toEqual(ROWS.map((row) => row[0]));
    for (const [i, row] of ROWS.entries()) {
      const b = back[i]!;
      // Names and bytea pass untouched (no personal data in them), whatever their quotes, tabs, newlines and backslashes
      // (a value equal to a chosen NULL string reads back as NULL: COPY's own ambiguity, the same without the gateway).
      const ambiguous = format.nullChosen && format.kind === 'text';
      expect(b.name).toBe(ambiguous && row[1] === 'NULL' ? null : row[1]);
      expect(b.blob).toBe(row[4] === null ? null : String(row[4]).slice(2));
      // The redacted column: a marker for every value; NULL and empty stay as they are, as in a DataRow. With a NULL
      // string of the statement's choosing, a text-format NULL cannot be told from a value equal to it: it is replaced too.
      if (row[2] === null) expect(b.email).toEqual(ambiguous ? expect.stringMatching(MARKER) : null);
      else if (row[2] === '') expect(b.email).toBe('');
      else expect(b.email).toMatch(MARKER);
    }
    // Scanned text: the address inside the note is replaced, the rest of the note kept.
    expect(back[4]!.note).toMatch(/^mail me at \[REDACTED:email\] please$/);
    expect(back[1]!.note).toBe('line one\nline two\r\nthree');
    expect(back[2]!.note).toBe('back\\slash and \\N literal');
  });
});

describe('bounds and malformed streams', () => {
  test('a row longer than the bound ends the stream, fed whole or byte by byte, without holding more than the bound', async () => {
    const sql = `copy (select 1 as id, repeat('x', 5000) as name, null::text as email, null::text as note, null::bytea as blob) to stdout`;
    for (const opt of ['', ' (format csv)', ' (format binary)']) {
      const format = formatOf(sql + opt);
      const stream = await capture(sql + opt);
      expect(() => run(redactor(format, 1000), [stream])).toThrow(CopyOutError);
      const r = redactor(format, 1000);
      let thrown: unknown = null;
      let fed = 0;
      try {
        for (const b of stream) {
          r.push(Buffer.of(b));
          fed++;
        }
      } catch (err) {
        thrown = err;
      }
      expect((thrown as CopyOutError).reason).toBe('row_too_long');
      expect(fed).toBeLessThanOrEqual(1000 + 32);
      // A row under the bound passes.
      expect(run(redactor(format, 10_000), [stream]).length).toBeGreaterThan(5000);
    }
  });

  test('a row with the wrong number of fields, a stream ending mid-row and a broken binary header are refused', () => {
    const text = formatOf('copy t to stdout');
    expect(() => run(redactor(text), [Buffer.from('1\ta\tb\n')])).toThrow(/fields/);
    expect(() => run(redactor(text), [Buffer.from('1\ta\tb\tc\td')])).toThrow(/inside a row/);
    const binary = formatOf('copy t to stdout (format binary)');
    expect(() => run(redactor(binary), [Buffer.from('NOTCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0', 'latin1')])).toThrow(/not a binary COPY/);
    expect(() => run(redactor(binary), [Buffer.from('PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0', 'latin1')])).toThrow(/trailer/);
  });
});

describe('options', () => {
  test.each([
    [`copy t to stdout (encoding 'latin1')`, /UTF8/],
    [`copy t to stdout (format xml)`, /format/],
    [`copy t to stdout (delimiter '||')`, /single one-byte/],
    [`copy t to stdout (format csv, quote 'é')`, /single one-byte/],
    [`copy t to stdout (on_error ignore)`, /not supported/],
    [`copy t to stdout (header maybe)`, /Boolean/],
  ])('%s is refused', (sql, message) => {
    const parsed = guardedParse(sql);
    if (!parsed.ok) throw new Error('parse');
    const stmt = (parsed.tree as { stmts: { stmt: { CopyStmt: { options?: { DefElem: { defname: string; arg?: unknown } }[] } } }[] }).stmts[0]!.stmt.CopyStmt;
    const f = copyFormatOf((stmt.options ?? []).map((o) => ({ name: o.DefElem.defname, arg: o.DefElem.arg })));
    expect(f.ok).toBe(false);
    expect((f as { message: string }).message).toMatch(message);
  });

  test('UTF8 spelled any way is accepted, and a chosen NULL string is remembered', () => {
    expect(formatOf(`copy t to stdout (encoding 'UTF-8')`).kind).toBe('text');
    expect(formatOf(`copy t to stdout (null 'x')`).nullChosen).toBe(true);
    expect(formatOf(`copy t to stdout with binary`).kind).toBe('binary');
  });
});
