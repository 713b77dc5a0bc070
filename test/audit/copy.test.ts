// Audit batches through COPY: the same stored rows as the JSON insert for hostile values, the fallbacks (conflict, missing partition, unfaithful text), counts, and COPYs cut or hung mid-stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { auditCopyLine } from '../../src/audit/copy-text.js';
import { AUDIT_COPY_BINARY_STATEMENT, auditBinaryBatch, auditTuple, encodeAccepted } from '../../src/audit/copy-binary.js';
import pgCopy from 'pg-copy-streams';
import { AUDIT_CACHE_OUTCOMES, AUDIT_CHANNELS, AUDIT_DECISIONS, AUDIT_FIELDS, assertValidEntry, newAuditId, type AuditEntry } from '../../src/audit/entry.js';
import { copyAuditEntries, copySealed, ENCODE_SLICE, insertAuditEntries } from '../../src/audit/insert.js';
import { SealChain, rowDigestHex } from '../../src/audit/seal.js';
import { listPartitions, monthStart } from '../../src/audit/partitions.js';
import { AuditWriter } from '../../src/audit/writer.js';
import { verifyAudit } from '../../src/audit/verify.js';
import type { CopyIn } from '../../src/store/copy.js';
import { type MigratedStore, TEST_PG_HOST, TEST_PG_PORT } from '../support/pg.js';
import { auditConfig, countAuditLike, kyselyVia, makeEntry, migratedStoreForFile, recordingLogger, TcpProxy, tempSpoolDir, waitFor } from './support.js';

let migrated: MigratedStore;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let db: Kysely<any>;
let copyIn: CopyIn;
migratedStoreForFile((m) => {
  migrated = m;
  db = m.store.db;
  copyIn = m.store.copyIn!;
});

/** Every column as PostgreSQL's own text output, so "identical" means identical as stored, type by type. */
const STORED_COLUMNS = sql.raw(AUDIT_FIELDS.map((f) => `${f}::text as ${f}`).join(', '));

async function storedRows(ids: readonly string[]): Promise<Record<string, string | null>[]> {
  if (ids.length === 0) return [];
  const { rows } = await sql<Record<string, string | null>>`select ${STORED_COLUMNS} from audit_entries where id = any(${ids}::uuid[]) order by id`.execute(db);
  return rows;
}

describe('COPY text line (the canonical form of rows under format-1 seals)', () => {
  it('writes one tab-separated line of AUDIT_FIELDS.length fields per entry', () => {
    for (const e of [makeEntry(), makeEntry({ path: 'a\tb\nc\\d' })]) {
      const line = auditCopyLine(e);
      expect(line.endsWith('\n')).toBe(true);
      expect(line.slice(0, -1)).not.toContain('\n');
      expect(line.slice(0, -1).split('\t')).toHaveLength(AUDIT_FIELDS.length);
    }
  });

  it('escapes text, NULL, arrays and JSON as the text format and array literals require', () => {
    const e = makeEntry({
      path: 'a\\b\tc\nd\re\\N',
      operation: null,
      tables: ['', 'NULL', 'a,b', '{x}', 'q"q', 'b\\s', 't\tn\n'],
      reasons: [],
      policy_ids: [-1, 0, 7],
      target: { type: 'x', id: 'a\\"b\n' },
    });
    const fields = auditCopyLine(e).slice(0, -1).split('\t');
    const at = (name: (typeof AUDIT_FIELDS)[number]): string => fields[AUDIT_FIELDS.indexOf(name)]!;
    expect(at('path')).toBe('a\\\\b\\tc\\nd\\re\\\\N');
    expect(at('operation')).toBe('\\N');
    expect(at('tables')).toBe('{"","NULL","a,b","{x}","q\\\\"q","b\\\\\\\\s","t\\tn\\n"}');
    expect(at('reasons')).toBe('{}');
    expect(at('policy_ids')).toBe('{-1,0,7}');
    // jsonb keeps no key order: the canonical text sorts keys (a row's seal digest covers it).
    expect(at('target')).toBe('{"id":"a\\\\\\\\\\\\"b\\\\n","type":"x"}');
  });
});

