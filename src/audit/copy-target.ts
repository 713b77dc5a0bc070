// Where a fresh audit batch is copied: straight into its day's partition when every row falls in that day, past the parent's routing (docs/decisions/0035).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { AUDIT_COPY_BINARY_STATEMENT } from './copy-binary.js';
import { ttlCache } from '../util/ttl-cache.js';
import { AUDIT_FIELDS } from './entry.js';
import { dayPartitionName, dayStart } from './partitions.js';

/** How long a day's answer is kept: a partition created, detached or changed since is seen within this. */
const RECHECK_MS = 60_000;
/** Days remembered at once (a batch's day is today's, or yesterday's around midnight). */
const MAX_DAYS = 8;
const ALL_COLUMNS = AUDIT_FIELDS.join(',');

/** The COPY statement of a day: its partition's, or the parent's, which routes each row (and says when a day has no partition). */
export interface CopyTarget {
  readonly statement: string;
  /** The partition copied into straight (schema-qualified), or null for the parent. */
  readonly partition: string | null;
  /**
   * For a partition: a statement run after the COPY in its transaction that fails with 22012 unless the table is still
   * a partition of audit_entries. The COPY's lock keeps a plain DETACH waiting until the transaction ends, so a table
   * detached before it is caught here, and its rows are rolled back rather than kept outside the log.
   */
  readonly guard: string | null;
}

const PARENT: CopyTarget = { statement: AUDIT_COPY_BINARY_STATEMENT, partition: null, guard: null };

/**
 * Answers where a batch is copied. PostgreSQL routing each row of a COPY into the parent to its partition costs ≈ 4% of
 * the backend's instructions per row; a batch whose rows all fall in one UTC day goes straight into that day's
 * partition instead. Only a table the catalog lists as a partition of audit_entries (attached, not being detached, in
 * the parent's schema, named by schema) that this role may insert into is used, and its columns are named in the
 * statement unless they are AUDIT_FIELDS in order (then the list is left out, which PostgreSQL parses per statement).
 * A COPY into a partition skips what applies only to the parent: statement triggers and row security on it. Anything
 * else, or a batch spanning two days, uses the parent, whose COPY routes, checks bounds and reports a missing partition
 * as before. A day's answer is kept a minute; the COPY's guard covers that minute.
 */
export class AuditCopyTargets {
  readonly #byDay = ttlCache<number, CopyTarget>({ max: MAX_DAYS, ttl: RECHECK_MS });

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  constructor(private readonly db: Kysely<any>) {}

  /** The target of a batch whose rows' times run from `minMs` to `maxMs`. */
  async targetFor(minMs: number, maxMs: number): Promise<CopyTarget> {
    const day = dayStart(new Date(minMs)).getTime();
    if (!Number.isFinite(day) || maxMs >= dayStart(new Date(minMs), 1).getTime() || maxMs < day) return PARENT;
    const known = this.#byDay.get(day);
    if (known !== undefined) return known;
    const target = await this.#lookup(day);
    this.#byDay.set(day, target);
    return target;
  }

  /** Forgets what is known of every day: a statement that failed against its partition is looked up again. */
  forget(): void {
    this.#byDay.clear();
  }

  async #lookup(day: number): Promise<CopyTarget> {
    // The name comes from Date arithmetic, never from input; it is still passed as a parameter.
    const name = dayPartitionName(new Date(day));
    const { rows } = await sql<{ oid: number; qualified: string; columns: string }>`
      select c.oid::int8 as oid, format('%I.%I', n.nspname, c.relname) as qualified,
             string_agg(a.attname, ',' order by a.attnum) as columns
        from pg_inherits i
        join pg_class c on c.oid = i.inhrelid
        join pg_namespace n on n.oid = c.relnamespace
        join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
       where i.inhparent = 'audit_entries'::regclass and not i.inhdetachpending
         and c.relname = ${name} and c.relkind = 'r'
         and c.relnamespace = (select relnamespace from pg_class where oid = 'audit_entries'::regclass)
         and has_table_privilege(c.oid, 'INSERT')
       group by c.oid, n.nspname, c.relname`.execute(this.db);
    const found = rows[0];
    if (found === undefined) return PARENT;
    const list = found.columns === ALL_COLUMNS ? '' : ` (${AUDIT_FIELDS.join(', ')})`;
    // The table by its schema (not whatever the search_path finds first) and the guard by its oid: both name exactly
    // the partition the catalog answered for.
    const oid = Number(found.oid);
    return {
      statement: `copy ${found.qualified}${list} from stdin with (format binary)`,
      partition: found.qualified,
      // A cursor MOVEd over returns no rows, so no row description in the COPY's answer, and needs no table privilege.
      guard: `declare gatehouse_partition_guard cursor for select 1 / (select count(*)::int from pg_inherits where inhrelid = ${oid}::oid and inhparent = 'audit_entries'::regclass and not inhdetachpending); move gatehouse_partition_guard; close gatehouse_partition_guard`,
    };
  }
}
