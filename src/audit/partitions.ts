// Partitions of audit_entries: daily ones created ahead, full search indexes built on each partition once it is closed, and partitions past retention dropped (run by the worker).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/** Daily partitions (since docs/decisions/0024) and the monthly ones migrations 0002–0016 created. */
const PARTITION_RE = /^audit_entries_p(\d{4})(\d{2})(\d{2})?$/;
const DAY_MS = 86_400_000;
/** The unique key (ts, id) of migration 0022, which replaces the primary key (id, ts) and the (ts desc, id desc) index. */
const AUDIT_TIME_KEY = 'audit_entries_ts_id_key';

/** The seals' time order (migration 0024), which `audit verify` reads them in. */
export const SEAL_TIME_ORDER_INDEX = 'audit_seals_min_ts_idx';
export const SEAL_TIME_ORDER_COLUMNS = 'min_ts, writer_id, seq';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

export interface PartitionMaintenanceOptions {
  /** Days created ahead of today (config audit.partitions.months_ahead; partitions are daily since 0024). */
  monthsAhead: number;
  retentionDays: number;
  now?: Date;
  /**
   * Indexes built on a partition without them: CREATE INDEX CONCURRENTLY (writes go on) on PostgreSQL, a plain build
   * on the embedded store, whose single connection has no concurrent writer to spare. Default: concurrently.
   */
  concurrently?: boolean;
}

export interface PartitionMaintenanceResult {
  created: string[];
  dropped: string[];
  /** Indexes built on closed partitions (and parent indexes attached), by name. */
  indexed: string[];
  /** Tables (partitions, audit_seals) left alone because another session is building an index on them. */
  busy: string[];
  /** Block ranges of open partitions' BRIN indexes summarized by this run. */
  summarized: number;
  /** Whether this run dropped the primary key and time index the unique time key replaces (migration 0022). */
  retired: boolean;
  /** Whether this run built the seals' time order, which migration 0024 leaves to maintenance on a large seals table. */
  sealOrder: boolean;
}

export interface AuditPartition {
  name: string;
  /** Inclusive lower bound. */
  from: Date;
  /** Exclusive upper bound. */
  to: Date;
  kind: 'day' | 'month';
}

/** First instant of the UTC month `offset` months after the month of `d`. */
export function monthStart(d: Date, offset = 0): Date {
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + offset, 1));
}

/** First instant of the UTC day `offset` days after the day of `d`. */
export function dayStart(d: Date, offset = 0): Date {
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + offset));
}

/** How long after a UTC midnight the worker maintains the partitions again, so the day just closed gets its search indexes. */
export const MAINTAIN_AFTER_MIDNIGHT_MS = 5_000;

/** The next maintenance just after a UTC midnight: MAINTAIN_AFTER_MIDNIGHT_MS into the day after `now`'s. */
export function justAfterMidnight(now: Date): Date {
  return new Date(dayStart(now, 1).getTime() + MAINTAIN_AFTER_MIDNIGHT_MS);
}

const pad2 = (n: number): string => String(n).padStart(2, '0');

/** The name of a legacy monthly partition (migrations before 0024). */
export function partitionName(month: Date): string {
  return `audit_entries_p${month.getUTCFullYear()}${pad2(month.getUTCMonth() + 1)}`;
}

export function dayPartitionName(day: Date): string {
  return `${partitionName(day)}${pad2(day.getUTCDate())}`;
}

/** Partitions of audit_entries that follow our naming, with their bounds, oldest first. */
export async function listPartitions(db: AnyDb): Promise<AuditPartition[]> {
  const result = await sql<{ name: string }>`select c.relname as name from pg_inherits i
      join pg_class c on c.oid = i.inhrelid
     where i.inhparent = 'audit_entries'::regclass
     order by c.relname`.execute(db);
  const out: AuditPartition[] = [];
  for (const { name } of result.rows) {
    const m = PARTITION_RE.exec(name);
    if (!m) continue;
    const y = Number(m[1]);
    const mo = Number(m[2]) - 1;
    if (m[3] === undefined) out.push({ name, from: new Date(Date.UTC(y, mo, 1)), to: new Date(Date.UTC(y, mo + 1, 1)), kind: 'month' });
    else {
      const from = new Date(Date.UTC(y, mo, Number(m[3])));
      out.push({ name, from, to: dayStart(from, 1), kind: 'day' });
    }
  }
  return out.sort((a, b) => a.from.getTime() - b.from.getTime());
}

