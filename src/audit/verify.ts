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
  /** The most rows held in memory at once: what the verification's memory grows with (docs/decisions/0034). */
  max_rows_held: number;
  problems: VerifyProblem[];
}

/** A stored seal as read back: BatchSeal with its time bounds as PostgreSQL returns them. */
type SealRow = DistributiveOmit<BatchSeal, 'min_ts' | 'max_ts'> & { min_ts: Date; max_ts: Date };
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const ROW_PAGE = 5_000;
const SEAL_PAGE = 500;
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

/** A row read back and held while a seal may still claim it: its time and the digest of its canonical form per format. */
interface HeldRow {
  id: string;
  ts: Date;
  /** By seal format (formats 2 and 3 digest the same binary tuple); none when the stored time is finer than a millisecond. */
  digests: (Buffer | undefined)[];
  claimed: boolean;
}

type StoredRow = Omit<AuditEntry, 'ts'> & { ts: Date; ts_key: string; ts_exact: boolean };

/**
 * `formats`: a bit (1 << format) for each seal format in the range. A stored time finer than a millisecond is one no
 * entry has (entries are stamped in milliseconds, and the digest covers only those): such a row matches no digest.
 */
function heldRow(row: StoredRow, formats: number): HeldRow {
  const digests: (Buffer | undefined)[] = [];
  if (row.ts_exact) {
    const { ts_key: _key, ts_exact: _exact, ...fields } = row;
    const entry = { ...fields, ts: row.ts.toISOString(), bytes_in: Number(row.bytes_in), bytes_out: Number(row.bytes_out) } as AuditEntry;
    if (formats & (1 << 1)) digests[1] = rowDigest(auditCopyLine(entry));
    if (formats & ((1 << 2) | (1 << 3))) digests[2] = digests[3] = rowDigest(auditTuple(entry));
  }
  return { id: row.id, ts: row.ts, digests, claimed: false };
}

/**
 * The rows read and not yet settled, in (ts, id) order, found by the end of their id (what a format-3 locator holds;
 * formats 1 and 2 narrow by the whole id). Rows leave from the oldest once no open or later seal can claim them.
 */
class RowWindow {
  private readonly byTail = new Map<string, HeldRow | HeldRow[]>();
  private rows: HeldRow[] = [];
  private head = 0;
  /** The most rows held at once: the verifier's memory is this, not the range's size. */
  peak = 0;

  add(row: HeldRow): void {
    this.rows.push(row);
    const tail = idLocatorHex(row.id);
    const known = this.byTail.get(tail);
    this.byTail.set(tail, known === undefined ? row : Array.isArray(known) ? [...known, row] : [known, row]);
    this.peak = Math.max(this.peak, this.rows.length - this.head);
  }

  withTail(tail: string): readonly HeldRow[] {
    const known = this.byTail.get(tail);
    return known === undefined ? [] : Array.isArray(known) ? known : [known];
  }

  /** Removes and returns the rows stamped before `ms`. */
  takeBefore(ms: number): HeldRow[] {
    const out: HeldRow[] = [];
    while (this.head < this.rows.length && this.rows[this.head]!.ts.getTime() < ms) {
      const row = this.rows[this.head++]!;
      out.push(row);
      const tail = idLocatorHex(row.id);
      const known = this.byTail.get(tail);
      const rest = Array.isArray(known) ? known.filter((r) => r !== row) : [];
      if (rest.length === 0) this.byTail.delete(tail);
      else this.byTail.set(tail, rest.length === 1 ? rest[0]! : rest);
    }
    if (this.head > 4_096 && this.head * 2 > this.rows.length) {
      this.rows = this.rows.slice(this.head);
      this.head = 0;
    }
    return out;
  }
}

/** The range's seals in (min_ts, writer_id, seq) order, read a page at a time. */
class SealStream {
  private buffered: SealRow[] = [];
  private cursor: { key: string; writer_id: string; seq: number } | null = null;
  private done = false;

  constructor(
    private readonly db: AnyDb,
    private readonly from: string,
    private readonly to: string,
    private readonly page: number,
  ) {}

  async peek(): Promise<SealRow | undefined> {
    if (this.buffered.length === 0 && !this.done) await this.fill();
    return this.buffered[0];
  }

  next(): SealRow | undefined {
    return this.buffered.shift();
  }

