// Tamper evidence: batches stored by the writer (COPY on PostgreSQL, the insert on the embedded store) are sealed and chained; rows really updated, deleted and inserted in PostgreSQL, and seals changed or removed, are reported by verifyAudit and `gatehouse audit verify`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { AuditWriter } from '../../src/audit/writer.js';
import { copyAuditEntries, insertAuditEntries } from '../../src/audit/insert.js';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { auditTuple } from '../../src/audit/copy-binary.js';
import { DIGEST_BYTES, GENESIS_HASH, LOCATOR_BYTES, rowDigest, rowDigestHex, rowsHash, SealChain, sealHash } from '../../src/audit/seal.js';
import { auditCopyLine } from '../../src/audit/copy-text.js';
import { verifyAudit, type VerifyProblem } from '../../src/audit/verify.js';
import { hasSealTimeOrder, maintainPartitions, SEAL_TIME_ORDER_COLUMNS, SEAL_TIME_ORDER_INDEX } from '../../src/audit/partitions.js';
import { storableEntry, type AuditEntry } from '../../src/audit/entry.js';
import { openControlStore, type ControlStore } from '../../src/store/db.js';
import { migrateTo, migrateToLatest } from '../../src/store/migrate.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { baseEnv, ROOT, runCli } from '../support/cli.js';
import { auditConfig, makeEntry, recordingLogger, tempSpoolDir } from './support.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** Entries of every kind the seal must survive: admin changes with unsorted and numeric keys, arrays, odd text, a NUL. */
function entries(prefix: string, n: number, baseMs: number): AuditEntry[] {
  const out: AuditEntry[] = [];
  for (let i = 0; i < n; i++) {
    const ts = new Date(baseMs + i * 7).toISOString();
    const admin = i % 9 === 0;
    out.push(
      makeEntry({
        ts, request_id: `${prefix}${i}`, identity_id: (i % 4) + 1, decision: i % 5 === 0 ? 'deny' : 'allow',
        channel: admin ? 'admin' : 'http', path: i % 7 === 0 ? `/v1/a\tb\\c\n"${i}"` : '/v1/orders', tables: i % 3 === 0 ? ['public.t', 'x"y', ''] : [],
        reasons: ['NULL', '{a,b}'], policy_ids: [3, 7], duration_ms: i === 4 ? 1e-7 : 0.1 + i, bytes_out: 2 ** 40 + i,
        sql_normalized: i === 11 ? 'select \u0000 from t' : null,
        action: admin ? 'identity.update' : null, target: admin ? { type: 'identity', id: String(i) } : null,
        changes: admin ? { before: { z: 1, a: [1, { y: 'é', b: null }], 10: 'ten', 2: 'two' }, after: { big: 1e21, neg: -0.5, s: 'x\u2028y' } } : null,
      }),
    );
  }
  return out;
}

async function writeThrough(writer: AuditWriter, list: AuditEntry[]): Promise<void> {
  await writer.start();
  // Concurrent writes: several batches in flight, each on its own chain.
  await Promise.all(list.map((e) => writer.write(e)));
  await writer.flush();
  await writer.close();
}

const kinds = (problems: VerifyProblem[]): string[] => problems.map((p) => p.kind).sort();

/** A format-1 or format-2 seal's ids as uuid[]: format 2 stores them packed (migration 0021). */
const SEAL_IDS = sql.raw(`coalesce(ids, array(select encode(substr(id_bytes, i * 16 + 1, 16), 'hex')::uuid
  from generate_series(0, length(id_bytes) / 16 - 1) as i order by i))`);

/** Ids packed as format 2 stores them: 16 bytes each, in order. */
const packIds = (ids: string[]): Buffer => Buffer.from(ids.map((id) => id.replaceAll('-', '')).join(''), 'hex');

/** A format-3 seal's rows (migration 0023): those of its time range whose ids end as its locators say. */
const SEAL_ROW_IDS = sql.raw(`array(select e.id from audit_entries e where e.ts between s.min_ts and s.max_ts
  and right(e.id::text, 8) in (select encode(substr(s.locators, i * ${LOCATOR_BYTES} + 1, 4), 'hex') from generate_series(0, s.row_count - 1) as i))`);