async function exists(db: AnyDb, name: string): Promise<boolean> {
  const r = await sql<{ r: string | null }>`select to_regclass(${name}) as r`.execute(db);
  return Boolean(r.rows[0]?.r);
}

/**
 * Creates the partition of one UTC day unless a partition already holds that day (its own, or the legacy monthly
 * partition of its month); true when this call created it. The new partition gets the parent's indexes only: the
 * hot-path set of docs/decisions/0024 (primary key, time order, the partial decision index, the BRIN filters).
 */
export async function createDayPartition(db: AnyDb, day: Date): Promise<boolean> {
  const from = dayStart(day);
  const to = dayStart(day, 1);
  const name = dayPartitionName(from);
  if ((await exists(db, name)) || (await exists(db, partitionName(from)))) return false;
  try {
    // Identifiers and bounds come from Date arithmetic, never from input.
    await sql`create table ${sql.id(name)} partition of audit_entries
      for values from (${sql.lit(from.toISOString())}) to (${sql.lit(to.toISOString())})`.execute(db);
  } catch (error) {
    // Another worker created it between the check and the statement (42P07), or a partition overlapping it (42P17).
    const code = (error as { code?: unknown }).code;
    if (code === '42P07' || code === '23505' || code === '42P17') return false;
    throw error;
  }
  // Its BRIN index was built on no rows and still summarized its first range, where rows start arriving. Best effort:
  // the partition is there for the writer either way, and maintenance takes the summary off at its next run.
  await unsummarizeFillingRange(db, name).catch(() => undefined);
  return true;
}

/** Creates the partitions that rows with these timestamps need (the writer's fallback when maintenance is late). */
export async function ensurePartitionsFor(db: AnyDb, dates: readonly Date[]): Promise<void> {
  const days = new Map<number, Date>();
  for (const d of dates) days.set(dayStart(d).getTime(), dayStart(d));
  for (const day of days.values()) await createDayPartition(db, day);
}

/**
 * The search indexes a partition gets once closed (docs/decisions/0024): each common filter with the page order, so a
 * filtered newest page reads only its own rows. The hot partition goes without them: they are most of a row's insert
 * cost (five random-position B-tree inserts), and its searches use the time index and the BRIN filters instead.
 */
export const CLOSED_PARTITION_INDEXES: readonly { suffix: string; definition: string }[] = [
  { suffix: 'identity_idx', definition: '(identity_id, ts desc, id desc)' },
  { suffix: 'source_idx', definition: '(source_id, ts desc, id desc)' },
  { suffix: 'channel_idx', definition: '(channel, ts desc, id desc)' },
  { suffix: 'request_idx', definition: '(request_id)' },
  { suffix: 'approval_idx', definition: '(approval_id) where approval_id is not null' },
];

/** A partition is closed once no row can still arrive for it in the ordinary course: its range ended (legacy monthly partitions always count, see 0024). */
function closed(p: AuditPartition, now: Date): boolean {
  return p.kind === 'month' || p.to.getTime() <= now.getTime();
}

/** A table's indexes by name, with whether each is valid (an interrupted concurrent build leaves one invalid). */
async function readIndexes(db: AnyDb, table: string): Promise<{ name: string; valid: boolean }[]> {
  const r = await sql<{ name: string; valid: boolean }>`select c.relname as name, i.indisvalid as valid
      from pg_index i join pg_class c on c.oid = i.indexrelid where i.indrelid = ${table}::regclass`.execute(db);
  return r.rows;
}

/**
 * Names of the valid indexes of a table; an index left invalid by an interrupted concurrent build is dropped first.
 * Null while another session is building an index on the table (indexBuildInProgress): its unfinished index is invalid
 * too, and must be left to that build.
 */
