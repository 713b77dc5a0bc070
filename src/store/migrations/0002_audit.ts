// Migration 0002: the audit log table, range-partitioned by month on ts, with the indexes the audit search uses (docs/audit.md).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** Months created ahead at migration time (the config default of audit.partitions.months_ahead); the worker keeps extending. */
const MONTHS_AHEAD = 3;

async function up(db: AnyDb): Promise<void> {
  // No default partition: a row for a month without a partition fails loudly (the writer then
  // creates it) instead of landing in a default partition that blocks creating that month later.
  await sql`create table audit_entries (
    id uuid not null,
    ts timestamptz not null,
    request_id text not null,
    channel text not null check (channel in ('http','pgwire','mcp','admin')),
    identity_id integer,
    admin_user_id integer,
    source_id text,
    operation text,
    method text,
    path text,
    sql_fingerprint text,
    sql_normalized text,
    tables text[] not null default '{}',
    decision text not null check (decision in ('allow','deny','require_approval','error')),
    reasons text[] not null default '{}',
    policy_ids integer[] not null default '{}',
    approval_id integer,
    status integer not null,
    upstream_status integer,
    cache text check (cache in ('hit','miss','bypass')),
    redactions integer not null default 0,
    bytes_in bigint not null default 0,
    bytes_out bigint not null default 0,
    duration_ms double precision not null default 0,
    client_ip text,
    action text,
    target jsonb,
    changes jsonb,
    error_code text,
    primary key (id, ts)
  ) partition by range (ts)`.execute(db);

  // Newest-first keyset pagination and each filter combined with the time order.
  await sql`create index audit_entries_ts_id_idx on audit_entries (ts desc, id desc)`.execute(db);
  await sql`create index audit_entries_identity_ts_idx on audit_entries (identity_id, ts desc)`.execute(db);
  await sql`create index audit_entries_source_ts_idx on audit_entries (source_id, ts desc)`.execute(db);
  await sql`create index audit_entries_channel_ts_idx on audit_entries (channel, ts desc)`.execute(db);
  await sql`create index audit_entries_decision_ts_idx on audit_entries (decision, ts desc)`.execute(db);
  await sql`create index audit_entries_approval_idx on audit_entries (approval_id) where approval_id is not null`.execute(db);
  await sql`create index audit_entries_request_idx on audit_entries (request_id)`.execute(db);

  // The current month and the next ones, so inserts work before the worker first runs.
  await sql`do $$
    declare m date;
    begin
      for i in 0..${sql.lit(MONTHS_AHEAD)} loop
        m := (date_trunc('month', now() at time zone 'UTC') + make_interval(months => i))::date;
        execute format(
          'create table if not exists %I partition of audit_entries for values from (%L) to (%L)',
          'audit_entries_p' || to_char(m, 'YYYYMM'),
          m::text || ' 00:00:00+00',
          (m + interval '1 month')::date::text || ' 00:00:00+00');
      end loop;
    end $$`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop table if exists audit_entries`.execute(db);
}

export const audit: Migration = { up, down };