  private async fill(): Promise<void> {
    const c = this.cursor;
    // The cursor's time as PostgreSQL printed it: a stored bound finer than a millisecond still orders exactly.
    const after: ReturnType<typeof sql> = c ? sql`and (min_ts, writer_id, seq) > (${c.key}::timestamptz, ${c.writer_id}::uuid, ${c.seq})` : sql``;
    const rows = (
      await sql<Record<string, unknown>>`select *, min_ts::text as min_ts_key from audit_seals
        where min_ts < ${this.to}::timestamptz and max_ts >= ${this.from}::timestamptz ${after}
        order by min_ts, writer_id, seq limit ${this.page}`.execute(this.db)
    ).rows;
    if (rows.length < this.page) this.done = true;
    const last = rows[rows.length - 1];
    if (last) this.cursor = { key: String(last.min_ts_key), writer_id: String(last.writer_id), seq: Number(last.seq) };
    this.buffered = rows.map(asSeal);
  }
}

export interface VerifyOptions {
  /** Rows read per query (default 5,000). */
  rowPage?: number;
  /** Seals read per query (default 500). */
  sealPage?: number;
}

/**
 * Verifies `[from, to)`: the seals of batches with a row in the range, the rows of those batches (wherever they lie)
 * and every row in the range. Rows are read in time order and held only while a seal whose time range holds them is
 * open (docs/decisions/0034), so memory follows the seals' time spans and the writers' concurrency, not the range.
 */
export async function verifyAudit(db: AnyDb, range: { from: Date; to: Date }, options: VerifyOptions = {}): Promise<VerifyReport> {
  // One snapshot for every page: a batch committing while the range is read (its seal and rows are one transaction)
  // is seen whole or not at all, instead of as rows without their seal or a seal without its rows.
  return db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(async (trx) => {
    // A page is the next rows in key order: the key's index gives them without a sort. Without this, a partition whose
    // statistics predate its rows (autovacuum has not analyzed it yet) gets a bitmap scan of all the rows after the
    // cursor and a sort, per page: 1.1 s a page at 1M rows, the whole read quadratic (docs/decisions/0034).
    await sql`set local enable_bitmapscan = off`.execute(trx);
    return new Verification(trx, range, options).run();
  });
}

class Verification {
  private readonly from: string;
  private readonly to: string;
  private readonly problems: VerifyProblem[] = [];
  private readonly window = new RowWindow();
  private readonly open: SealRow[] = [];
  /** Every seal seen, by `writer/seq`, as its hash in hex: the links of later seals are checked against it. */
  private readonly hashes = new Map<string, string>();
  /** Seals whose previous seal had not been seen when they were read: checked at the end. */
  private readonly unlinked: SealRow[] = [];
  private readonly heads = new Map<string, { seq: number; hash: string }>();
  /**
   * Unclaimed rows kept to the end because a seal of format 1 or 2 names rows by whole id and may name one outside its
   * own time range (a row whose time was changed): only kept when the range has such seals.
   */
  private readonly unclaimed = new Map<string, { ts: Date; inRange: boolean }>();
  /** Rows of format-1 or format-2 seals not found when their seal closed. */
  private readonly missing: { id: string; writer_id: string; seq: number; position: number }[] = [];
  private formats = 0;
  private sealingBegan = new Date(0);
  private rowsChecked = 0;
  private sealsChecked = 0;
  private unsealed = 0;

  constructor(
    private readonly db: AnyDb,
    private readonly range: { from: Date; to: Date },
    private readonly options: VerifyOptions,
  ) {
    this.from = range.from.toISOString();
    this.to = range.to.toISOString();
  }

