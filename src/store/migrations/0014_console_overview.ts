// Migration 0014: what the console's overview reads cheaply (docs/console.md "Overview"): cache hits and lookups in the per-minute audit rollups, and the newest pending approvals by an index.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  // Minutes rolled up before this migration count no cache lookups (their cache hit ratio reads as unknown).
  await sql`alter table alert_rollups add column cache_hits bigint not null default 0, add column cache_lookups bigint not null default 0`.execute(db);
  await sql`create index approvals_pending_created_idx on approvals (created_at desc, id desc) where status = 'pending'`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop index if exists approvals_pending_created_idx`.execute(db);
  await sql`alter table alert_rollups drop column if exists cache_hits, drop column if exists cache_lookups`.execute(db);
}

export const consoleOverview: Migration = { up, down };