describe('row digests', () => {
  // Seals already stored hold the first DIGEST_BYTES of each row's SHA-256: any other bytes would break them all.
  it('are the first DIGEST_BYTES of the SHA-256 of the row, as bytes and as hex, for bytes and text (property)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 2_000 }), fc.string({ unit: 'binary', maxLength: 300 })), (row) => {
        const expected = createHash('sha256').update(row).digest().subarray(0, DIGEST_BYTES);
        expect(rowDigest(row).equals(expected)).toBe(true);
        expect(rowDigestHex(row)).toBe(expected.toString('hex'));
      }),
      { numRuns: 300 },
    );
  });

  it("a seal holds each row's locator in entry order and the hash of the digests, and refuses a digest of the wrong length or not hex", () => {
    const list = entries('d-', 3, Date.now());
    const tuples = list.map((_, i) => Buffer.from(`row ${i}`));
    const seal = new SealChain().seal(list, tuples);
    expect(seal.format).toBe(3);
    // The last 4 bytes of each id, then the first 4 of its digest.
    const locators = Buffer.concat(list.map((e, i) => Buffer.concat([Buffer.from(e.id.slice(-8), 'hex'), rowDigest(tuples[i]!).subarray(0, 4)])));
    expect(seal.locators.equals(locators)).toBe(true);
    expect(seal.rows_hash.equals(createHash('sha256').update(Buffer.concat(tuples.map((t) => rowDigest(t)))).digest())).toBe(true);
    expect(sealHash(seal).equals(seal.hash)).toBe(true);
    const hex = tuples.map((t) => rowDigestHex(t));
    expect(() => new SealChain().sealDigests(list, hex.slice(0, 2))).toThrow(TypeError);
    expect(() => new SealChain().sealDigests(list, [hex[0]!, hex[1]!.slice(1), hex[2]!])).toThrow(TypeError);
    expect(() => new SealChain().sealDigests(list, [hex[0]!, `${hex[1]!.slice(0, -1)}g`, hex[2]!])).toThrow(TypeError);
  });
});

