// Idempotent batch storage of audit entries into the partitioned table: COPY for fresh batches on PostgreSQL, one INSERT of one JSON parameter otherwise.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { CopyIn } from '../store/copy.js';
import { setImmediate } from 'node:timers/promises';
import { AUDIT_COPY_BINARY_STATEMENT, BinaryBatchEncoder, auditTuple, binaryParts, type AcceptedRows, type AuditBinaryBatch } from './copy-binary.js';
import { AUDIT_FIELDS, hasUnstorableEscape, storableEntry, type AuditEntry } from './entry.js';
import { ensurePartitionsFor } from './partitions.js';
import type { AuditCopyTargets } from './copy-target.js';
import { SEAL_INSERT_COLUMNS, rowDigestHex, sealInsertSql, type LocatedSeal, type SealChain } from './seal.js';

const COLUMNS = sql.raw(AUDIT_FIELDS.join(', '));

/** SQLSTATE 23514 with this text: the row's month has no partition yet. */
function isMissingPartition(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown };
  return e?.code === '23514' && typeof e.message === 'string' && e.message.includes('no partition');
}

/**
 * What a COPY straight into a partition meets when the partition changed after it was looked up: gone (42P01), no
 * longer a table (42809), other bounds (23514 naming no constraint: the partition constraint), other columns (42703,
 * 22P04), privileges revoked (42501), or detached (22012, its guard). Any of them sends the batch through the parent,
 * which answers for itself. A CHECK constraint's 23514 names the constraint: the rows themselves are refused, and the
 * parent would route them into the same table and meet it again.
 */
function isStaleTarget(error: unknown): boolean {
  const e = error as { code?: unknown; constraint?: unknown };
  if (e?.code === '23514') return e.constraint === undefined;
  const code = e?.code;
  return code === '42P01' || code === '42809' || code === '42703' || code === '22P04' || code === '42501' || code === '22012';
}

/** SQLSTATE 23505: an entry of the batch is stored already (a retry of a batch whose first attempt committed late). */
function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown })?.code === '23505';
}

/**
 * Inserts a batch in one statement. `json_populate_recordset` turns one JSON parameter into typed
 * rows, which keeps any batch size under PostgreSQL's 65,535-parameter limit and parses fast.
 * `ON CONFLICT (id, ts) DO NOTHING` makes retries and spool replays idempotent (the primary key
 * includes ts because a partitioned table's unique keys must include the partition key; an entry
 * keeps its ts for life). A month without a partition (maintenance late) is created and retried once.
 * With `chain`, the batch is sealed (seal.ts) and its seal inserted by the same statement; an entry stored before
 * is claimed by both seals, with the same digest. Returns the number of rows newly stored.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function insertAuditEntries(db: Kysely<any>, entries: readonly AuditEntry[], chain?: SealChain): Promise<number> {
  return (await insertSealed(db, entries, chain)).stored;
}

/** insertAuditEntries, answering the seal it stored too. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function insertSealed(db: Kysely<any>, entries: readonly AuditEntry[], chain: SealChain | undefined, sealed?: LocatedSeal): Promise<{ stored: number; seal: LocatedSeal | null }> {
  if (entries.length === 0) return { stored: 0, seal: null };
  // json_populate_recordset refuses the \u escapes of NUL and lone surrogates for text and jsonb: such a batch is
  // stored with those characters replaced.
  const plain = JSON.stringify(entries);
  const storable = hasUnstorableEscape(plain) ? entries.map(storableEntry) : entries;
  const json = storable === entries ? plain : JSON.stringify(storable);
  let seal = sealed ?? null;
  if (chain && seal === null) seal = chain.seal(storable, storable.map(auditTuple));
  const stored = await withPartitionsFor(db, entries, async () => {
    const rows = sql`select ${COLUMNS} from json_populate_recordset(null::audit_entries, ${json}::json)`;
    const result = seal
      ? await sql`with seal as (
            insert into audit_seals (${sql.raw(SEAL_INSERT_COLUMNS)})
            values (${seal.format}, ${seal.writer_id}::uuid, ${seal.seq}, ${seal.prev_seq}, ${seal.prev_hash}, ${seal.hash}, ${seal.row_count},
                    ${seal.min_ts}::timestamptz, ${seal.max_ts}::timestamptz, ${seal.locators}, ${seal.rows_hash}))
          insert into audit_entries (${COLUMNS}) ${rows} on conflict (id, ts) do nothing`.execute(db)
      : await sql`insert into audit_entries (${COLUMNS}) ${rows} on conflict (id, ts) do nothing`.execute(db);
    return Number(result.numAffectedRows ?? 0);
  });
  return { stored, seal };
}

/**
 * Entries encoded or digested between two turns of the event loop when a batch is stored: a batch of 500 encoded and
 * digested at once held the event loop for 1.5–2 ms, which every request arriving meanwhile waited out
 * (docs/decisions/0031 addendum). 64 entries take ≈ 0.2 ms.
 */
export const ENCODE_SLICE = 64;

/** Runs `each(i)` for i from 0 to n − 1, letting the event loop turn every ENCODE_SLICE of them. */
async function inSlices(n: number, each: (i: number) => void): Promise<void> {
  for (let i = 0; i < n; i++) {
    if (i > 0 && i % ENCODE_SLICE === 0) await setImmediate();
    each(i);
  }
}

/** auditBinaryBatch, letting the event loop turn every ENCODE_SLICE entries. */
async function encodeBatch(entries: readonly AuditEntry[], accepted: AcceptedRows | undefined): Promise<AuditBinaryBatch | null> {
  const encoder = new BinaryBatchEncoder(entries.length);
  await inSlices(entries.length, (i) => encoder.add(entries[i]!, accepted?.[i]));
  return encoder.finish();
}

