// Checks the seal chains over a time range (`gatehouse audit verify`): every stored row against its batch's digest, every seal against its hash and its link to the chain's previous seal (docs/audit.md "Tamper evidence").
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { auditTuple } from './copy-binary.js';
import { auditCopyLine } from './copy-text.js';
import { AUDIT_FIELDS, type AuditEntry } from './entry.js';
import {
  DIGEST_BYTES, GENESIS_HASH, LOCATOR_BYTES, idLocatorHex, locatorDigestPart, locatorIdHex, rowDigest, rowsHash, sealHash, unpackIds,
  type BatchSeal, type SealFormat,
} from './seal.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

export type VerifyProblem =
  /** A row whose text is not what its batch sealed. */
  | { kind: 'edited_row'; id: string; ts: string; writer_id: string; seq: number; position: number }
  /**
   * A row its batch sealed that is not stored. A format-3 seal holds no ids: `id` is null and `id_suffix` is the last
   * eight hex digits of the missing row's id, as its locator holds them.
   */
  | { kind: 'deleted_row'; id: string | null; id_suffix?: string; writer_id: string; seq: number; position: number }
  /**
   * A format-3 batch whose rows all match their locators but not the seal's hash of their digests: a row was changed so
   * that its digest still starts as its locator says (a deliberate forgery of 32 bits).
   */
  | { kind: 'rows_altered'; writer_id: string; seq: number }
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
type SealRow = DistributiveOmit<BatchSeal, 'min_ts' | 'max_ts'> & { min_ts: Date; max_ts: Date };
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

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

const bytes = (v: unknown): Buffer => Buffer.from((v as Uint8Array | null) ?? new Uint8Array(0));

function asSeal(r: Record<string, unknown>): SealRow {
  const format = Number(r.format ?? 1) as SealFormat;
  const header = {
    writer_id: String(r.writer_id), seq: Number(r.seq), prev_seq: Number(r.prev_seq), prev_hash: bytes(r.prev_hash),
    hash: bytes(r.hash), row_count: Number(r.row_count), min_ts: new Date(r.min_ts as Date), max_ts: new Date(r.max_ts as Date),
  };
  if (format === 3) return { ...header, format, locators: bytes(r.locators), rows_hash: bytes(r.rows_hash) };
  return { ...header, format, ids: format === 2 ? unpackIds(bytes(r.id_bytes)) : idList(r.ids), digests: bytes(r.digests) };
}

/** Whether a seal's parts have the sizes its row count gives. */
function wellFormed(s: SealRow): boolean {
  if (s.format === 3) return s.locators.length === s.row_count * LOCATOR_BYTES && s.rows_hash.length === 32;
  return s.ids.length === s.row_count && s.digests.length === s.row_count * DIGEST_BYTES;
}

/** A row read back: its time, and the digest of its canonical form in each seal format that claims it. */
interface StoredRow {
  ts: Date;
  digests: (Buffer | undefined)[];
}

/**
 * `formats`: a bit (1 << format) for each seal format that may claim the row; a row no seal claims needs no digest.
 * Formats 2 and 3 digest the same binary tuple.
 */
function storedRow(row: Row, formats: number): StoredRow {
  const digests: (Buffer | undefined)[] = [];
  if (formats !== 0) {
    const entry = { ...row, ts: row.ts.toISOString(), bytes_in: Number(row.bytes_in), bytes_out: Number(row.bytes_out) } as AuditEntry;
    if (formats & (1 << 1)) digests[1] = rowDigest(auditCopyLine(entry));
    if (formats & ((1 << 2) | (1 << 3))) digests[2] = digests[3] = rowDigest(auditTuple(entry));
  }
  return { ts: row.ts, digests };
}