describe('COPY binary encoding', () => {
  it('names every column of AUDIT_FIELDS in order, in the binary format', () => {
    expect(AUDIT_COPY_BINARY_STATEMENT).toBe(`copy audit_entries (${AUDIT_FIELDS.join(', ')}) from stdin with (format binary)`);
    const batch = auditBinaryBatch([makeEntry(), makeEntry()])!;
    expect(batch.bytes.subarray(0, 11).toString('latin1')).toBe('PGCOPY\n\xff\r\n\0');
    expect(batch.bytes.readInt16BE(batch.bytes.length - 2)).toBe(-1);
    for (const t of batch.tuples) expect(t.readInt16BE(0)).toBe(AUDIT_FIELDS.length);
    expect(Buffer.concat(batch.tuples).length).toBe(batch.bytes.length - 19 - 2);
  });

  it('has no COPY data for a batch with a lone surrogate or a NUL in any text (a real U+FFFD or an emoji is fine)', () => {
    expect(auditBinaryBatch([makeEntry({ path: '/ok/😀' }), makeEntry({ path: '/replacement/\uFFFD' })])).not.toBeNull();
    expect(auditBinaryBatch([makeEntry({ path: '/\uD800' })])).toBeNull();
    expect(auditBinaryBatch([makeEntry({ tables: ['\uDC00x'] })])).toBeNull();
    expect(auditBinaryBatch([makeEntry({ reasons: ['a\u0000b'] })])).toBeNull();
    expect(auditBinaryBatch([makeEntry({ sql_normalized: `${'x'.repeat(40)}\u0000` })])).toBeNull();
    expect(auditBinaryBatch([makeEntry(), makeEntry({ error_code: 'é\uDBFF' })])).toBeNull();
  });

  /** PostgreSQL's own binary COPY of stored rows, one tuple each (jsonb aside: its send form is jsonb's text output, spaced its own way). */
  async function pgTuples(ids: readonly string[]): Promise<Buffer[]> {
    const columns = AUDIT_FIELDS.map((f) => (f === 'target' || f === 'changes' ? `null::jsonb as ${f}` : f)).join(', ');
    const client = await migrated.database.connect();
    try {
      const chunks: Buffer[] = [];
      const stream = client.query(pgCopy.to(`copy (select ${columns} from audit_entries where id in (${ids.map((id) => `'${id}'`).join(',')}) order by id) to stdout with (format binary)`));
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      const data = Buffer.concat(chunks);
      const tuples: Buffer[] = [];
      let off = 19;
      for (;;) {
        const start = off;
        const fields = data.readInt16BE(off);
        off += 2;
        if (fields === -1) break;
        for (let i = 0; i < fields; i++) {
          const len = data.readInt32BE(off);
          off += 4 + Math.max(len, 0);
        }
        tuples.push(data.subarray(start, off));
      }
      return tuples;
    } finally {
      await client.end();
    }
  }

  it('writes each row exactly as PostgreSQL sends it back, byte for byte, for hostile values (property)', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(entryArb, { minLength: 1, maxLength: 4 }), async (generated) => {
        const batch = generated.map((e) => ({ ...e, id: newAuditId(Date.parse(e.ts)) }));
        fc.pre(auditBinaryBatch(batch) !== null);
        runs += 1;
        try {
          expect(await copyAuditEntries(db, copyIn, batch, 10_000)).toBe(batch.length);
          const sorted = [...batch].sort((a, b) => (a.id < b.id ? -1 : 1));
          const expected = sorted.map((e) => auditTuple({ ...e, target: null, changes: null }));
          expect(await pgTuples(sorted.map((e) => e.id))).toEqual(expected);
        } finally {
          await sql`delete from audit_entries where id = any(${batch.map((e) => e.id)}::uuid[])`.execute(db);
        }
      }),
      { numRuns: 60 },
    );
    expect(runs).toBeGreaterThan(30);
  }, 120_000);

  it('writes -0 as 0 and the extremes of each integer type as stored', async () => {
    const e = makeEntry({ duration_ms: -0, identity_id: -(2 ** 31), approval_id: 2 ** 31 - 1, bytes_in: Number.MAX_SAFE_INTEGER, bytes_out: 0, policy_ids: [-(2 ** 31), 2 ** 31 - 1, -1] });
    expect(await copyAuditEntries(db, copyIn, [e], 10_000)).toBe(1);
    expect((await storedRows([e.id]))[0]).toMatchObject({ duration_ms: '0', identity_id: '-2147483648', approval_id: '2147483647', bytes_in: '9007199254740991', policy_ids: '{-2147483648,2147483647,-1}' });
    expect(await pgTuples([e.id])).toEqual([auditTuple({ ...e, duration_ms: 0, target: null, changes: null })]);
  });
});