async function indexesOf(db: AnyDb, table: string, concurrently: boolean): Promise<Set<string> | null> {
  if (await indexBuildInProgress(db, table)) return null;
  const valid = new Set<string>();
  for (const row of await readIndexes(db, table)) {
    if (row.valid) valid.add(row.name);
    else if (concurrently) await sql`drop index concurrently if exists ${sql.id(row.name)}`.execute(db);
    else await sql`drop index if exists ${sql.id(row.name)}`.execute(db);
  }
  return valid;
}

/**
 * Parent indexes created `on only audit_entries` by migration 0017: every partition created since has them (PostgreSQL
 * clones a parent's indexes into each new partition), older partitions get them here, built concurrently and then
 * attached, after which the parent index is valid.
 */
async function unattachedParentIndexes(db: AnyDb, partition: string): Promise<{ parent: string; definition: string }[]> {
  const r = await sql<{ parent: string; definition: string }>`
    select pc.relname as parent, pg_get_indexdef(pi.indexrelid) as definition
      from pg_index pi join pg_class pc on pc.oid = pi.indexrelid
     where pi.indrelid = 'audit_entries'::regclass and not pi.indisvalid
       and not exists (select 1 from pg_inherits h join pg_index ci on ci.indexrelid = h.inhrelid
                        where h.inhparent = pi.indexrelid and ci.indrelid = ${partition}::regclass)`.execute(db);
  return r.rows;
}

/**
 * Builds what a partition lacks: the parent's hot-path indexes (attached) and, once closed, the full search indexes.
 * Null when it is left alone: another session is building an index on it.
 */
async function indexPartition(db: AnyDb, p: AuditPartition, now: Date, concurrently: boolean): Promise<string[] | null> {
  const built: string[] = [];
  const have = await indexesOf(db, p.name, concurrently);
  if (have === null) return null;
  const create = async (name: string, tail: string, unique = false): Promise<void> => {
    const how = sql.raw(`create ${unique ? 'unique ' : ''}index ${concurrently ? 'concurrently ' : ''}if not exists`);
    await sql`${how} ${sql.id(name)} on ${sql.id(p.name)} ${sql.raw(tail)}`.execute(db);
    built.push(name);
  };
  for (const { parent, definition } of await unattachedParentIndexes(db, p.name)) {
    // "CREATE [UNIQUE] INDEX parent ON ONLY public.audit_entries USING …": the same definition, on this partition (a
    // unique parent index attaches only a unique one).
    const tail = definition.replace(/^CREATE (UNIQUE )?INDEX \S+ ON ONLY \S+ /, '');
    const name = `${p.name}_${parent.replace(/^audit_entries_/, '')}`;
    if (!have.has(name)) await create(name, tail, definition.startsWith('CREATE UNIQUE '));
    await sql`alter index ${sql.id(parent)} attach partition ${sql.id(name)}`.execute(db);
  }
  if (closed(p, now)) {
    for (const { suffix, definition } of CLOSED_PARTITION_INDEXES) {
      const name = `${p.name}_${suffix}`;
      if (!have.has(name)) await create(name, definition);
    }
  }
  return built;
}

/**
 * Once the unique time key of migration 0022 is valid on the parent (built and attached on every partition), the
 * primary key (id, ts) and the (ts desc, id desc) index it replaces are dropped: catalog work under a short ACCESS
 * EXCLUSIVE lock of the parent and its partitions, given up (and tried again at the next run) if a query holds them
 * longer than `lock_timeout`. Answers whether it dropped them.
 */
async function retireReplacedIndexes(db: AnyDb): Promise<boolean> {
  const { rows } = await sql<{ ready: boolean }>`select
      exists (select 1 from pg_index i join pg_class c on c.oid = i.indexrelid where c.relname = ${AUDIT_TIME_KEY} and i.indisvalid)
      and exists (select 1 from pg_constraint where conname = 'audit_entries_pkey' and conrelid = 'audit_entries'::regclass) as ready`.execute(db);
  if (!rows[0]?.ready) return false;
  try {
    await db.transaction().execute(async (trx) => {
      await sql`set local lock_timeout = '2s'`.execute(trx);
      await sql`alter table audit_entries drop constraint audit_entries_pkey`.execute(trx);
      await sql`drop index if exists audit_entries_ts_id_idx`.execute(trx);
    });
    return true;
  } catch (error) {
    // 55P03 lock_not_available: a long query holds the table; the next maintenance run tries again.
    if ((error as { code?: unknown })?.code === '55P03') return false;
    throw error;
  }
}

