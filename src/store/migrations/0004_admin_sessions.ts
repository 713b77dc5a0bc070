// Migration 0004: admin sessions in the control store, for the embedded default (in-process coordination) so a restart keeps admins signed in (docs/admin-auth.md).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  // One row per session: the record as the coordination store would hold it, and its idle/absolute deadline.
  await sql`create table admin_sessions (id text primary key, record text not null, expires_at timestamptz not null)`.execute(db);
  await sql`create index admin_sessions_expires_at_idx on admin_sessions (expires_at)`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop table if exists admin_sessions`.execute(db);
}

export const adminSessions: Migration = { up, down };
