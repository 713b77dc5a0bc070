// Migration 0008: alert rules, their firing history, per-minute audit rollups and the reach history of first_seen (docs/alerts.md).
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  // Rules live in the control store, not in configuration (spec §9). The evaluator's state sits on the rule row.
  await sql`create table alert_rules (
    id serial primary key,
    name text not null unique check (char_length(name) between 1 and 128),
    description text not null default '',
    condition_type text not null,
    threshold double precision not null,
    comparator text not null check (comparator in ('>','>=','<','<=','==')),
    identity_id integer,
    source_id text,
    notification_channel text not null check (notification_channel in ('log','slack','webhook')),
    notification_target text not null default '',
    webhook_secret bytea,
    window_seconds integer not null check (window_seconds between 60 and 86400),
    enabled boolean not null default true,
    state text not null default 'ok' check (state in ('ok','firing','resolved')),
    state_since timestamptz,
    last_value double precision,
    last_evaluated_at timestamptz,
    last_tick bigint not null default 0,
    last_notified_at timestamptz,
    last_delivery_error text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
  )`.execute(db);

  await sql`create table alert_events (
    id bigserial primary key,
    rule_id integer not null references alert_rules(id) on delete cascade,
    ts timestamptz not null default now(),
    kind text not null check (kind in ('firing','resolved','repeat')),
    value double precision not null,
    threshold double precision not null,
    details jsonb not null default '{}',
    notified boolean not null default false,
    delivery_status text not null default 'none' check (delivery_status in ('none','pending','delivered','failed')),
    delivery_error text,
    delivered_at timestamptz
  )`.execute(db);
  await sql`create index alert_events_rule_ts_idx on alert_events (rule_id, ts desc)`.execute(db);

  // One row per closed minute and scope key: identity_key 0 = every identity, -1 = no identity;
  // source_key '*' = every source, '' = no source (a source id never contains '*').
  await sql`create table alert_rollups (
    minute timestamptz not null,
    identity_key integer not null,
    source_key text not null,
    requests bigint not null,
    errors bigint not null,
    denials bigint not null,
    rate_limited bigint not null,
    redactions bigint not null,
    latency_hist bigint[] not null,
    primary key (identity_key, source_key, minute)
  )`.execute(db);
  await sql`create index alert_rollups_minute_idx on alert_rollups (minute)`.execute(db);

  // first_seen: the latest run of reaches of one identity to one source (object '') or table, and when that run began.
  await sql`create table alert_reach (
    identity_id integer not null,
    source_id text not null,
    object text not null,
    new_since timestamptz not null,
    last_seen timestamptz not null,
    primary key (identity_id, source_id, object)
  )`.execute(db);
  await sql`create index alert_reach_new_since_idx on alert_reach (new_since)`.execute(db);

  // The rollup watermark: every minute before it is rolled up.
  await sql`create table alert_rollup_state (id boolean primary key default true check (id), watermark timestamptz not null)`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop table if exists alert_rollup_state`.execute(db);
  await sql`drop table if exists alert_reach`.execute(db);
  await sql`drop table if exists alert_rollups`.execute(db);
  await sql`drop table if exists alert_events`.execute(db);
  await sql`drop table if exists alert_rules`.execute(db);
}

export const alerts: Migration = { up, down };
