// Migration 0009: the source catalog (docs/catalog.md): per-source catalog state, versioned snapshots, drift changes and annotations.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  // One row per source that the catalog knows of: its per-source settings and the last on-demand request.
  await sql`create table catalog_sources (
    source_id text primary key references data_sources (source_id) on delete cascade on update cascade,
    drift_protection boolean not null default true,
    scan_requested_at timestamptz,
    updated_at timestamptz not null default now()
  )`.execute(db);
  // Every scan, successful or not; the structure itself is kept for the newest snapshots only (the diff needs the previous one).
  await sql`create table catalog_snapshots (
    id bigserial primary key,
    source_id text not null references data_sources (source_id) on delete cascade on update cascade,
    version integer not null,
    status text not null check (status in ('ok', 'failed')),
    trigger text not null check (trigger in ('save', 'schedule', 'demand')),
    worker_id text not null,
    started_at timestamptz not null,
    finished_at timestamptz not null default now(),
    source_updated_at timestamptz,
    truncated boolean not null default false,
    truncated_by text,
    node_count integer not null default 0,
    change_count integer not null default 0,
    error text,
    structure jsonb,
    unique (source_id, version)
  )`.execute(db);
  await sql`create index catalog_snapshots_source_idx on catalog_snapshots (source_id, id desc)`.execute(db);
  // Drift: one row per change; change_id is derived from what changed, so the same change keeps its id.
  await sql`create table catalog_changes (
    id bigserial primary key,
    source_id text not null references data_sources (source_id) on delete cascade on update cascade,
    change_id text not null,
    snapshot_id bigint not null references catalog_snapshots (id) on delete cascade,
    kind text not null check (kind in ('added', 'removed', 'changed', 'type_changed')),
    object_type text not null,
    path text not null,
    detail jsonb not null default '{}'::jsonb,
    protected boolean not null default false,
    created_at timestamptz not null default now(),
    acknowledged_at timestamptz,
    acknowledged_by text,
    unique (source_id, change_id)
  )`.execute(db);
  await sql`create index catalog_changes_open_idx on catalog_changes (source_id) where acknowledged_at is null`.execute(db);
  // Operator classifications: a path (schema.table.column, quoted like PostgreSQL identifiers) and its tag.
  await sql`create table catalog_annotations (
    source_id text not null references data_sources (source_id) on delete cascade on update cascade,
    path text not null,
    classification text not null check (char_length(classification) between 1 and 128),
    updated_by text,
    updated_at timestamptz not null default now(),
    primary key (source_id, path)
  )`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop table if exists catalog_annotations`.execute(db);
  await sql`drop table if exists catalog_changes`.execute(db);
  await sql`drop table if exists catalog_snapshots`.execute(db);
  await sql`drop table if exists catalog_sources`.execute(db);
}

export const catalog: Migration = { up, down };
