// Monthly partitions of audit_entries: create the current and next months ahead, drop months past retention (run by the worker).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';

const PARTITION_RE = /^audit_entries_p(\d{4})(\d{2})$/;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

export interface PartitionMaintenanceOptions {
  monthsAhead: number;
  retentionDays: number;
  now?: Date;
}

export interface PartitionMaintenanceResult {
  created: string[];
  dropped: string[];
}

/** First instant of the UTC month `offset` months after the month of `d`. */
export function monthStart(d: Date, offset = 0): Date {
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + offset, 1));
}

export function partitionName(month: Date): string {
  return `audit_entries_p${month.getUTCFullYear()}${String(month.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** Partition names of audit_entries that follow our naming, with their month. */
export async function listPartitions(db: AnyDb): Promise<{ name: string; month: Date }[]> {
  const result = await sql<{ name: string }>`select c.relname as name from pg_inherits i
      join pg_class c on c.oid = i.inhrelid
     where i.inhparent = 'audit_entries'::regclass
     order by c.relname`.execute(db);
  const out: { name: string; month: Date }[] = [];
  for (const { name } of result.rows) {
    const m = PARTITION_RE.exec(name);
    if (m) out.push({ name, month: new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, 1)) });
  }
  return out;
}

/** Creates the partition of one month if it does not exist; true when this call created it. */
export async function createMonthPartition(db: AnyDb, month: Date): Promise<boolean> {
  const from = monthStart(month);
  const to = monthStart(month, 1);
  const name = partitionName(from);
  const exists = await sql<{ r: string | null }>`select to_regclass(${name}) as r`.execute(db);
  if (exists.rows[0]?.r) return false;
  try {
    // Identifiers and bounds come from Date arithmetic, never from input.
    await sql`create table if not exists ${sql.id(name)} partition of audit_entries
      for values from (${sql.lit(from.toISOString())}) to (${sql.lit(to.toISOString())})`.execute(db);
    return true;
  } catch (error) {
    // Another worker created it between the check and the statement.
    const code = (error as { code?: unknown }).code;
    if (code === '42P07' || code === '23505') return false;
    throw error;
  }
}

/** Creates the partitions that rows with these timestamps need (the writer's fallback when maintenance is late). */
export async function ensurePartitionsFor(db: AnyDb, dates: readonly Date[]): Promise<void> {
  const months = new Map<string, Date>();
  for (const d of dates) months.set(partitionName(monthStart(d)), monthStart(d));
  for (const month of months.values()) await createMonthPartition(db, month);
}

/**
 * Idempotent: creates the current month and `monthsAhead` following months, and drops partitions
 * whose whole month ended more than `retentionDays` ago. Partitions not named by this module are
 * left alone.
 */
export async function maintainPartitions(db: AnyDb, opts: PartitionMaintenanceOptions): Promise<PartitionMaintenanceResult> {
  if (!Number.isInteger(opts.monthsAhead) || opts.monthsAhead < 0) throw new TypeError('monthsAhead must be a non-negative integer');
  if (!Number.isInteger(opts.retentionDays) || opts.retentionDays < 1) throw new TypeError('retentionDays must be a positive integer');
  const now = opts.now ?? new Date();
  const created: string[] = [];
  for (let i = 0; i <= opts.monthsAhead; i++) {
    const month = monthStart(now, i);
    if (await createMonthPartition(db, month)) created.push(partitionName(month));
  }
  const cutoff = now.getTime() - opts.retentionDays * 86_400_000;
  const dropped: string[] = [];
  for (const p of await listPartitions(db)) {
    if (monthStart(p.month, 1).getTime() <= cutoff) {
      await sql`drop table if exists ${sql.id(p.name)}`.execute(db);
      dropped.push(p.name);
    }
  }
  return { created, dropped };
}