describe('seals on PostgreSQL (COPY path)', () => {
  let migrated: MigratedStore;
  let db: AnyDb;
  // After migration 0017 was applied (below): rows stamped before it could be legacy unsealed rows.
  const base = Date.now() + 60_000;
  const range = { from: new Date(base - 1_000), to: new Date(base + 60_000) };
  let stored: AuditEntry[];

  beforeAll(async () => {
    migrated = await withMigratedStore();
    db = migrated.store.db;
    await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
    const spool = await tempSpoolDir();
    stored = entries('seal-pg-', 120, base);
    const writer = new AuditWriter({
      db, copyIn: migrated.store.copyIn, logger: recordingLogger(),
      config: auditConfig({ durability_mode: 'strict', batch_size: 16, spool: { dir: spool.dir } }),
    });
    await writeThrough(writer, stored);
    await spool.remove();
  });
  afterAll(async () => {
    await migrated?.cleanup();
  });

  it('an untouched log verifies: every row sealed once, every link in place', async () => {
    const report = await verifyAudit(db, range);
    expect(report.problems).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.rows_checked).toBe(120);
    expect(report.seals_checked).toBeGreaterThanOrEqual(120 / 16);
    const { rows } = await sql<{ n: number }>`select sum(row_count)::int as n from audit_seals`.execute(db);
    expect(rows[0]!.n).toBe(120);
  });

  it('a row UPDATEd in place is reported as edited, with its batch and position', async () => {
    const victim = stored[17]!;
    await sql`update audit_entries set status = 201 where id = ${victim.id}::uuid`.execute(db);
    const report = await verifyAudit(db, range);
    expect(report.ok).toBe(false);
    expect(report.problems).toEqual([expect.objectContaining({ kind: 'edited_row', id: victim.id, ts: victim.ts })]);
    const p = report.problems[0] as Extract<VerifyProblem, { kind: 'edited_row' }>;
    const seal = (await sql<{ locators: Buffer }>`select locators from audit_seals where writer_id = ${p.writer_id}::uuid and seq = ${p.seq}`.execute(db)).rows[0]!;
    expect(seal.locators.subarray(p.position * LOCATOR_BYTES, p.position * LOCATOR_BYTES + 4).toString('hex')).toBe(victim.id.slice(-8));
    // Changing a jsonb value only in key order is no edit; changing it is.
    await sql`update audit_entries set status = 200 where id = ${victim.id}::uuid`.execute(db);
    const admin = stored[9]!;
    await sql`update audit_entries set changes = changes where id = ${admin.id}::uuid`.execute(db);
    expect((await verifyAudit(db, range)).problems).toEqual([]);
    await sql`update audit_entries set changes = jsonb_set(changes, '{after,neg}', '0.5') where id = ${admin.id}::uuid`.execute(db);
    expect((await verifyAudit(db, range)).problems).toEqual([expect.objectContaining({ kind: 'edited_row', id: admin.id })]);
    await sql`update audit_entries set changes = jsonb_set(changes, '{after,neg}', '-0.5') where id = ${admin.id}::uuid`.execute(db);
    expect((await verifyAudit(db, range)).ok).toBe(true);
  });

  it('a row DELETEd is reported as deleted, by the end of its id and its position; a row INSERTed is reported as inserted', async () => {
    const victim = stored[42]!;
    await sql`delete from audit_entries where id = ${victim.id}::uuid`.execute(db);
    const forged = makeEntry({ ts: new Date(base + 500).toISOString(), request_id: 'forged', decision: 'allow' });
    await insertAuditEntries(db, [forged]);
    const report = await verifyAudit(db, range);
    expect(kinds(report.problems)).toEqual(['deleted_row', 'inserted_row']);
    expect(report.problems).toEqual(expect.arrayContaining([
      expect.objectContaining({ kind: 'deleted_row', id: null, id_suffix: victim.id.slice(-8) }),
      expect.objectContaining({ kind: 'inserted_row', id: forged.id, ts: forged.ts }),
    ]));
    // A copy of a sealed row under a new id is an insertion too.
    await sql`delete from audit_entries where id = ${forged.id}::uuid`.execute(db);
    await insertAuditEntries(db, [victim]);
    expect((await verifyAudit(db, range)).ok).toBe(true);
    const copy = { ...stored[43]!, id: makeEntry({ ts: stored[43]!.ts }).id };
    await insertAuditEntries(db, [copy]);
    expect((await verifyAudit(db, range)).problems).toEqual([expect.objectContaining({ kind: 'inserted_row', id: copy.id })]);
    await sql`delete from audit_entries where id = ${copy.id}::uuid`.execute(db);
  });

  it('a format-3 seal whose rows do not give its rows_hash is reported, though every locator matches', async () => {
    // What a row changed until its digest's first 4 bytes match again would show; here the seal's rows_hash is replaced
    // instead and its hash recomputed, on a chain's newest seal, so no link breaks.
    const { rows } = await sql<Record<string, unknown>>`select * from audit_seals s where format = 3
      and not exists (select 1 from audit_seals n where n.writer_id = s.writer_id and n.prev_seq = s.seq) order by seq limit 1`.execute(db);
    const r = rows[0]!;
    const body = {
      format: 3 as const, writer_id: String(r.writer_id), seq: Number(r.seq), prev_seq: Number(r.prev_seq), prev_hash: r.prev_hash as Buffer,
      row_count: Number(r.row_count), locators: r.locators as Buffer, rows_hash: rowsHash(Buffer.from('not the rows')),
    };
    await sql`update audit_seals set rows_hash = ${body.rows_hash}, hash = ${sealHash(body)} where writer_id = ${body.writer_id}::uuid and seq = ${body.seq}`.execute(db);
    expect((await verifyAudit(db, range)).problems).toEqual([{ kind: 'rows_altered', writer_id: body.writer_id, seq: body.seq }]);
    await sql`update audit_seals set rows_hash = ${r.rows_hash as Buffer}, hash = ${r.hash as Buffer} where writer_id = ${body.writer_id}::uuid and seq = ${body.seq}`.execute(db);
    expect((await verifyAudit(db, range)).ok).toBe(true);
  });

  it("a format-3 seal's time bounds narrowed past its rows leave them unmatched, which is reported", async () => {
    // The bounds are not in the seal's hash (as in formats 1 and 2), but a locator only names rows within them.
    const { rows } = await sql<{ writer_id: string; seq: number; min_ts: Date; max_ts: Date }>`select writer_id, seq::int as seq, min_ts, max_ts
      from audit_seals where format = 3 and row_count > 1 and max_ts > min_ts order by seq limit 1`.execute(db);
    const s = rows[0]!;
    await sql`update audit_seals set max_ts = min_ts where writer_id = ${s.writer_id}::uuid and seq = ${s.seq}`.execute(db);
    const report = await verifyAudit(db, range);
    expect(report.ok).toBe(false);
    expect(report.problems).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'deleted_row', writer_id: s.writer_id, seq: s.seq })]));
    await sql`update audit_seals set max_ts = ${s.max_ts} where writer_id = ${s.writer_id}::uuid and seq = ${s.seq}`.execute(db);
    expect((await verifyAudit(db, range)).ok).toBe(true);
  });

  it('a whole batch removed with its seal breaks the chain at the next seal; a changed seal is reported', async () => {
    const { rows } = await sql<{ writer_id: string; seq: number; row_count: number; ids: string[] }>`
      select s.writer_id, s.seq::int as seq, s.row_count, ${SEAL_ROW_IDS}::text[] as ids from audit_seals s
       where exists (select 1 from audit_seals n where n.writer_id = s.writer_id and n.prev_seq = s.seq) order by s.seq limit 1`.execute(db);
    const batch = rows[0]!;
    expect(batch.ids).toHaveLength(batch.row_count);
    await sql`update audit_seals set row_count = row_count + 1 where writer_id = ${batch.writer_id}::uuid and seq = ${batch.seq}`.execute(db);
    expect((await verifyAudit(db, range)).problems).toEqual([expect.objectContaining({ kind: 'seal_altered', writer_id: batch.writer_id, seq: batch.seq })]);
    await sql`delete from audit_entries where id = any(${batch.ids}::uuid[])`.execute(db);
    await sql`delete from audit_seals where writer_id = ${batch.writer_id}::uuid and seq = ${batch.seq}`.execute(db);
    const report = await verifyAudit(db, range);
    expect(report.problems).toEqual([expect.objectContaining({ kind: 'chain_broken', writer_id: batch.writer_id, prev_seq: batch.seq })]);
  });

  it('gatehouse audit verify prints the report and exits 3 on a break, 0 when intact', async () => {
    const env = baseEnv({ SERVICE_DATABASE__URL: migrated.database.url, SERVICE_OBSERVABILITY__LOG_LEVEL: 'error' });
    const broken = await runCli(['audit', 'verify', '--from', range.from.toISOString(), '--to', range.to.toISOString()], { env, cwd: ROOT, timeoutMs: 60_000 });
    expect(broken.code).toBe(3);
    expect(JSON.parse(broken.stdout).problems[0].kind).toBe('chain_broken');
    expect(broken.stderr).toContain('NOT intact');
    const later = new Date(base + 120_000);
    await insertAuditEntries(db, entries('seal-cli-', 3, later.getTime()), new SealChain());
    const intact = await runCli(['audit', 'verify', '--from', later.toISOString(), '--to', new Date(later.getTime() + 1_000).toISOString()], { env, cwd: ROOT, timeoutMs: 60_000 });
    expect(intact.code).toBe(0);
    expect(JSON.parse(intact.stdout)).toMatchObject({ ok: true, rows_checked: 3, seals_checked: 1 });
    expect(intact.stderr).not.toContain('is missing');
    // Without the seals' time order verify still answers, and says why it may be slow.
    await sql`drop index ${sql.id(SEAL_TIME_ORDER_INDEX)}`.execute(db);
    try {
      const slow = await runCli(['audit', 'verify', '--from', later.toISOString(), '--to', new Date(later.getTime() + 1_000).toISOString()], { env, cwd: ROOT, timeoutMs: 60_000 });
      expect(slow.code).toBe(0);
      expect(slow.stderr).toContain(`index ${SEAL_TIME_ORDER_INDEX} is missing`);
    } finally {
      await sql`create index ${sql.id(SEAL_TIME_ORDER_INDEX)} on audit_seals (${sql.raw(SEAL_TIME_ORDER_COLUMNS)})`.execute(db);
    }
    // An index left invalid (a concurrent build cut short) counts as missing, and the check leaves it for maintenance.
    expect(await hasSealTimeOrder(db)).toBe(true);
    await sql`update pg_index set indisvalid = false where indexrelid = to_regclass(${SEAL_TIME_ORDER_INDEX})`.execute(db);
    try {
      expect(await hasSealTimeOrder(db)).toBe(false);
      const { rows } = await sql<{ r: string | null }>`select to_regclass(${SEAL_TIME_ORDER_INDEX})::text as r`.execute(db);
      expect(rows[0]!.r).toBe(SEAL_TIME_ORDER_INDEX);
    } finally {
      await sql`update pg_index set indisvalid = true where indexrelid = to_regclass(${SEAL_TIME_ORDER_INDEX})`.execute(db);
    }
    const usage = await runCli(['audit', 'verify', '--from', 'yesterday'], { env, cwd: ROOT, timeoutMs: 60_000 });
    expect(usage.code).toBe(64);
  });
});