// ---------------------------------------------------------------------------------------------
// Differential: COPY and the JSON insert store the same rows

const HOSTILE = ['\\', '\t', '\n', '\r', '\\N', '\\.', '\\\\', '\\t', '"', "'", '{', '}', ',', '', ' ', 'NULL', 'null', '{"a":1}', '[1,2]', '\u0001', '\u007f', '\u000b', '\f', 'é', 'ß', '😀', '👩‍👩‍👧', '\u2028', '\uFEFF', '\uFFFD', '$1', '%s'];
/** Characters PostgreSQL refuses in text or jsonb (assertValidEntry accepts them): both paths store them as U+FFFD. */
const POISON = ['\u0000', '\uD800', '\uDFFF', 'a\uDBFFb'];

const piece = fc.oneof(fc.constantFrom(...HOSTILE), fc.string({ unit: 'grapheme', maxLength: 6 }), fc.string({ unit: 'binary', maxLength: 6 }).map((s) => s.replaceAll('\0', '')));
const hostile = fc.oneof(
  { arbitrary: fc.array(piece, { maxLength: 8 }).map((a) => a.join('')), weight: 300 },
  // Long values up to the validator's 16,384 characters, made of what needs escaping most.
  { arbitrary: fc.tuple(fc.constantFrom('\\', '\t', '"', 'x', '😀', '{,}'), fc.integer({ min: 1_000, max: 16_384 })).map(([p, n]) => p.repeat(n).slice(0, 16_384)), weight: 3 },
  { arbitrary: fc.tuple(piece, fc.constantFrom(...POISON), piece).map((a) => a.join('')), weight: 1 },
  // Around the encoder's short-text length (copy-binary.ts SHORT_TEXT, 128): plain ASCII is written by its own loop, and
  // one character past ASCII anywhere in it, first or last included, sends the whole text to the UTF-8 encoder.
  { arbitrary: fc.tuple(fc.integer({ min: 120, max: 136 }), fc.nat(), fc.constantFrom('', 'é', '😀', '\u0080', '\u007f', '\uFFFD')).map(([n, at, odd]) => { const a = 'x'.repeat(n); const i = at % (n + 1); return a.slice(0, i) + odd + a.slice(i); }), weight: 20 },
).filter((s) => s.length <= 16_384);
const textOrNull = fc.option(hostile, { freq: 4 });
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    hostile,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(hostile, tie('value'), { maxKeys: 4 }),
  ),
})).value;
const thisMonth = monthStart(new Date()).getTime();
const entryArb: fc.Arbitrary<AuditEntry> = fc.record({
  // Within the months the migration creates, so no partition is made here.
  ts: fc.integer({ min: thisMonth, max: monthStart(new Date(), 3).getTime() - 1 }).map((ms) => new Date(ms).toISOString()),
  request_id: hostile.map((s) => `r${s}`.slice(0, 256)),
  channel: fc.constantFrom(...AUDIT_CHANNELS),
  // fc.integer() spans int4, the column type; assertValidEntry refuses anything beyond it.
  identity_id: fc.option(fc.integer()),
  admin_user_id: fc.option(fc.integer()),
  source_id: textOrNull,
  operation: textOrNull,
  method: textOrNull,
  path: textOrNull,
  sql_fingerprint: textOrNull,
  sql_normalized: textOrNull,
  tables: fc.array(hostile, { maxLength: 6 }),
  decision: fc.constantFrom(...AUDIT_DECISIONS),
  reasons: fc.array(hostile, { maxLength: 6 }),
  policy_ids: fc.array(fc.integer(), { maxLength: 5 }),
  approval_id: fc.option(fc.integer()),
  status: fc.nat(),
  upstream_status: fc.option(fc.integer()),
  cache: fc.option(fc.constantFrom(...AUDIT_CACHE_OUTCOMES)),
  redactions: fc.nat(),
  bytes_in: fc.maxSafeNat(),
  bytes_out: fc.maxSafeNat(),
  duration_ms: fc.double({ min: 0, noNaN: true, noDefaultInfinity: true }),
  client_ip: textOrNull,
  action: textOrNull,
  target: fc.option(fc.record({ type: hostile, id: hostile })),
  changes: fc.option(fc.record({ before: jsonValue, after: jsonValue })),
  error_code: textOrNull,
}).map((e) => ({ id: '', ...e }));

