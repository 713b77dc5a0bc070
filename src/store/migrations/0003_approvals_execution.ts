// Migration 0003: the execution claim of approvals (spec §3), so crash recovery can tell "never started" from "outcome unknown" (docs/approvals.md).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  // Set once, atomically (WHERE execution_started_at IS NULL), by whoever executes an approved request.
  await sql`alter table approvals add column execution_started_at timestamptz`.execute(db);
  // Recovery scans only approved rows (decided, no outcome yet): a small partial index keeps that cheap.
  await sql`create index approvals_approved_idx on approvals (decided_at) where status = 'approved'`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop index if exists approvals_approved_idx`.execute(db);
  await sql`alter table approvals drop column if exists execution_started_at`.execute(db);
}

export const approvalsExecution: Migration = { up, down };