describe('format-3 seals against generated tampering', () => {
  let migrated: MigratedStore;
  beforeAll(async () => {
    migrated = await withMigratedStore();
    await maintainPartitions(migrated.store.db, { monthsAhead: 1, retentionDays: 36_500 });
  });
  afterAll(async () => {
    await migrated?.cleanup();
  });

  // Rows edited, deleted, and forged — some forged with the end of a sealed row's id, which is what a locator holds —
  // are each reported, and a log left alone verifies (property).
  it('every edited, deleted or forged row of a COPY-stored batch is reported, and nothing else', async () => {
    const db = migrated.store.db;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.integer({ min: 0, max: 29 }), { maxLength: 6 }),
        fc.uniqueArray(fc.integer({ min: 0, max: 29 }), { maxLength: 4 }),
        fc.nat({ max: 10_000 }),
        async (touched, forgedTails, splitAt) => {
          const base = Date.now() + 120_000 + run++ * 1_000;
          const list = entries(`seal-gen-${run}-`, 30, base);
          await copyAuditEntries(db, migrated.store.copyIn!, list, 30_000, new SealChain());
          const edits = touched.slice(0, splitAt % (touched.length + 1));
          const deletes = touched.slice(edits.length);
          for (const i of edits) await sql`update audit_entries set bytes_in = bytes_in + 1 where id = ${list[i]!.id}::uuid`.execute(db);
          for (const i of deletes) await sql`delete from audit_entries where id = ${list[i]!.id}::uuid`.execute(db);
          const forged = forgedTails.map((i) => {
            const e = makeEntry({ ts: list[i]!.ts, request_id: `forged-${i}` });
            return { ...e, id: e.id.slice(0, -8) + list[i]!.id.slice(-8) };
          });
          if (forged.length > 0) await insertAuditEntries(db, forged);
          const report = await verifyAudit(db, { from: new Date(base - 1), to: new Date(base + 900) });
          expect(report.ok).toBe(edits.length + deletes.length + forged.length === 0);
          const named = new Set(report.problems.flatMap((p) => ('id' in p && p.id ? [p.id] : 'id_suffix' in p && p.id_suffix ? [`suffix:${p.id_suffix}`] : [])));
          for (const i of edits) expect(named.has(list[i]!.id)).toBe(true);
          // A deleted row is named by the end of its id, or — when a forged row took that end — the forged row is.
          for (const i of deletes) expect(named.has(`suffix:${list[i]!.id.slice(-8)}`) || forged.some((f) => named.has(f.id) && f.id.endsWith(list[i]!.id.slice(-8)))).toBe(true);
          for (const f of forged) expect(named.has(f.id)).toBe(true);
          expect(report.problems.every((p) => ['edited_row', 'deleted_row', 'inserted_row'].includes(p.kind))).toBe(true);
        },
      ),
      { numRuns: 25 },
    );
  });
});