async function outcome(store: () => Promise<number>, ids: readonly string[]): Promise<{ stored: number; rows: Record<string, string | null>[] }> {
  try {
    const stored = await store();
    return { stored, rows: await storedRows(ids) };
  } finally {
    await sql`delete from audit_entries where id = any(${ids}::uuid[])`.execute(db);
  }
}

describe('COPY against the JSON insert (property)', () => {
  it('stores column-for-column the same rows for hostile values, and every batch whole', async () => {
    let copied = 0;
    let replaced = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(entryArb, { minLength: 1, maxLength: 6 }), async (generated) => {
        // Fresh ids per run: shrinking replays the same values.
        const batch = generated.map((e) => ({ ...e, id: newAuditId(Date.parse(e.ts)) }));
        for (const e of batch) assertValidEntry(e);
        const ids = batch.map((e) => e.id);
        const viaInsert = await outcome(() => insertAuditEntries(db, batch), ids);
        const viaCopy = await outcome(() => copyAuditEntries(db, copyIn, batch, 10_000), ids);
        runs += 1;
        if (auditBinaryBatch(batch) !== null) copied += 1;
        else replaced += 1;
        expect(viaCopy).toEqual(viaInsert);
        expect(viaInsert.stored).toBe(batch.length);
        expect(viaInsert.rows).toHaveLength(batch.length);
      }),
      { numRuns: 150 },
    );
    // The property means something only if most batches really went through COPY unchanged and some needed replacing.
    expect(copied).toBeGreaterThan(runs / 2);
    expect(replaced).toBeGreaterThan(0);
  }, 120_000);
});