  private report(p: VerifyProblem): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push(p);
  }

  async run(): Promise<VerifyReport> {
    const { db, from, to } = this;
    const span = (
      await sql<{ lo: Date | null; hi: Date | null; formats: number[] | string | null }>`select min(min_ts) as lo, max(max_ts) as hi,
        array_agg(distinct format) as formats from audit_seals where min_ts < ${to}::timestamptz and max_ts >= ${from}::timestamptz`.execute(db)
    ).rows[0];
    for (const f of intList(span?.formats)) this.formats |= 1 << f;
    // Sealing began when migration 0017 was applied: rows stamped before it may have been stored unsealed.
    const began = (await sql<{ t: string }>`select timestamp as t from kysely_migration where name = '0017_audit_store'`.execute(db)).rows[0]?.t;
    if (began) this.sealingBegan = new Date(began);

    // Rows: the range, widened to every row a seal in it covers.
    const lo = span?.lo && new Date(span.lo) < this.range.from ? new Date(span.lo) : this.range.from;
    const hi = span?.hi && new Date(span.hi).getTime() + 1 > this.range.to.getTime() ? new Date(new Date(span.hi).getTime() + 1) : this.range.to;
    const seals = new SealStream(db, from, to, this.options.sealPage ?? SEAL_PAGE);
    const rowPage = this.options.rowPage ?? ROW_PAGE;
    let cursor: string | null = null;
    for (;;) {
      const after: ReturnType<typeof sql> = cursor ? sql`and (ts, id) > (${cursor}::timestamptz, ${this.lastId}::uuid)` : sql``;
      const page = (
        await sql<StoredRow>`select ${sql.raw(AUDIT_FIELDS.join(', '))}, ts::text as ts_key, date_trunc('milliseconds', ts) = ts as ts_exact
          from audit_entries where ts >= ${lo.toISOString()}::timestamptz and ts < ${hi.toISOString()}::timestamptz ${after}
          order by ts, id limit ${rowPage}`.execute(db)
      ).rows;
      for (const row of page) this.window.add(heldRow(row, this.formats));
      this.rowsChecked += page.length;
      const last = page[page.length - 1];
      const done = page.length < rowPage;
      // Every row stamped before `through` has been read (rows of its own millisecond may follow on the next page).
      const through = done || !last ? Number.POSITIVE_INFINITY : last.ts.getTime();
      for (let s = await seals.peek(); s !== undefined && s.min_ts.getTime() <= through; s = await seals.peek()) this.openSeal(seals.next()!);
      this.closeSeals(through);
      let bound = through;
      for (const s of this.open) bound = Math.min(bound, s.min_ts.getTime());
      const next = await seals.peek();
      if (next) bound = Math.min(bound, next.min_ts.getTime());
      for (const row of this.window.takeBefore(bound)) this.settle(row);
      if (done || !last) break;
      cursor = last.ts_key;
      this.lastId = last.id;
    }
    await this.checkLinks();
    for (const m of this.missing) {
      const row = this.unclaimed.get(m.id);
      this.unclaimed.delete(m.id);
      if (row) this.report({ kind: 'edited_row', id: m.id, ts: row.ts.toISOString(), writer_id: m.writer_id, seq: m.seq, position: m.position });
      else this.report({ kind: 'deleted_row', ...m });
    }
    for (const [id, row] of this.unclaimed) if (row.inRange) this.unclaimedRow(id, row.ts);

    return {
      from, to, ok: this.problems.length === 0, rows_checked: this.rowsChecked, seals_checked: this.sealsChecked,
      chains: this.heads.size, unsealed_before_sealing: this.unsealed,
      heads: [...this.heads].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([writer_id, h]) => ({ writer_id, seq: h.seq, hash: h.hash })),
      max_rows_held: this.window.peak,
      problems: this.problems,
    };
  }

  private lastId = '';

  /** A seal read: its hash, its link (when the seal it links to was already seen), and the chain's head. */
  private openSeal(s: SealRow): void {
    this.sealsChecked += 1;
    if (!sealHash(s).equals(s.hash) || !wellFormed(s)) this.report({ kind: 'seal_altered', writer_id: s.writer_id, seq: s.seq });
    const hash = s.hash.toString('hex');
    this.hashes.set(`${s.writer_id}/${s.seq}`, hash);
    if (s.prev_seq === 0) this.checkLink(s, GENESIS_HASH.toString('hex'));
    else {
      const prev = this.hashes.get(`${s.writer_id}/${s.prev_seq}`);
      if (prev === undefined) this.unlinked.push(s);
      else this.checkLink(s, prev);
    }
    const head = this.heads.get(s.writer_id);
    if (head === undefined || s.seq > head.seq) this.heads.set(s.writer_id, { seq: s.seq, hash });
    this.open.push(s);
  }

  /** `prev`: the hash of the seal `s` links to, in hex, or undefined when no such seal is stored. */
  private checkLink(s: SealRow, prev: string | undefined): void {
    if (prev === undefined) this.report({ kind: 'chain_broken', writer_id: s.writer_id, seq: s.seq, prev_seq: s.prev_seq, detail: `seal ${s.prev_seq} it links to is missing: a batch was removed` });
    else if (prev !== s.prev_hash.toString('hex')) this.report({ kind: 'chain_broken', writer_id: s.writer_id, seq: s.seq, prev_seq: s.prev_seq, detail: `seal ${s.prev_seq} it links to has another hash: that batch's seal was changed` });
  }

  /**
   * Links to seals not seen before their successor: later in the range (a fork's seals), before it, or the anchor
   * retention left. An attempt that failed leaves a gap no seal links across; a removed batch leaves a link to nothing.
   */
  private async checkLinks(): Promise<void> {
    for (const s of this.unlinked) {
      let prev = this.hashes.get(`${s.writer_id}/${s.prev_seq}`);
      if (prev === undefined) {
        const r = await sql<{ hash: Uint8Array }>`select hash from audit_seals where writer_id = ${s.writer_id}::uuid and seq = ${s.prev_seq}
          union all select hash from audit_seal_anchors where writer_id = ${s.writer_id}::uuid and seq = ${s.prev_seq}`.execute(this.db);
        if (r.rows[0]) prev = Buffer.from(r.rows[0].hash).toString('hex');
      }
      this.checkLink(s, prev);
    }
  }

  /** Checks and closes the open seals whose every row has been read: those ending before `through`. */
  private closeSeals(through: number): void {
    for (let i = 0; i < this.open.length; ) {
      const s = this.open[i]!;
      if (s.max_ts.getTime() >= through) {
        i += 1;
        continue;
      }
      this.open.splice(i, 1);
      if (s.format === 3) this.checkLocated(s);
      else this.checkListed(s);
    }
  }

  /** A format-1 or format-2 seal: each id it lists against the row of that id and its digest. */
  private checkListed(s: Extract<SealRow, { format: 1 | 2 }>): void {
    for (let k = 0; k < s.ids.length; k++) {
      const id = s.ids[k]!;
      const candidates = this.window.withTail(idLocatorHex(id)).filter((r) => r.id === id);
      const digest = s.digests.subarray(k * DIGEST_BYTES, (k + 1) * DIGEST_BYTES);
      const match = candidates.find((r) => r.digests[s.format]?.equals(digest));
      if (match !== undefined) {
        match.claimed = true;
        continue;
      }
      const edited = candidates.find((r) => !r.claimed) ?? candidates[0];
      const away = edited === undefined ? this.unclaimed.get(id) : undefined;
      if (edited !== undefined) edited.claimed = true;
      else if (away !== undefined) this.unclaimed.delete(id);
      const row = edited ?? away;
      if (row !== undefined) this.report({ kind: 'edited_row', id, ts: row.ts.toISOString(), writer_id: s.writer_id, seq: s.seq, position: k });
      // Not read yet, or not stored: settled at the end, once every row of the range has been read.
      else this.missing.push({ id, writer_id: s.writer_id, seq: s.seq, position: k });
    }
  }

  /**
   * A format-3 seal against the stored rows: each locator names the row of the seal's time range whose id ends as it
   * says, and whose digest starts as it says. A locator no row answers is a deleted row; one whose row is there with
   * another digest, an edited row. When every locator is answered, the full digests of those rows must give the seal's
   * rows_hash. Rows answered are claimed (not inserted).
   */
  private checkLocated(s: Extract<SealRow, { format: 3 }>): void {
    const n = Math.min(s.row_count, Math.floor(s.locators.length / LOCATOR_BYTES));
    const digests: Buffer[] = [];
    let intact = n === s.row_count;
    const lo = s.min_ts.getTime();
    const hi = s.max_ts.getTime();
    for (let k = 0; k < n; k++) {
      const tail = locatorIdHex(s.locators, k);
      const part = locatorDigestPart(s.locators, k);
      const candidates = this.window.withTail(tail).filter((r) => r.ts.getTime() >= lo && r.ts.getTime() <= hi);
      const match = candidates.find((r) => r.digests[3]?.subarray(0, part.length).equals(part));
      if (match !== undefined) {
        match.claimed = true;
        digests.push(match.digests[3]!);
        continue;
      }
      intact = false;
      // A row of the batch's time range with the id the locator names, but not the digest: the row was changed. One
      // no other seal has claimed comes first (a retried batch's row is claimed by both of its seals).
      const edited = candidates.find((r) => !r.claimed) ?? candidates[0];
      if (edited !== undefined) {
        edited.claimed = true;
        this.report({ kind: 'edited_row', id: edited.id, ts: edited.ts.toISOString(), writer_id: s.writer_id, seq: s.seq, position: k });
      } else {
        this.report({ kind: 'deleted_row', id: null, id_suffix: tail, writer_id: s.writer_id, seq: s.seq, position: k });
      }
    }
    if (intact && !rowsHash(Buffer.concat(digests)).equals(s.rows_hash)) this.report({ kind: 'rows_altered', writer_id: s.writer_id, seq: s.seq });
  }

  /** A row no open or later seal can claim any more: claimed, or inserted, or stored before sealing began. */
  private settle(row: HeldRow): void {
    if (row.claimed) return;
    const inRange = row.ts >= this.range.from && row.ts < this.range.to;
    if (this.formats & ((1 << 1) | (1 << 2))) this.unclaimed.set(row.id, { ts: row.ts, inRange });
    else if (inRange) this.unclaimedRow(row.id, row.ts);
  }

  /** A row of the range no seal claims: inserted, unless stamped before sealing began. */
  private unclaimedRow(id: string, ts: Date): void {
    if (ts < this.sealingBegan) this.unsealed += 1;
    else this.report({ kind: 'inserted_row', id, ts: ts.toISOString() });
  }
}

/** int[] arrives parsed from PostgreSQL and as its text from the embedded store. */
function intList(v: unknown): number[] {
  if (v === null || v === undefined) return [];
  if (Array.isArray(v)) return v.map(Number);
  const s = String(v);
  return s === '{}' || s === '{NULL}' ? [] : s.slice(1, -1).split(',').map(Number);
}