/**
 * Whether the seals' time order exists and is valid (audit verify reads without it, reading the seals table from the
 * range's start for every page). Only reads: an invalid one is left for maintenance to build again.
 */
export async function hasSealTimeOrder(db: AnyDb): Promise<boolean> {
  return (await readIndexes(db, 'audit_seals')).some((i) => i.name === SEAL_TIME_ORDER_INDEX && i.valid);
}

/**
 * Builds the seals' time order if it is missing (migration 0024 leaves it here when the table is large); an invalid one
 * is built again. Null when the seals table is left alone: another session is building an index on it.
 */
async function ensureSealTimeOrder(db: AnyDb, concurrently: boolean): Promise<boolean | null> {
  const have = await indexesOf(db, 'audit_seals', concurrently);
  if (have === null) return null;
  if (have.has(SEAL_TIME_ORDER_INDEX)) return false;
  const how = sql.raw(`create index ${concurrently ? 'concurrently ' : ''}if not exists`);
  await sql`${how} ${sql.id(SEAL_TIME_ORDER_INDEX)} on audit_seals (${sql.raw(SEAL_TIME_ORDER_COLUMNS)})`.execute(db);
  return true;
}

/**
 * The BRIN indexes of a partition, each with its pages per range (128 when not set), as a subquery over `partition`'s
 * valid BRIN indexes: `idx` (regclass) and `ppr`.
 */
function brinIndexesOf(partition: string) {
  return sql`(select i.indexrelid::regclass as idx,
        coalesce((select o.option_value::int from pg_options_to_table(c.reloptions) o where o.option_name = 'pages_per_range'), 128) as ppr
      from pg_index i join pg_class c on c.oid = i.indexrelid join pg_am a on a.oid = c.relam
     where i.indrelid = ${partition}::regclass and c.relkind = 'i' and a.amname = 'brin' and i.indisvalid)`;
}

/**
 * The ranges of `partition`'s BRIN indexes as rows (`idx`, `block`: a range's first page): the full ranges, wholly
 * before the table's end (`full`), or the range rows are being added to, the one holding the table's end (the first
 * range of an empty table).
 */
function brinRanges(partition: string, full: boolean) {
  const pages = sql`pg_relation_size(${partition}::regclass) / current_setting('block_size')::bigint`;
  const series = full ? sql`generate_series(0::bigint, ${pages} / b.ppr - 1)` : sql`generate_series(${pages} / b.ppr, ${pages} / b.ppr)`;
  return sql`(select b.idx, r.n * b.ppr as block from ${brinIndexesOf(partition)} b cross join lateral ${series} as r(n))`;
}

/**
 * Summarizes the full block ranges of a partition's BRIN indexes that have no summary yet, as VACUUM does, and
 * answers how many it summarized; then takes the summary off the range being filled, if it has one. Until
 * summarized, a range matches every search, so the hot partition's bloom filters (docs/decisions/0024) only narrow a
 * search once this or autovacuum (its autosummarize, and VACUUM) has run. The range being filled is left
 * unsummarized: an insert into a summarized range adds its values to the range's bloom filters and writes the whole
 * summary again (formed, compressed and WAL-logged: ≈ 25–75 µs of PostgreSQL CPU per row instead of ≈ 0.3), so
 * summarizing it would make each of its next rows, up to a range's worth (32 pages), pay that after every maintenance
 * run; unsummarized, a search reads its pages instead (docs/decisions/0024, "The range being filled"). Takes SHARE
 * UPDATE EXCLUSIVE on the partition for each call: writes go on.
 */
export async function summarizeBrin(db: AnyDb, partition: string): Promise<number> {
  const r = await sql<{ n: number }>`select coalesce(sum(brin_summarize_range(idx, block)), 0)::int as n from ${brinRanges(partition, true)} s`.execute(db);
  await unsummarizeFillingRange(db, partition);
  return r.rows[0]?.n ?? 0;
}

/**
 * Takes the summary off the block range of a partition's BRIN indexes that rows are being added to, if it has one: a
 * range summarized while filling makes every row inserted into it rewrite its summary (summarizeBrin). CREATE INDEX
 * summarizes the first range even of an empty table, so a new partition starts with that range summarized; this
 * takes it off. A no-op for a range without a summary.
 */