describe('entries encoded as accepted (property)', () => {
  it('a batch of entries encoded when the writer accepted them, all, some or none, is byte for byte the batch encoded at once', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(entryArb, fc.boolean()), { minLength: 1, maxLength: 8 }), (generated) => {
        const entries = generated.map(([e]) => ({ ...e, id: newAuditId(Date.parse(e.ts)) }));
        for (const e of entries) assertValidEntry(e);
        const accepted = entries.map((e, i) => (generated[i]![1] ? encodeAccepted(e) : null));
        const once = auditBinaryBatch(entries);
        // A row is made for every entry PostgreSQL's text takes, and for no other.
        entries.forEach((e, i) => generated[i]![1] && expect(accepted[i] === null).toBe(auditBinaryBatch([e]) === null));
        const ahead = auditBinaryBatch(entries, accepted);
        expect(ahead).toEqual(once);
        if (once === null) return;
        accepted.forEach((row, i) => row && expect(row.digestHex).toBe(rowDigestHex(once.tuples[i]!)));
      }),
      { numRuns: 300 },
    );
  });

  it('stores the entry as it was accepted, and makes no row of one PostgreSQL would refuse', () => {
    const e = makeEntry({ path: '/as-accepted', bytes_out: 7 });
    const row = encodeAccepted(e)!;
    const stored = auditTuple(e);
    expect(row.bytes).toEqual(stored);
    // Changed after it was accepted (which the writer's callers must not do): the row made at acceptance is stored.
    const changed = Object.assign(e, { path: '/changed', bytes_out: 8 });
    expect(auditBinaryBatch([changed], [row])!.tuples[0]).toEqual(stored);
    expect(encodeAccepted(makeEntry({ path: '/nul\u0000' }))).toBeNull();
  });

  it('batches the writer stores from accepted rows hold every entry and verify, one with an entry that needed replacing too', async () => {
    const spool = await tempSpoolDir();
    const writer = new AuditWriter({ db, copyIn, config: auditConfig({ durability_mode: 'buffered', batch_size: 50, spool: { dir: spool.dir } }), logger: recordingLogger() });
    // An hour ahead, so the verified range holds these rows alone.
    const base = Date.now() + 3_600_000;
    const written = Array.from({ length: 120 }, (_, i) => makeEntry({ request_id: `accepted-${i}`, ts: new Date(base + i).toISOString(), path: i === 77 ? '/p/\u0000' : `/p/${i}` }));
    try {
      await writer.start();
      for (const e of written) {
        await writer.write(e);
        if (e.request_id === 'accepted-30') {
          // One that passes the entry's checks but cannot be encoded (its change throws when read) is refused at
          // write, and the entries after it keep their own rows.
          const unreadable = makeEntry({ request_id: 'unreadable', changes: { after: null, get before(): unknown { throw new Error('unreadable'); } } });
          expect(() => writer.write(unreadable)).toThrow('unreadable');
        }
      }
    } finally {
      await writer.close();
      await spool.remove();
    }
    const { rows } = await sql<{ path: string }>`select path from audit_entries where request_id like 'accepted-%' order by ts`.execute(db);
    expect(rows.map((r) => r.path)).toEqual(written.map((_, i) => (i === 77 ? '/p/\uFFFD' : `/p/${i}`)));
    const report = await verifyAudit(db, { from: new Date(base - 1), to: new Date(base + 1_000) });
    expect(report.problems).toEqual([]);
    expect(report.rows_checked).toBe(written.length);
  });

  it('in strict mode too, an entry that cannot be encoded is refused by write() itself, and the entries around it are stored', async () => {
    const spool = await tempSpoolDir();
    const writer = new AuditWriter({ db, copyIn, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir } }), logger: recordingLogger() });
    const base = Date.now() + 3_600_000 + 10_000;
    const written = Array.from({ length: 6 }, (_, i) => makeEntry({ request_id: `strict-accepted-${i}`, ts: new Date(base + i).toISOString(), path: `/s/${i}` }));
    try {
      await writer.start();
      for (const e of written) {
        await writer.write(e);
        if (e.request_id === 'strict-accepted-2') {
          const unreadable = makeEntry({ request_id: 'strict-unreadable', changes: { after: null, get before(): unknown { throw new Error('unreadable'); } } });
          expect(() => writer.write(unreadable)).toThrow('unreadable');
        }
      }
    } finally {
      await writer.close();
      await spool.remove();
    }
    const { rows } = await sql<{ path: string }>`select path from audit_entries where request_id like 'strict-accepted-%' order by ts`.execute(db);
    expect(rows.map((r) => r.path)).toEqual(written.map((_, i) => `/s/${i}`));
  });
});

// ---------------------------------------------------------------------------------------------
// Fallbacks and counts

