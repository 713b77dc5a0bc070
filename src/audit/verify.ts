// Checks the seal chains over a time range (`gatehouse audit verify`): every stored row against its batch's digest, every seal against its hash and its link to the chain's previous seal (docs/audit.md "Tamper evidence").
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { auditTuple } from './copy-binary.js';
import { auditCopyLine } from './copy-text.js';
import { AUDIT_FIELDS, type AuditEntry } from './entry.js';
import { DIGEST_BYTES, GENESIS_HASH, rowDigest, sealHash, unpackIds, type BatchSeal, type SealFormat } from './seal.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

export type VerifyProblem =
  /** A row whose text is not what its batch sealed. */
  | { kind: 'edited_row'; id: string; ts: string; writer_id: string; seq: number; position: number }
  /** A row its batch sealed that is not stored. */
  | { kind: 'deleted_row'; id: string; writer_id: string; seq: number; position: number }
  /** A stored row no seal covers. */
  | { kind: 'inserted_row'; id: string; ts: string }
  /** A seal whose contents do not give its hash (the seal itself was changed). */
  | { kind: 'seal_altered'; writer_id: string; seq: number }
  /** A seal whose link names a previous seal that is missing or has another hash: a batch removed or changed before it. */
  | { kind: 'chain_broken'; writer_id: string; seq: number; prev_seq: number; detail: string };

export interface VerifyReport {
  from: string;
  to: string;
  ok: boolean;
  rows_checked: number;
  seals_checked: number;
  chains: number;
  /** Unsealed rows in the range stamped before sealing began (migration 0017 applied): not covered, not a break. */
  unsealed_before_sealing: number;
  /** Each chain's newest seal in the range: compare with the heads logged or exported elsewhere to see a cut tail. */
  heads: { writer_id: string; seq: number; hash: string }[];
  problems: VerifyProblem[];
}

/** A stored seal as read back: BatchSeal with its time bounds as PostgreSQL returns them. */
type SealRow = Omit<BatchSeal, 'min_ts' | 'max_ts'> & { min_ts: Date; max_ts: Date };

type Row = Omit<AuditEntry, 'ts'> & { ts: Date };

const PAGE = 5_000;
/** Problems listed in a report at most (the count of each kind is exact up to here). */
const MAX_PROBLEMS = 1_000;

/** uuid[] arrives parsed from PostgreSQL and as its text from the embedded store. */
function idList(v: unknown): string[] {
  if (Array.isArray(v)) return v as string[];
  const s = String(v);
  return s === '{}' ? [] : s.slice(1, -1).split(',');
}

function asSeal(r: Record<string, unknown>): SealRow {
  const format = Number(r.format ?? 1) as SealFormat;
  return {
    format,
    writer_id: String(r.writer_id), seq: Number(r.seq), prev_seq: Number(r.prev_seq), prev_hash: Buffer.from(r.prev_hash as Uint8Array),
    hash: Buffer.from(r.hash as Uint8Array), row_count: Number(r.row_count), min_ts: new Date(r.min_ts as Date), max_ts: new Date(r.max_ts as Date),
    ids: format === 2 ? unpackIds((r.id_bytes as Uint8Array | null) ?? new Uint8Array(0)) : idList(r.ids),
    digests: Buffer.from(r.digests as Uint8Array),
  };
}

/** A row read back: its time, and the digest of its canonical form in each seal format that claims it. */
interface StoredRow {
  ts: Date;
  digests: (Buffer | undefined)[];
}

/** `formats`: a bit (1 << format) for each seal format claiming the row; a row no seal claims needs no digest. */
function storedRow(row: Row, formats: number): StoredRow {
  const digests: (Buffer | undefined)[] = [];
  if (formats !== 0) {
    const entry = { ...row, ts: row.ts.toISOString(), bytes_in: Number(row.bytes_in), bytes_out: Number(row.bytes_out) } as AuditEntry;
    if (formats & (1 << 1)) digests[1] = rowDigest(auditCopyLine(entry));
    if (formats & (1 << 2)) digests[2] = rowDigest(auditTuple(entry));
  }
  return { ts: row.ts, digests };
}

/**
 * Verifies `[from, to)`: the seals of batches with a row in the range, the rows of those batches (wherever they lie)
 * and every row in the range. Reads the range's rows into memory (about 100 bytes each): verify long ranges a day or a
 * week at a time.
 */