describe('seals of formats 1 and 2, stored before migrations 0021 and 0023', () => {
  let migrated: MigratedStore;
  beforeAll(async () => {
    migrated = await withMigratedStore();
  });
  afterAll(async () => {
    await migrated?.cleanup();
  });

  /** A batch stored and sealed as the writer did before 0021: digests of the COPY text lines, ids as uuid[]. */
  async function storeFormat1(db: AnyDb, list: AuditEntry[], writerId: string): Promise<void> {
    await insertAuditEntries(db, list);
    // The writer sealed entries as stored: with NUL and lone surrogates replaced.
    const digests = Buffer.concat(list.map((e) => rowDigest(auditCopyLine(storableEntry(e)))));
    const body = { format: 1 as const, writer_id: writerId, seq: 1, prev_seq: 0, prev_hash: GENESIS_HASH, row_count: list.length, ids: list.map((e) => e.id), digests };
    await sql`insert into audit_seals (writer_id, seq, prev_seq, prev_hash, hash, row_count, min_ts, max_ts, ids, digests)
      values (${writerId}::uuid, 1, 0, ${GENESIS_HASH}, ${sealHash(body)}, ${list.length}, ${list[0]!.ts}::timestamptz,
              ${list[list.length - 1]!.ts}::timestamptz, ${body.ids}::uuid[], ${digests})`.execute(db);
  }

  /** A batch stored and sealed as the writer did from 0021 to 0023: digests of the binary tuples, ids packed. */
  async function storeFormat2(db: AnyDb, list: AuditEntry[], writerId: string): Promise<void> {
    await insertAuditEntries(db, list);
    const digests = Buffer.concat(list.map((e) => rowDigest(auditTuple(storableEntry(e)))));
    const body = { format: 2 as const, writer_id: writerId, seq: 1, prev_seq: 0, prev_hash: GENESIS_HASH, row_count: list.length, ids: list.map((e) => e.id), digests };
    await sql`insert into audit_seals (format, writer_id, seq, prev_seq, prev_hash, hash, row_count, min_ts, max_ts, id_bytes, digests)
      values (2, ${writerId}::uuid, 1, 0, ${GENESIS_HASH}, ${sealHash(body)}, ${list.length}, ${list[0]!.ts}::timestamptz,
              ${list[list.length - 1]!.ts}::timestamptz, ${packIds(body.ids)}, ${digests})`.execute(db);
  }

  it('still verify after the migrations, beside format-3 seals; an edit under any is found; down keeps them all', async () => {
    const db = migrated.store.db;
    await migrateTo(db, '0020_document_search_keys');
    const base = Date.now() - 20_000;
    const one = entries('seal-f1-', 12, base);
    const two = entries('seal-f2-', 12, base + 500);
    const writer1 = makeEntry().id;
    const writer2 = makeEntry().id;
    await storeFormat1(db, one, writer1);
    await migrateTo(db, '0022_audit_time_key');
    await storeFormat2(db, two, writer2);
    await migrateToLatest(db);
    const three = entries('seal-f3-', 12, base + 1_000);
    await insertAuditEntries(db, three, new SealChain());
    const range = { from: new Date(base - 1), to: new Date(base + 2_000) };
    const intact = await verifyAudit(db, range);
    expect(intact.problems).toEqual([]);
    expect(intact).toMatchObject({ ok: true, rows_checked: 36, seals_checked: 3 });
    const formats = (await sql<{ format: number; packed: boolean; located: boolean }>`
      select format, id_bytes is not null as packed, locators is not null as located from audit_seals order by format`.execute(db)).rows;
    expect(formats).toEqual([{ format: 1, packed: false, located: false }, { format: 2, packed: true, located: false }, { format: 3, packed: false, located: true }]);
    expect((await sql<{ n: number }>`select length(locators)::int as n from audit_seals where format = 3`.execute(db)).rows[0]!.n).toBe(12 * LOCATOR_BYTES);

    const victims = [one[3]!.id, two[4]!.id, three[5]!.id];
    await sql`update audit_entries set status = 299 where id = any(${victims}::uuid[])`.execute(db);
    const edited = await verifyAudit(db, range);
    expect(kinds(edited.problems)).toEqual(['edited_row', 'edited_row', 'edited_row']);
    expect(edited.problems.map((p) => (p as { id: string }).id).sort()).toEqual([...victims].sort());
    await sql`update audit_entries set status = 200 where id = any(${victims}::uuid[])`.execute(db);
    // A seal's format is covered by its hash (each format has its own domain), and the table refuses a format without its columns.
    await expect(sql`update audit_seals set format = 1 where format = 2`.execute(db)).rejects.toMatchObject({ code: '23514' });
    await expect(sql`update audit_seals set format = 2 where format = 3`.execute(db)).rejects.toMatchObject({ code: '23514' });
    await expect(sql`update audit_seals set locators = null where format = 3`.execute(db)).rejects.toMatchObject({ code: '23514' });
    // Relabelled whole — format 1 with its ids unpacked, as the constraint wants — the seal no longer gives its hash.
    await sql`update audit_seals set format = 1, ids = ${SEAL_IDS}, id_bytes = null where format = 2`.execute(db);
    const relabelled = await verifyAudit(db, range);
    expect(relabelled.problems).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'seal_altered', writer_id: writer2 })]));
    expect(relabelled.problems.every((p) => 'writer_id' in p && p.writer_id === writer2)).toBe(true);
    await sql`update audit_seals set format = 2, id_bytes = ${packIds(two.map((e) => e.id))}, ids = null
      where writer_id = ${writer2}::uuid`.execute(db);
    expect((await verifyAudit(db, range)).ok).toBe(true);

    // Down to before 0021: format 2's ids are unpacked; a format-3 seal names no ids and is kept as an altered one.
    await migrateTo(db, '0020_document_search_keys');
    const unpacked = (await sql<{ ids: string[] }>`select ids from audit_seals where writer_id = ${writer2}::uuid`.execute(db)).rows[0]!;
    expect(unpacked.ids).toEqual(two.map((e) => e.id));
    expect((await sql<{ n: number }>`select count(*)::int as n from audit_seals`.execute(db)).rows[0]!.n).toBe(3);
    await migrateToLatest(db);
    // Format 1 seals verify as before; the others went through the version before's down, which keeps no format of theirs.
    expect((await verifyAudit(db, { from: new Date(base - 1), to: new Date(base + 100) })).ok).toBe(true);
  });
  it("a format-1 or format-2 row moved past its seal's time range is reported as edited, read a few rows at a time", async () => {
    const db = migrated.store.db;
    const base = Date.now() - 40_000;
    const one = entries('seal-move-f1-', 12, base);
    const two = entries('seal-move-f2-', 12, base + 200);
    await storeFormat1(db, one, makeEntry().id);
    await storeFormat2(db, two, makeEntry().id);
    const range = { from: new Date(base - 1), to: new Date(base + 3_000) };
    expect((await verifyAudit(db, range, { rowPage: 3, sealPage: 1 })).ok).toBe(true);
    // One row later than every other of the range, one earlier than its own batch's first.
    await sql`update audit_entries set ts = ts + interval '2 seconds' where id = ${one[2]!.id}::uuid`.execute(db);
    await sql`update audit_entries set ts = ts - interval '150 milliseconds' where id = ${two[5]!.id}::uuid`.execute(db);
    for (const options of [{}, { rowPage: 3, sealPage: 1 }]) {
      const report = await verifyAudit(db, range, options);
      expect(kinds(report.problems)).toEqual(['edited_row', 'edited_row']);
      expect(report.problems.map((p) => (p as { id: string }).id).sort()).toEqual([one[2]!.id, two[5]!.id].sort());
    }
  });
});

