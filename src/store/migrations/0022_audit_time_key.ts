// Migration 0022: one unique key (ts, id) serves the audit store's time order and duplicate detection, in place of the primary key (id, ts) and the (ts desc, id desc) index: one B-tree insert less per row (docs/decisions/0031).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** The key that replaces both (src/audit/partitions.ts retires the old ones once it is valid, by this name). */
const AUDIT_TIME_KEY = 'audit_entries_ts_id_key';

/**
 * A store without audit rows gets the key now (every partition is empty: nothing to build). A store holding rows
 * gets it `ON ONLY` the parent, catalog work only: partition maintenance builds it concurrently on each partition,
 * attaches it, and once the parent's key is valid drops the primary key and the time index it replaces
 * (src/audit/partitions.ts), so writes are never blocked by a build. Until then both serve.
 */
async function up(db: AnyDb): Promise<void> {
  const { rows } = await sql<{ empty: boolean }>`select not exists (select 1 from audit_entries) as empty`.execute(db);
  if (rows[0]?.empty) {
    await sql`alter table audit_entries drop constraint audit_entries_pkey`.execute(db);
    await sql`drop index audit_entries_ts_id_idx`.execute(db);
    await sql`create unique index ${sql.id(AUDIT_TIME_KEY)} on audit_entries (ts, id)`.execute(db);
  } else {
    await sql`create unique index ${sql.id(AUDIT_TIME_KEY)} on only audit_entries (ts, id)`.execute(db);
  }
}

/** Back to the primary key (id, ts) and the time index, built over the stored rows (this blocks writes while it runs). */
async function down(db: AnyDb): Promise<void> {
  const { rows } = await sql<{ has: boolean }>`select exists (select 1 from pg_constraint where conname = 'audit_entries_pkey' and conrelid = 'audit_entries'::regclass) as has`.execute(db);
  if (!rows[0]?.has) {
    await sql`alter table audit_entries add primary key (id, ts)`.execute(db);
    await sql`create index if not exists audit_entries_ts_id_idx on audit_entries (ts desc, id desc)`.execute(db);
  }
  await sql`drop index if exists ${sql.id(AUDIT_TIME_KEY)}`.execute(db);
}

export const auditTimeKey: Migration = { up, down };