describe('COPY fallbacks and counts', () => {
  it('returns the number of rows stored', async () => {
    const batch = Array.from({ length: 250 }, (_, i) => makeEntry({ request_id: `count-${i}` }));
    expect(await copyAuditEntries(db, copyIn, batch, 10_000)).toBe(250);
    expect(await countAuditLike(db, 'count-')).toEqual({ total: 250, distinct: 250 });
    expect(await copyAuditEntries(db, copyIn, [], 10_000)).toBe(0);
  });

  it('a batch holding entries stored already (and one entry twice) falls back to the insert and stores each entry once', async () => {
    const stored = Array.from({ length: 5 }, (_, i) => makeEntry({ request_id: `dup-old-${i}` }));
    await copyAuditEntries(db, copyIn, stored, 10_000);
    const fresh = Array.from({ length: 3 }, (_, i) => makeEntry({ request_id: `dup-new-${i}` }));
    const replayed = [...stored, fresh[0]!, fresh[1]!, fresh[0]!, fresh[2]!];
    // The COPY itself refuses the batch: that is what the fallback answers.
    await expect(copyIn([{ statement: AUDIT_COPY_BINARY_STATEMENT, data: auditBinaryBatch(replayed)!.bytes }], 10_000)).rejects.toMatchObject({ code: '23505' });
    expect(await copyAuditEntries(db, copyIn, replayed, 10_000)).toBe(3);
    expect(await countAuditLike(db, 'dup-')).toEqual({ total: 8, distinct: 8 });
    expect(await copyAuditEntries(db, copyIn, replayed, 10_000)).toBe(0);
  });

  it('a batch spanning a day without a partition creates it and stores the whole batch', async () => {
    const missing = new Date(Date.UTC(new Date().getUTCFullYear() + 7, 4, 1));
    const name = `audit_entries_p${missing.getUTCFullYear()}0502`;
    expect((await listPartitions(db)).map((p) => p.name)).not.toContain(name);
    const batch = [
      makeEntry({ request_id: 'span-now-0' }),
      makeEntry({ request_id: 'span-later-0', ts: new Date(missing.getTime() + 86_400_000).toISOString() }),
      makeEntry({ request_id: 'span-now-1' }),
    ];
    await expect(copyIn([{ statement: AUDIT_COPY_BINARY_STATEMENT, data: auditBinaryBatch(batch)!.bytes }], 10_000)).rejects.toMatchObject({ code: '23514' });
    expect(await countAuditLike(db, 'span-')).toEqual({ total: 0, distinct: 0 });
    expect(await copyAuditEntries(db, copyIn, batch, 10_000)).toBe(3);
    expect((await listPartitions(db)).map((p) => p.name)).toContain(name);
    expect(await countAuditLike(db, 'span-')).toEqual({ total: 3, distinct: 3 });
  });

  it('a writer rewriting a batch it stored before (a retry after a late commit) stays up and stores each entry once', async () => {
    const spool = await tempSpoolDir();
    const writer = new AuditWriter({ db, copyIn, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir } }), logger: recordingLogger() });
    try {
      await writer.start();
      const batch = Array.from({ length: 20 }, (_, i) => makeEntry({ request_id: `retry-${i}` }));
      await Promise.all(batch.map((e) => writer.write(e)));
      await Promise.all(batch.map((e) => writer.write(e)));
      expect(writer.stats()).toMatchObject({ postgres_available: true, spooled_entries: 0, written: 40 });
    } finally {
      await writer.close();
      await spool.remove();
    }
    expect(await countAuditLike(db, 'retry-')).toEqual({ total: 20, distinct: 20 });
  });
});

