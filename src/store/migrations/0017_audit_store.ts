// Migration 0017: the audit store redesigned for its write rate (docs/decisions/0024): daily partitions with hot-path indexes only, full search indexes per closed partition, and the batch seals of the tamper-evident chain.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** Days created ahead at migration time (the config default of audit.partitions.months_ahead); the worker keeps extending. */
const DAYS_AHEAD = 3;

/** The secondary indexes of 0002: a parent's index is cloned into every new partition, so they cannot stay on the parent. */
const PARENT_SECONDARY_INDEXES = [
  'audit_entries_identity_ts_idx', 'audit_entries_source_ts_idx', 'audit_entries_channel_ts_idx',
  'audit_entries_decision_ts_idx', 'audit_entries_approval_idx', 'audit_entries_request_idx',
];

/**
 * Everything here is catalog work or touches empty tables: it runs inside the migration transaction without building
 * an index over stored rows. Dropping the parent indexes drops their partitions' copies; the worker's partition
 * maintenance builds the per-partition search indexes again with CREATE INDEX CONCURRENTLY, so a large store is never
 * locked against writes for a build (src/audit/partitions.ts).
 */
async function up(db: AnyDb): Promise<void> {
  for (const name of PARENT_SECONDARY_INDEXES) await sql`drop index if exists ${sql.id(name)}`.execute(db);

  // Empty monthly partitions (a fresh store, months created ahead) give way to daily ones; a month holding rows stays
  // as it is, a closed partition from the maintainer's point of view.
  await sql`do $$
    declare p record; has_rows boolean;
    begin
      for p in select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
                where i.inhparent = 'audit_entries'::regclass and c.relname ~ '^audit_entries_p[0-9]{6}$' loop
        execute format('lock table %I in access exclusive mode', p.relname);
        execute format('select exists (select 1 from %I)', p.relname) into has_rows;
        if not has_rows then execute format('drop table %I', p.relname); end if;
      end loop;
    end $$`.execute(db);

  // Indexes every partition carries, the hot one included; "on only": partitions that exist now get theirs from the
  // maintainer (built concurrently, then attached), new partitions get them when created.
  // Non-allow decisions are the few rows the "decision" filter looks for: partial, so allowed rows pay nothing.
  await sql`create index audit_entries_decision_idx on only audit_entries (ts desc, id desc) where decision <> 'allow'`.execute(db);
  // BRIN bloom filters per 32 pages for the hot partition's identity, source and request id searches: an insert into
  // the block range being filled costs a revmap lookup; autovacuum summarizes each range once it is full.
  await sql`create index audit_entries_filter_brin on only audit_entries using brin (
      identity_id int4_bloom_ops, source_id text_bloom_ops, request_id text_bloom_ops(n_distinct_per_range = 1000))
    with (pages_per_range = 32, autosummarize = on)`.execute(db);

  await sql`do $$
    declare d date;
    begin
      for i in 0..${sql.lit(DAYS_AHEAD)} loop
        d := (date_trunc('day', now() at time zone 'UTC') + make_interval(days => i))::date;
        if to_regclass('audit_entries_p' || to_char(d, 'YYYYMM')) is null then
          execute format(
            'create table if not exists %I partition of audit_entries for values from (%L) to (%L)',
            'audit_entries_p' || to_char(d, 'YYYYMMDD'), d::text || ' 00:00:00+00', (d + 1)::text || ' 00:00:00+00');
        end if;
      end loop;
    end $$`.execute(db);

  // One seal per stored batch, chained per writer (docs/audit.md "Tamper evidence"). ids and digests list the batch's
  // rows in order; they are never compressed (random bytes) and live out of line.
  await sql`create table audit_seals (
    writer_id uuid not null,
    seq bigint not null,
    prev_seq bigint not null,
    prev_hash bytea not null,
    hash bytea not null,
    row_count integer not null,
    min_ts timestamptz not null,
    max_ts timestamptz not null,
    ids uuid[] not null,
    digests bytea not null,
    sealed_at timestamptz not null default now(),
    primary key (writer_id, seq)
  )`.execute(db);
  await sql`alter table audit_seals alter column ids set storage external, alter column digests set storage external`.execute(db);
  await sql`create index audit_seals_max_ts_idx on audit_seals (max_ts)`.execute(db);
  // The newest seal of each chain removed with its partitions (retention): the next seal links to it.
  await sql`create table audit_seal_anchors (writer_id uuid primary key, seq bigint not null, hash bytea not null)`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop table if exists audit_seal_anchors`.execute(db);
  await sql`drop table if exists audit_seals`.execute(db);
  await sql`drop index if exists audit_entries_filter_brin`.execute(db);
  await sql`drop index if exists audit_entries_decision_idx`.execute(db);
  await sql`create index audit_entries_identity_ts_idx on audit_entries (identity_id, ts desc)`.execute(db);
  await sql`create index audit_entries_source_ts_idx on audit_entries (source_id, ts desc)`.execute(db);
  await sql`create index audit_entries_channel_ts_idx on audit_entries (channel, ts desc)`.execute(db);
  await sql`create index audit_entries_decision_ts_idx on audit_entries (decision, ts desc)`.execute(db);
  await sql`create index audit_entries_approval_idx on audit_entries (approval_id) where approval_id is not null`.execute(db);
  await sql`create index audit_entries_request_idx on audit_entries (request_id)`.execute(db);
}

export const auditStore: Migration = { up, down };