describe('seals on spool replays and retries', () => {
  let migrated: MigratedStore;
  beforeAll(async () => {
    migrated = await withMigratedStore();
  });
  afterAll(async () => {
    await migrated?.cleanup();
  });

  it('a batch stored again (a retry after a late commit) is claimed by both seals and still verifies; a chain skips a failed attempt', async () => {
    const db = migrated.store.db;
    const base = Date.now() - 10_000;
    const list = entries('seal-retry-', 30, base);
    const chain = new SealChain();
    await insertAuditEntries(db, list.slice(0, 20), chain);
    // The chain's state only advances through the writer's stored(); this chain has not seen its first seal stored,
    // as after a timed-out attempt: the next seal links to the genesis again, and the verifier accepts the fork.
    expect(await insertAuditEntries(db, list.slice(10), chain)).toBe(10);
    const report = await verifyAudit(db, { from: new Date(base - 1), to: new Date(base + 1_000) });
    expect(report.problems).toEqual([]);
    expect(report.rows_checked).toBe(30);
  });
});

describe('seals on the embedded store (PGlite)', () => {
  let dir: string;
  let store: ControlStore;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'gh-seal-pglite-'));
    store = await openControlStore({ url: null, embeddedDir: dir, poolMax: 1, connectTimeoutMs: 5_000 });
    await migrateToLatest(store.db);
  });
  afterAll(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('the insert path seals too, and an edited row is found', async () => {
    const spool = await tempSpoolDir();
    const base = Date.now() - 5_000;
    const list = entries('seal-pglite-', 40, base);
    const writer = new AuditWriter({ db: store.db, logger: recordingLogger(), config: auditConfig({ durability_mode: 'strict', batch_size: 8, spool: { dir: spool.dir } }) });
    await writeThrough(writer, list);
    await spool.remove();
    const range = { from: new Date(base - 1), to: new Date(base + 1_000) };
    expect((await verifyAudit(store.db, range)).problems).toEqual([]);
    await sql`update audit_entries set identity_id = 99 where id = ${list[5]!.id}::uuid`.execute(store.db);
    expect((await verifyAudit(store.db, range)).problems).toEqual([expect.objectContaining({ kind: 'edited_row', id: list[5]!.id })]);
  });
});