describe('a batch encoded in slices', () => {
  it('lets the event loop turn while a batch is encoded and digested, and the batch, NULs replaced, stores whole and verifies', async () => {
    const base = Date.now();
    const batch = Array.from({ length: ENCODE_SLICE * 4 + 3 }, (_, i) =>
      makeEntry({ request_id: `sliced-${i}`, ts: new Date(base + i).toISOString(), path: i === ENCODE_SLICE + 1 ? '/p/\u0000' : `/p/${i}` }),
    );
    // Work queued before the store starts runs before the COPY is sent: the encoding did not hold the loop throughout.
    const turns: string[] = [];
    const timed: CopyIn = (parts, timeoutMs, after) => {
      turns.push('copy');
      return copyIn(parts, timeoutMs, after);
    };
    const storing = copySealed(db, timed, batch, 10_000, new SealChain());
    setImmediate(() => turns.push('turn'));
    const { stored, seal } = await storing;
    expect(turns).toEqual(['turn', 'copy']);
    expect(stored).toBe(batch.length);
    expect(seal?.row_count).toBe(batch.length);
    const { rows } = await sql<{ path: string }>`select path from audit_entries where request_id like 'sliced-%' order by ts`.execute(db);
    expect(rows.map((r) => r.path)).toEqual(batch.map((_, i) => (i === ENCODE_SLICE + 1 ? '/p/\uFFFD' : `/p/${i}`)));
    const report = await verifyAudit(db, { from: new Date(base - 1), to: new Date(base + 1_000) });
    expect(report.problems).toEqual([]);
    expect(report.rows_checked).toBe(batch.length);
  });
});

describe('characters PostgreSQL cannot store', () => {
  it('a NUL or a lone surrogate anywhere is stored as U+FFFD through either path and through the writer, never blocking the spool', async () => {
    const poisoned = (tag: string) =>
      makeEntry({
        request_id: `poison-${tag}`,
        sql_normalized: 'select $1 -- a\u0000b',
        path: '/p/\uD800',
        tables: ['t\uDC00'],
        reasons: ['r\u0000'],
        changes: { before: { ['k\u0000']: 'v\uDBFF' }, after: [1, 'x\u0000'] },
      });
    const expectStored = async (tag: string) => {
      const { rows } = await sql<{ sql_normalized: string; path: string; tables: string[]; reasons: string[]; changes: unknown }>`
        select sql_normalized, path, tables, reasons, changes from audit_entries where request_id = ${`poison-${tag}`}`.execute(db);
      expect(rows).toEqual([{ sql_normalized: 'select $1 -- a\uFFFDb', path: '/p/\uFFFD', tables: ['t\uFFFD'], reasons: ['r\uFFFD'], changes: { before: { ['k\uFFFD']: 'v\uFFFD' }, after: [1, 'x\uFFFD'] } }]);
    };
    expect(await insertAuditEntries(db, [poisoned('insert'), makeEntry({ request_id: 'poison-clean-1' })])).toBe(2);
    await expectStored('insert');
    expect(await copyAuditEntries(db, copyIn, [poisoned('copy'), makeEntry({ request_id: 'poison-clean-2' })], 10_000)).toBe(2);
    await expectStored('copy');

    const spool = await tempSpoolDir();
    const writer = new AuditWriter({ db, copyIn, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir } }), logger: recordingLogger() });
    try {
      await writer.start();
      await writer.write(poisoned('writer'));
      await writer.write(makeEntry({ request_id: 'poison-clean-3' }));
      expect(writer.stats()).toMatchObject({ postgres_available: true, spooled_entries: 0, written: 2 });
    } finally {
      await writer.close();
      await spool.remove();
    }
    await expectStored('writer');
    expect(await countAuditLike(db, 'poison-clean-')).toEqual({ total: 3, distinct: 3 });
  });

  it('numbers beyond the column types are refused when written, not when their batch is stored', () => {
    expect(() => assertValidEntry(makeEntry({ identity_id: 2 ** 31 }))).toThrow(/invalid identity_id/);
    expect(() => assertValidEntry(makeEntry({ status: 2 ** 31 }))).toThrow(/invalid status/);
    expect(() => assertValidEntry(makeEntry({ policy_ids: [1, -(2 ** 31) - 1] }))).toThrow(/invalid policy_ids/);
    expect(() => assertValidEntry(makeEntry({ identity_id: 2 ** 31 - 1, policy_ids: [-(2 ** 31)], bytes_in: 2 ** 40 }))).not.toThrow();
  });
});

// ---------------------------------------------------------------------------------------------
// A COPY cut or hung mid-stream

