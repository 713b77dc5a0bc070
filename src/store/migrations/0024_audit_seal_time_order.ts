// Migration 0024: seals in time order, (min_ts, writer_id, seq), which `audit verify` reads them in to hold only the rows of open seals (docs/decisions/0034).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';
import { SEAL_TIME_ORDER_INDEX, SEAL_TIME_ORDER_COLUMNS } from '../../audit/partitions.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * The build reads the whole seals table while seal inserts (and so the writer's batches) wait: 1.6–2.6 s for 1M seals
 * of 500 rows (7.8 GB, one to a page; a store of 500M rows) in the page cache, 3.8 s from disk (docs/decisions/0034).
 * Built here when the table's heap is under 256 MB (≈ 32,000 such seals, a wait of ≈ 70 ms); past that partition
 * maintenance builds it concurrently, and verify reads seals without it until then (2.3 s a page of 500 at 1M seals).
 */
async function up(db: AnyDb): Promise<void> {
  const { rows } = await sql<{ small: boolean }>`select pg_relation_size('audit_seals') < 256 * 1024 * 1024 as small`.execute(db);
  if (rows[0]?.small) await sql`create index if not exists ${sql.id(SEAL_TIME_ORDER_INDEX)} on audit_seals (${sql.raw(SEAL_TIME_ORDER_COLUMNS)})`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop index if exists ${sql.id(SEAL_TIME_ORDER_INDEX)}`.execute(db);
}

export const auditSealTimeOrder: Migration = { up, down };