/**
 * Verifies `[from, to)`: the seals of batches with a row in the range, the rows of those batches (wherever they lie)
 * and every row in the range. Reads the range's rows into memory (≈ 0.8 kB each at the peak, docs/decisions/0033):
 * verify a busy store's long ranges an hour or a day at a time.
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
    if (!sealHash(s).equals(s.hash) || !wellFormed(s)) {
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
  // The seal formats that claim each id (formats 1 and 2 by id, 3 by the end of the id its locators hold): a row's
  // digest is computed as it is read, and only the row's time kept.
  const claimedBy = new Map<string, number>();
  const locatedTails = new Set<string>();
  for (const s of seals) {
    if (s.format === 3) for (let k = 0; k < s.row_count && (k + 1) * LOCATOR_BYTES <= s.locators.length; k++) locatedTails.add(locatorIdHex(s.locators, k));
    else for (const id of s.ids) claimedBy.set(id, (claimedBy.get(id) ?? 0) | (1 << s.format));
  }
  const rows = new Map<string, StoredRow>();
  /** Rows a format-3 locator may name, by the end of their id (an array only where two ids share an end). */
  const byTail = new Map<string, string | string[]>();
  let cursor: { ts: Date; id: string } | null = null;
  for (;;) {
    const after: ReturnType<typeof sql> = cursor ? sql`and (ts, id) > (${cursor.ts.toISOString()}::timestamptz, ${cursor.id}::uuid)` : sql``;
    const page: Row[] = (
      await sql<Row>`select ${sql.raw(AUDIT_FIELDS.join(', '))} from audit_entries
        where ts >= ${lo.toISOString()}::timestamptz and ts < ${hi.toISOString()}::timestamptz ${after}
        order by ts, id limit ${PAGE}`.execute(db)
    ).rows;
    for (const row of page) {
      const tail = idLocatorHex(row.id);
      const located = locatedTails.has(tail);
      rows.set(row.id, storedRow(row, (claimedBy.get(row.id) ?? 0) | (located ? 1 << 3 : 0)));
      if (located) {
        const known = byTail.get(tail);
        byTail.set(tail, known === undefined ? row.id : typeof known === 'string' ? [known, row.id] : [...known, row.id]);
      }
    }
    if (page.length < PAGE) break;
    const last: Row = page[page.length - 1]!;
    cursor = { ts: last.ts, id: last.id };
  }

  const claimed = new Set<string>();
  for (const s of seals) {
    if (s.format === 3) {
      checkLocated(s, rows, byTail, claimed, report);
      continue;
    }
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

/**
 * A format-3 seal against the stored rows: each locator names the row of the seal's time range whose id ends as it
 * says, and whose digest starts as it says. A locator no row answers is a deleted row; one whose row is there with
 * another digest, an edited row. When every locator is answered, the full digests of those rows must give the seal's
 * rows_hash. Rows answered are claimed (not inserted).
 */
function checkLocated(
  s: Extract<SealRow, { format: 3 }>, rows: Map<string, StoredRow>, byTail: Map<string, string | string[]>, claimed: Set<string>, report: (p: VerifyProblem) => void,
): void {
  const n = Math.min(s.row_count, Math.floor(s.locators.length / LOCATOR_BYTES));
  const digests: Buffer[] = [];
  let intact = n === s.row_count;
  for (let k = 0; k < n; k++) {
    const tail = locatorIdHex(s.locators, k);
    const part = locatorDigestPart(s.locators, k);
    const named = byTail.get(tail) ?? [];
    const candidates = (typeof named === 'string' ? [named] : named).filter((id) => {
      const ts = rows.get(id)!.ts;
      return ts >= s.min_ts && ts <= s.max_ts;
    });
    const match = candidates.find((id) => rows.get(id)!.digests[3]!.subarray(0, part.length).equals(part));
    if (match !== undefined) {
      claimed.add(match);
      digests.push(rows.get(match)!.digests[3]!);
      continue;
    }
    intact = false;
    // A row of the batch's time range with the id the locator names, but not the digest: the row was changed. One
    // no other seal has claimed comes first (a retried batch's row is claimed by both of its seals).
    const edited = candidates.find((id) => !claimed.has(id)) ?? candidates[0];
    if (edited !== undefined) {
      claimed.add(edited);
      report({ kind: 'edited_row', id: edited, ts: rows.get(edited)!.ts.toISOString(), writer_id: s.writer_id, seq: s.seq, position: k });
    } else {
      report({ kind: 'deleted_row', id: null, id_suffix: tail, writer_id: s.writer_id, seq: s.seq, position: k });
    }
  }
  if (intact && !rowsHash(Buffer.concat(digests)).equals(s.rows_hash)) report({ kind: 'rows_altered', writer_id: s.writer_id, seq: s.seq });
}