describe('COPY interrupted mid-stream', () => {
  let proxy: TcpProxy;
  let via: ReturnType<typeof kyselyVia>;
  beforeAll(async () => {
    proxy = await TcpProxy.start({ host: TEST_PG_HOST, port: TEST_PG_PORT });
    via = kyselyVia(proxy.port, migrated.database.name, { connectTimeoutMs: 1_000 });
  });
  afterAll(async () => {
    await via?.close();
    await proxy?.close();
  });

  /** Backends of the test database inside a COPY into audit_entries or one of its partitions, by schema (a batch's first part opens its transaction). */
  async function copyBackends(): Promise<number> {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
      where datname = ${migrated.database.name} and query ~ '^(begin; )?copy (public\\.)?audit_entries' and state = 'active'`.execute(db);
    return rows[0]!.n;
  }

  /** About 2.5 MB of COPY text, so the stall lands inside the CopyData stream. */
  const bigBatch = (prefix: string): AuditEntry[] =>
    Array.from({ length: 2_000 }, (_, i) => makeEntry({ request_id: `${prefix}${i}`, sql_normalized: `select ${'x, '.repeat(400)}1 -- ${i}` }));

  async function bufferedWriter(spoolDir: string, insertTimeoutMs: number): Promise<AuditWriter> {
    const writer = new AuditWriter({
      db: via.db,
      copyIn: via.copyIn,
      config: auditConfig({ durability_mode: 'buffered', batch_size: 5_000, flush_interval_ms: 60_000, spool: { dir: spoolDir } }),
      logger: recordingLogger(),
      insertTimeoutMs,
    });
    await writer.start();
    return writer;
  }

  /**
   * A batch of 2,000 entries buffered by a writer (insert timeout `insertTimeoutMs`) whose COPY stalls after 64 KiB;
   * `interrupt` flushes it and breaks the COPY its way. Then, whatever the way: the batch is spooled, the server's
   * COPY ends with nothing stored, and once PostgreSQL is reachable again the spool replays every entry once.
   */
  async function interruptedCopy(prefix: string, insertTimeoutMs: number, interrupt: (flush: () => Promise<void>) => Promise<void>): Promise<void> {
    const spool = await tempSpoolDir();
    const writer = await bufferedWriter(spool.dir, insertTimeoutMs);
    try {
      const batch = bigBatch(prefix);
      for (const e of batch) await writer.write(e);
      // Inside the first of the batch's eight parts (≈ 310 KB each), whose Query opens the transaction; the seal rides
      // with the last part's.
      proxy.stallAfter(256 * 1024);
      await interrupt(() => writer.flush());
      expect(writer.stats()).toMatchObject({ postgres_available: false, spooled_entries: batch.length });
      await waitFor(async () => (await copyBackends()) === 0, 10_000, 'the server to end the COPY');
      expect(await countAuditLike(db, prefix)).toEqual({ total: 0, distinct: 0 });

      proxy.restore();
      await waitFor(() => writer.stats().spooled_entries === 0 && writer.stats().postgres_available, 20_000, 'the spool to replay');
      expect(await countAuditLike(db, prefix)).toEqual({ total: batch.length, distinct: batch.length });
    } finally {
      proxy.restore();
      await writer.close();
      await spool.remove();
    }
  }

  it('a dropped connection mid-COPY stores nothing; the writer spools the batch and replays it once', async () => {
    await interruptedCopy('cut-', 10_000, async (flush) => {
      const flushed = flush();
      await waitFor(async () => (await copyBackends()) === 1, 10_000, 'the COPY to be under way on the server');
      proxy.cut();
      await flushed;
    });
  }, 60_000);

  it('a COPY that hangs is abandoned at the insert timeout: its connection is destroyed, nothing is stored, the batch is spooled', async () => {
    await interruptedCopy('hang-', 1_000, async (flush) => {
      const started = Date.now();
      await flush();
      expect(Date.now() - started).toBeLessThan(5_000);
      // Destroying the client closes the socket; the server sees the connection go and aborts the COPY.
    });
  }, 60_000);
});