export async function verifyAudit(db: AnyDb, range: { from: Date; to: Date }): Promise<VerifyReport> {
  const from = range.from.toISOString();
  const to = range.to.toISOString();
  const problems: VerifyProblem[] = [];
  const report = (p: VerifyProblem): void => void (problems.length < MAX_PROBLEMS && problems.push(p));

  const seals = (
    await sql<Record<string, unknown>>`select * from audit_seals where min_ts < ${to}::timestamptz and max_ts >= ${from}::timestamptz order by writer_id, seq`.execute(db)
  ).rows.map(asSeal);

  // The chain: each seal's hash, and its link to the previous stored seal (in the range, before it, or the anchor
  // retention left). An attempt that failed leaves a gap no seal links across; a removed batch leaves a link to nothing.
  const bySeq = new Map(seals.map((s) => [`${s.writer_id}/${s.seq}`, s]));
  const wanted = seals.filter((s) => s.prev_seq > 0 && !bySeq.has(`${s.writer_id}/${s.prev_seq}`));
  const earlier = new Map<string, Buffer>();
  for (const s of wanted) {
    const r = await sql<{ hash: Uint8Array }>`select hash from audit_seals where writer_id = ${s.writer_id}::uuid and seq = ${s.prev_seq}
      union all select hash from audit_seal_anchors where writer_id = ${s.writer_id}::uuid and seq = ${s.prev_seq}`.execute(db);
    if (r.rows[0]) earlier.set(`${s.writer_id}/${s.prev_seq}`, Buffer.from(r.rows[0].hash));
  }
  const heads = new Map<string, SealRow>();
  for (const s of seals) {
    if (!sealHash(s).equals(s.hash) || s.ids.length !== s.row_count || s.digests.length !== s.row_count * DIGEST_BYTES) {
      report({ kind: 'seal_altered', writer_id: s.writer_id, seq: s.seq });
    }
    const key = `${s.writer_id}/${s.prev_seq}`;
    const prev = s.prev_seq === 0 ? GENESIS_HASH : (bySeq.get(key)?.hash ?? earlier.get(key));
    if (prev === undefined) report({ kind: 'chain_broken', writer_id: s.writer_id, seq: s.seq, prev_seq: s.prev_seq, detail: `seal ${s.prev_seq} it links to is missing: a batch was removed` });
    else if (!prev.equals(s.prev_hash)) report({ kind: 'chain_broken', writer_id: s.writer_id, seq: s.seq, prev_seq: s.prev_seq, detail: `seal ${s.prev_seq} it links to has another hash: that batch's seal was changed` });
    heads.set(s.writer_id, s);
  }

  // Rows: the range, widened to every row a seal in it covers.
  let lo = range.from;
  let hi = range.to;
  for (const s of seals) {
    if (s.min_ts < lo) lo = s.min_ts;
    if (s.max_ts >= hi) hi = new Date(s.max_ts.getTime() + 1);
  }
  // The seal formats that claim each id: a row's digest is computed as it is read, and only the row's time kept.
  const claimedBy = new Map<string, number>();
  for (const s of seals) for (const id of s.ids) claimedBy.set(id, (claimedBy.get(id) ?? 0) | (1 << s.format));
  const rows = new Map<string, StoredRow>();
  let cursor: { ts: Date; id: string } | null = null;
  for (;;) {
    const after: ReturnType<typeof sql> = cursor ? sql`and (ts, id) > (${cursor.ts.toISOString()}::timestamptz, ${cursor.id}::uuid)` : sql``;
    const page: Row[] = (
      await sql<Row>`select ${sql.raw(AUDIT_FIELDS.join(', '))} from audit_entries
        where ts >= ${lo.toISOString()}::timestamptz and ts < ${hi.toISOString()}::timestamptz ${after}
        order by ts, id limit ${PAGE}`.execute(db)
    ).rows;
    for (const row of page) rows.set(row.id, storedRow(row, claimedBy.get(row.id) ?? 0));
    if (page.length < PAGE) break;
    const last: Row = page[page.length - 1]!;
    cursor = { ts: last.ts, id: last.id };
  }

  const claimed = new Set<string>();
  for (const s of seals) {
    for (let k = 0; k < s.ids.length; k++) {
      const id = s.ids[k]!;
      claimed.add(id);
      const row = rows.get(id);
      if (row === undefined) report({ kind: 'deleted_row', id, writer_id: s.writer_id, seq: s.seq, position: k });
      else if (!row.digests[s.format]?.equals(s.digests.subarray(k * DIGEST_BYTES, (k + 1) * DIGEST_BYTES))) {
        report({ kind: 'edited_row', id, ts: row.ts.toISOString(), writer_id: s.writer_id, seq: s.seq, position: k });
      }
    }
  }

  // Sealing began when migration 0017 was applied: rows stamped before it may have been stored unsealed.
  const began = (await sql<{ t: string }>`select timestamp as t from kysely_migration where name = '0017_audit_store'`.execute(db)).rows[0]?.t;
  const sealingBegan = began ? new Date(began) : new Date(0);
  let unsealed = 0;
  for (const [id, row] of rows) {
    if (claimed.has(id) || row.ts < range.from || row.ts >= range.to) continue;
    if (row.ts < sealingBegan) unsealed += 1;
    else report({ kind: 'inserted_row', id, ts: row.ts.toISOString() });
  }

  return {
    from, to, ok: problems.length === 0, rows_checked: rows.size, seals_checked: seals.length, chains: heads.size,
    unsealed_before_sealing: unsealed,
    heads: [...heads.values()].map((s) => ({ writer_id: s.writer_id, seq: s.seq, hash: s.hash.toString('hex') })),
    problems,
  };
}