/** Runs `store`; when a month of the batch has no partition yet (maintenance late), creates it and runs `store` once more. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function withPartitionsFor(db: Kysely<any>, entries: readonly AuditEntry[], store: () => Promise<number>): Promise<number> {
  try {
    return await store();
  } catch (error) {
    if (!isMissingPartition(error)) throw error;
    await ensurePartitionsFor(db, entries.map((e) => new Date(e.ts)));
    return store();
  }
}

/**
 * Rows per COPY statement of a batch; a larger batch is copied in several, in one transaction. PostgreSQL 15 gives each
 * row a binary COPY buffers its own tuple slot, and every slot pins the table's row type in the statement's resource
 * owner; past 64 pins that owner keeps them in a hash table where equal pins collide, so a 500-row COPY spends ≈ 12% of
 * its instructions pinning and unpinning (docs/decisions/0035).
 */
export const AUDIT_COPY_PART_ROWS = 250;

/**
 * Stores a fresh batch with `COPY audit_entries … FROM STDIN` in the binary format, which costs PostgreSQL about 30% less
 * CPU per entry than the JSON insert (docs/decisions/0004-audit-copy.md) and less again than the text format: no
 * timestamps, UUIDs, numbers or arrays to parse (docs/decisions/0031). COPY is atomic but has no ON CONFLICT, so:
 * - a unique violation (23505: the batch was stored before, by an attempt that timed out after its commit) sends the
 *   whole batch through insertAuditEntries, whose ON CONFLICT stores just the missing entries;
 * - a month without a partition (23514) creates the partitions and copies once more, as the insert path does;
 * - a batch COPY cannot carry unchanged (auditBinaryBatch answers null: a NUL or a lone surrogate) is stored with
 *   those characters replaced by U+FFFD (storableEntry), as the insert path does;
 * - any other error propagates (the writer then spools the batch).
 * With `targets`, a batch whose rows fall in one UTC day is copied straight into that day's partition (copy-target.ts);
 * a COPY that meets the partition changed since goes through the parent instead. A batch of more than `partRows` rows
 * is copied in parts of at most that many, all in one transaction (CopyIn).
 * With `chain`, the batch's seal is inserted in the same transaction, behind the last part's COPY in its simple query
 * (no extra round trip; docs/decisions/0024), and every fallback above stores the same seal.
 * `timeoutMs` bounds each COPY: one not answered in time has its connection destroyed (store/copy.ts).
 * Returns the number of rows newly stored and the seal stored with them.
 */
export async function copyAuditEntries(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  db: Kysely<any>, copyIn: CopyIn, entries: readonly AuditEntry[], timeoutMs: number, chain?: SealChain, opts?: CopyOptions,
): Promise<number> {
  return (await copySealed(db, copyIn, entries, timeoutMs, chain, opts)).stored;
}

/** What copySealed may be given: where batches go (the writer's targets; without them, the parent) and rows per COPY statement. */
export interface CopyOptions {
  targets?: AuditCopyTargets;
  partRows?: number;
  /** The rows made when the writer accepted the entries (encodeAccepted). */
  accepted?: AcceptedRows;
}

/** copyAuditEntries, answering the seal it stored too. */
export async function copySealed(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  db: Kysely<any>, copyIn: CopyIn, entries: readonly AuditEntry[], timeoutMs: number, chain: SealChain | undefined, opts: CopyOptions = {},
): Promise<{ stored: number; seal: LocatedSeal | null }> {
  if (entries.length === 0) return { stored: 0, seal: null };
  // A batch COPY cannot carry unchanged holds a NUL or a lone surrogate: it is stored with them replaced.
  let accepted = opts.accepted;
  let batch = await encodeBatch(entries, accepted);
  if (batch === null) {
    // The rows accepted were made of the entries as they were: the storable copies are encoded afresh.
    entries = entries.map(storableEntry);
    accepted = undefined;
    batch = await encodeBatch(entries, accepted);
    if (batch === null) return insertSealed(db, entries, chain);
  }
  let seal: LocatedSeal | null = null;
  if (chain) {
    const { tuples } = batch;
    const digests = new Array<string>(tuples.length);
    await inSlices(tuples.length, (i) => (digests[i] = accepted?.[i]?.digestHex ?? rowDigestHex(tuples[i]!)));
    seal = chain.sealDigests(entries, digests);
  }
  const data = binaryParts(batch, opts.partRows ?? AUDIT_COPY_PART_ROWS);
  const sealSql = seal ? sealInsertSql(seal) : null;
  const copy = (statement: string, guard: string | null): Promise<number> => {
    const after = [guard, sealSql].filter((s) => s !== null).join('; ');
    return copyIn(data.map((d) => ({ statement, data: d })), timeoutMs, after === '' ? undefined : after);
  };
  const viaParent = (): Promise<number> => withPartitionsFor(db, entries, () => copy(AUDIT_COPY_BINARY_STATEMENT, null));
  const { targets } = opts;
  try {
    const target = targets ? await targets.targetFor(batch.minMs, batch.maxMs) : null;
    if (target === null || target.partition === null) return { stored: await viaParent(), seal };
    try {
      return { stored: await copy(target.statement, target.guard), seal };
    } catch (error) {
      // The partition was dropped, detached or changed since it was looked up: through the parent, and look again.
      if (!isStaleTarget(error)) throw error;
      targets!.forget();
      return { stored: await viaParent(), seal };
    }
  } catch (error) {
    if (isUniqueViolation(error)) return insertSealed(db, entries, chain, seal ?? undefined);
    throw error;
  }
}