async function unsummarizeFillingRange(db: AnyDb, partition: string): Promise<void> {
  await sql`select brin_desummarize_range(idx, block) from ${brinRanges(partition, false)} s`.execute(db);
}

/**
 * Seals of batches whose rows all lie before `before` (their partitions were dropped) are deleted; the newest deleted
 * seal of each writer stays as that chain's anchor (audit_seal_anchors), so the verifier still checks the next seal's
 * link instead of reporting the retention cut as a deleted batch.
 */
async function forgetSeals(db: AnyDb, before: Date): Promise<void> {
  const at = before.toISOString();
  await sql`insert into audit_seal_anchors (writer_id, seq, hash)
      select distinct on (writer_id) writer_id, seq, hash from audit_seals
       where max_ts < ${at}::timestamptz order by writer_id, seq desc
    on conflict (writer_id) do update set seq = excluded.seq, hash = excluded.hash where audit_seal_anchors.seq < excluded.seq`.execute(db);
  await sql`delete from audit_seals where max_ts < ${at}::timestamptz`.execute(db);
}

/**
 * Idempotent: creates today's partition and `monthsAhead` days ahead, builds the indexes closed partitions lack (and
 * the parent's, attached, on partitions older than migration 0017), summarizes the open partitions' BRIN ranges, and drops partitions whose whole range ended more
 * than `retentionDays` ago, with the seals of batches entirely in them. Partitions not named by this module are left
 * alone. Index builds on PostgreSQL are concurrent: writes into the partition are never blocked.
 */
export async function maintainPartitions(db: AnyDb, opts: PartitionMaintenanceOptions): Promise<PartitionMaintenanceResult> {
  if (!Number.isInteger(opts.monthsAhead) || opts.monthsAhead < 0) throw new TypeError('monthsAhead must be a non-negative integer');
  if (!Number.isInteger(opts.retentionDays) || opts.retentionDays < 1) throw new TypeError('retentionDays must be a positive integer');
  const now = opts.now ?? new Date();
  const concurrently = opts.concurrently ?? true;
  const created: string[] = [];
  for (let i = 0; i <= opts.monthsAhead; i++) {
    const day = dayStart(now, i);
    if (await createDayPartition(db, day)) created.push(dayPartitionName(day));
  }
  const cutoff = now.getTime() - opts.retentionDays * DAY_MS;
  const dropped: string[] = [];
  const indexed: string[] = [];
  const busy: string[] = [];
  let summarized = 0;
  for (const p of await listPartitions(db)) {
    if (p.to.getTime() <= cutoff) {
      await sql`drop table if exists ${sql.id(p.name)}`.execute(db);
      dropped.push(p.name);
    } else {
      const built = await indexPartition(db, p, now, concurrently);
      if (built === null) busy.push(p.name);
      else indexed.push(...built);
      if (!closed(p, now)) summarized += await summarizeBrin(db, p.name);
    }
  }
  if (dropped.length > 0) await forgetSeals(db, (await listPartitions(db))[0]?.from ?? new Date(cutoff));
  const retired = await retireReplacedIndexes(db);
  const sealOrder = await ensureSealTimeOrder(db, concurrently);
  if (sealOrder === null) busy.push('audit_seals');
  return { created, dropped, indexed, busy, summarized, retired, sealOrder: sealOrder === true };
}

/**
 * Whether another session is building an index on the table now (CREATE INDEX, REINDEX). Its index is invalid until
 * the build ends, which is what an interrupted build leaves too: taken for one, it would be dropped and built again,
 * undoing that session's work. The progress view shows the table of another role's build only to a role allowed to
 * read its statistics (pg_read_all_stats).
 */
async function indexBuildInProgress(db: AnyDb, table: string): Promise<boolean> {
  const { rows } = await sql<{ building: boolean }>`select exists (
      select 1 from pg_stat_progress_create_index
       where datid = (select oid from pg_database where datname = current_database()) and relid = ${table}::regclass
         and pid <> pg_backend_pid()) as building`.execute(db);
  return rows[0]?.building === true;
}