describe('verification in time order, holding only the rows of open seals', () => {
  let migrated: MigratedStore;
  beforeAll(async () => {
    migrated = await withMigratedStore();
    await maintainPartitions(migrated.store.db, { monthsAhead: 1, retentionDays: 36_500 });
  });
  afterAll(async () => {
    await migrated?.cleanup();
  });

  /** The report without the figures that depend on how it was read. */
  const comparable = (r: Awaited<ReturnType<typeof verifyAudit>>) => ({
    ...r, max_rows_held: undefined, problems: r.problems.map((p) => JSON.stringify(p)).sort(),
  });

  // Batches whose time ranges overlap (as concurrent writers' do), rows edited, deleted, forged and moved by less than
  // a millisecond: read a page of 1–6 rows and 1–3 seals at a time, the report is the one read in one page (property).
  it('reports what one whole read reports, whatever the page sizes', async () => {
    const db = migrated.store.db;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 150 }), { minLength: 2, maxLength: 5 }),
        fc.uniqueArray(fc.integer({ min: 0, max: 59 }), { maxLength: 6 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 3 }),
        async (offsets, touched, rowPage, sealPage) => {
          const base = Date.now() + 300_000 + run++ * 2_000;
          const all: AuditEntry[] = [];
          for (const [b, offset] of offsets.entries()) {
            const list = entries(`stream-${run}-${b}-`, 12, base + offset);
            await copyAuditEntries(db, migrated.store.copyIn!, list, 30_000, new SealChain());
            all.push(...list);
          }
          for (const [n, i] of touched.filter((i) => i < all.length).entries()) {
            const id = all[i]!.id;
            if (n % 4 === 0) await sql`update audit_entries set status = status + 1 where id = ${id}::uuid`.execute(db);
            else if (n % 4 === 1) await sql`delete from audit_entries where id = ${id}::uuid`.execute(db);
            else if (n % 4 === 2) await sql`update audit_entries set ts = ts + interval '1 microsecond' where id = ${id}::uuid`.execute(db);
            else await insertAuditEntries(db, [makeEntry({ ts: all[i]!.ts, request_id: 'forged' })]);
          }
          const range = { from: new Date(base - 1), to: new Date(base + 1_000) };
          const whole = await verifyAudit(db, range);
          const paged = await verifyAudit(db, range, { rowPage, sealPage });
          expect(comparable(paged)).toEqual(comparable(whole));
          expect(whole.ok).toBe(touched.every((i) => i >= all.length));
          expect(paged.max_rows_held).toBeLessThanOrEqual(whole.max_rows_held);
        },
      ),
      { numRuns: 20 },
    );
  });

  it('holds the rows of the seals open at once, not the range', async () => {
    const db = migrated.store.db;
    const base = Date.now() + 200_000;
    for (let b = 0; b < 40; b++) await copyAuditEntries(db, migrated.store.copyIn!, entries(`held-${b}-`, 25, base + b * 200), 30_000, new SealChain());
    const range = { from: new Date(base - 1), to: new Date(base + 40 * 200) };
    const whole = await verifyAudit(db, range);
    expect(whole).toMatchObject({ ok: true, rows_checked: 1_000, seals_checked: 40, max_rows_held: 1_000 });
    const paged = await verifyAudit(db, range, { rowPage: 10, sealPage: 4 });
    expect(paged).toMatchObject({ ok: true, rows_checked: 1_000, seals_checked: 40 });
    // A batch's 25 rows, and a page read past it.
    expect(paged.max_rows_held).toBeLessThanOrEqual(25 + 10);
    // A row moved by a microsecond is no longer what was sealed, though its millisecond is.
    const victim = (await sql<{ id: string }>`select id from audit_entries where request_id = 'held-7-3'`.execute(db)).rows[0]!;
    await sql`update audit_entries set ts = ts + interval '1 microsecond' where id = ${victim.id}::uuid`.execute(db);
    expect((await verifyAudit(db, range, { rowPage: 10 })).problems).toEqual([expect.objectContaining({ kind: 'edited_row', id: victim.id })]);
  });

  it('reads one snapshot: batches committed while it reads are seen whole or not at all', async () => {
    const db = migrated.store.db;
    const base = Date.now() + 280_000;
    const range = { from: new Date(base - 1), to: new Date(base + 10_000) };
    let writing = true;
    let stored = 0;
    const writes = (async () => {
      for (let b = 0; writing; b++) {
        await copyAuditEntries(db, migrated.store.copyIn!, entries(`snap-${b}-`, 20, base + b * 50), 30_000, new SealChain());
        stored += 1;
      }
    })();
    try {
      // Until several batches have committed during the reads.
      for (let i = 0; i < 6 || stored < 8; i++) {
        const report = await verifyAudit(db, range, { rowPage: 5, sealPage: 1 });
        expect(report.problems).toEqual([]);
      }
    } finally {
      writing = false;
      await writes;
    }
    expect(stored).toBeGreaterThan(6);
  });

  it('reads the seals without their time order too, and partition maintenance builds it when missing', async () => {
    const db = migrated.store.db;
    const base = Date.now() + 250_000;
    for (let b = 0; b < 3; b++) await copyAuditEntries(db, migrated.store.copyIn!, entries(`order-${b}-`, 10, base + b * 100), 30_000, new SealChain());
    const range = { from: new Date(base - 1), to: new Date(base + 1_000) };
    await sql`drop index audit_seals_min_ts_idx`.execute(db);
    expect(await verifyAudit(db, range, { rowPage: 4, sealPage: 1 })).toMatchObject({ ok: true, rows_checked: 30, seals_checked: 3 });
    expect(await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).toMatchObject({ sealOrder: true });
    const { rows } = await sql<{ valid: boolean }>`select i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid
      where c.relname = 'audit_seals_min_ts_idx'`.execute(db);
    expect(rows).toEqual([{ valid: true }]);
    expect(await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).toMatchObject({ sealOrder: false });
  });
});
