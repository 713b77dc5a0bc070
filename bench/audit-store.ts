// Audit store benchmark (`npm run bench:audit-store`): PostgreSQL backend CPU per stored audit row with the table at 1M and 10M rows, the design before docs/decisions/0024 against it, in one run; audit search latency for the console's common filters at 10M rows; EXPLAIN of those searches.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { AUDIT_FIELDS, newAuditId, isoTimestamp, type AuditEntry } from '../src/audit/entry.js';
import { auditBinaryBatch, binaryParts } from '../src/audit/copy-binary.js';
import { AUDIT_COPY_PART_ROWS, copySealed } from '../src/audit/insert.js';
import { AuditCopyTargets } from '../src/audit/copy-target.js';
import { SealChain } from '../src/audit/seal.js';
import { searchAudit, type AuditFilters } from '../src/audit/search.js';
import { dayStart, dayPartitionName, ensurePartitionsFor, maintainPartitions, summarizeBrin } from '../src/audit/partitions.js';
import type { AuditDatabase } from '../src/audit/schema.js';
import { poolCopyIn } from '../src/store/copy.js';
import { migrateToLatest } from '../src/store/migrate.js';
import { migrations } from '../src/store/migrations/index.js';
import { median, quantile } from './stats.js';

const PG = { host: process.env.BENCH_PG_HOST ?? '127.0.0.1', port: Number(process.env.BENCH_PG_PORT ?? 5432), user: 'postgres' };
/** Table sizes at which the store CPU is measured; the last is the one searched. */
const SIZES = (process.env.BENCH_AUDIT_STORE_ROWS ?? '1000000,10000000').split(',').map(Number);
/** Days the filled rows span, ending now (daily partitions in the new design, one or two months in the old). */
const DAYS = Number(process.env.BENCH_AUDIT_STORE_DAYS ?? 20);
/** Rows stored through the writer's path per measurement (batches of 500, audit.batch_size's default). */
const MEASURE_N = Number(process.env.BENCH_AUDIT_STORE_N ?? 40_000);
const BATCH = 500;
const ROUNDS = Number(process.env.BENCH_AUDIT_STORE_ROUNDS ?? 2);
const SEARCHES = Number(process.env.BENCH_AUDIT_STORE_SEARCHES ?? 40);
const DESIGNS = (process.env.BENCH_AUDIT_STORE_DESIGNS ?? 'old,new').split(',') as ('old' | 'new')[];
/** The old design is filled and measured up to this size only (its fill is the slow part of a run on a shared machine). */
const OLD_MAX = Number(process.env.BENCH_AUDIT_STORE_OLD_MAX ?? Number.POSITIVE_INFINITY);
/**
 * A database of the new design kept between runs (created and filled when missing, never dropped; migrated to the
 * latest migration and maintained at each start): a 10M-row fill is paid once. Its rows keep the times of the run that
 * filled them, so run again the same day.
 */
const KEEP_DB = process.env.BENCH_AUDIT_STORE_DB;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** The migrations before 0017: the design of 0002 (seven B-tree indexes on every partition, monthly partitions). */
const OLD_MIGRATIONS = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '0017'));

const now = Date.now();
const spanStart = dayStart(new Date(now - DAYS * 86_400_000)).getTime();
/** Rows are spread evenly from spanStart to one minute ago; row g (1-based) of `total` is at this time. */
const rowMs = (g: number, total: number): number => spanStart + Math.floor(((now - 60_000 - spanStart) * g) / total);

function liveEntry(i: number): AuditEntry {
  const t = Date.now();
  const wire = i % 3 === 0;
  return {
    id: newAuditId(t), ts: isoTimestamp(t), request_id: newAuditId(t), channel: wire ? 'pgwire' : 'http', identity_id: 1 + (i % 50), admin_user_id: null,
    source_id: `source_${i % 20}`, operation: 'read', method: wire ? null : 'GET', path: wire ? null : `/v1/customers/${i % 5000}`,
    sql_fingerprint: wire ? 'a1b2c3d4e5f60718' : null, sql_normalized: wire ? 'select id, name, email from customers where id = $1' : null,
    tables: wire ? ['public.customers'] : [], decision: i % 100 === 0 ? 'deny' : 'allow', reasons: ['role reader allows GET /v1/**'], policy_ids: [3],
    approval_id: null, status: 200, upstream_status: 200, cache: i % 2 === 0 ? 'hit' : 'miss', redactions: i % 4, bytes_in: 0, bytes_out: 850,
    duration_ms: 3.25, client_ip: '10.1.2.3', action: null, target: null, changes: null, error_code: null,
  };
}

/** Rows g in [a, b] of `total` as one INSERT … SELECT generate_series into `table`: the same shapes as liveEntry, with rarer identities too. */
async function fillRows(db: AnyDb, table: string, a: number, b: number, total: number): Promise<void> {
  const step = (now - 60_000 - spanStart) / total;
  await sql`insert into ${sql.id(table)} (id, ts, request_id, channel, identity_id, source_id, operation, method, path, sql_fingerprint, sql_normalized,
      tables, decision, reasons, policy_ids, status, upstream_status, cache, redactions, bytes_in, bytes_out, duration_ms, client_ip)
    select (lpad(to_hex(ms), 12, '0') || '7' || substr(h, 1, 3) || '8' || substr(h, 4, 15))::uuid, to_timestamp(ms / 1000.0),
      (lpad(to_hex(ms), 12, '0') || '7' || substr(h, 19, 3) || '9' || substr(md5(h), 1, 15))::uuid::text,
      case when g % 3 = 0 then 'pgwire' else 'http' end,
      case when g % 997 = 0 then 1000 + (g % 7) else 1 + (g % 50) end, 'source_' || (g % 20), 'read',
      case when g % 3 = 0 then null else 'GET' end, case when g % 3 = 0 then null else '/v1/customers/' || (g % 5000) end,
      case when g % 3 = 0 then 'a1b2c3d4e5f60718' end, case when g % 3 = 0 then 'select id, name, email from customers where id = $1' end,
      case when g % 3 = 0 then '{public.customers}'::text[] else '{}' end,
      case when g % 100 = 0 then 'deny' when g % 500 = 1 then 'require_approval' when g % 250 = 3 then 'error' else 'allow' end,
      '{"role reader allows GET /v1/**"}', '{3}', 200, 200, case when g % 2 = 0 then 'hit' else 'miss' end, g % 4, 0, 850, 3.25, '10.1.2.3'
    from (select g, md5(g::text) as h, (${spanStart}::bigint + floor(g * ${step}::float8))::bigint as ms from generate_series(${a}::bigint, ${b}::bigint) g) s`.execute(db);
}

/** Which rows of `total` fall in [from, to). */
function rowsIn(from: number, to: number, total: number): [number, number] {
  const step = (now - 60_000 - spanStart) / total;
  const a = Math.max(1, Math.ceil((from - spanStart) / step));
  let b = Math.min(total, Math.ceil((to - spanStart) / step) - 1);
  while (b >= a && rowMs(b, total) >= to) b -= 1;
  return [a, b];
}

/**
 * Fills rows (done, upto] of `total`: partition by partition as a standalone table, loaded then attached, so the
 * indexes are built by sorting (as fast as a fill gets) and end up as the design has them on its partitions.
 */
async function fill(db: AnyDb, design: 'old' | 'new', done: number, upto: number, total: number): Promise<void> {
  const bounds: { name: string; from: number; to: number }[] = [];
  if (design === 'new') {
    for (let d = spanStart; d < now; d += 86_400_000) bounds.push({ name: dayPartitionName(new Date(d)), from: d, to: d + 86_400_000 });
  } else {
    for (let m = new Date(spanStart); m.getTime() < now; m = new Date(Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + 1, 1))) {
      const from = Date.UTC(m.getUTCFullYear(), m.getUTCMonth(), 1);
      const name = `audit_entries_p${m.getUTCFullYear()}${String(m.getUTCMonth() + 1).padStart(2, '0')}`;
      bounds.push({ name, from, to: Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + 1, 1) });
    }
  }
  for (const p of bounds) {
    const [a0, b] = rowsIn(p.from, p.to, total);
    const a = Math.max(a0, done + 1);
    if (a > Math.min(b, upto)) continue;
    const staging = `${p.name}_fill`;
    await sql`create table ${sql.id(staging)} (like audit_entries including defaults including constraints)`.execute(db);
    await sql`alter table ${sql.id(staging)} add constraint bounds check (ts >= ${sql.lit(new Date(p.from).toISOString())} and ts < ${sql.lit(new Date(p.to).toISOString())})`.execute(db);
    await fillRows(db, staging, a, Math.min(b, upto), total);
    const existing = await sql<{ r: string | null }>`select to_regclass(${p.name}) as r`.execute(db);
    const hot = design === 'new' && p.from <= now && now < p.to;
    if (existing.rows[0]?.r && hot) {
      // The new design's hot partition fills as the writer would: into its lean indexes.
      await sql`insert into ${sql.id(p.name)} select * from ${sql.id(staging)}`.execute(db);
      await sql`drop table ${sql.id(staging)}`.execute(db);
    } else if (existing.rows[0]?.r) {
      // Detached, stripped of its indexes, loaded and attached again: the indexes are rebuilt by sorting.
      await sql`alter table audit_entries detach partition ${sql.id(p.name)}`.execute(db);
      const idx = await sql<{ name: string; con: string | null }>`select c.relname as name, k.conname as con from pg_index i join pg_class c on c.oid = i.indexrelid
          left join pg_constraint k on k.conindid = i.indexrelid and k.conrelid = i.indrelid where i.indrelid = ${p.name}::regclass`.execute(db);
      for (const r of idx.rows) {
        if (r.con) await sql`alter table ${sql.id(p.name)} drop constraint ${sql.id(r.con)}`.execute(db);
        else await sql`drop index ${sql.id(r.name)}`.execute(db);
      }
      await sql`insert into ${sql.id(p.name)} select * from ${sql.id(staging)}`.execute(db);
      await sql`drop table ${sql.id(staging)}`.execute(db);
      await sql`alter table audit_entries attach partition ${sql.id(p.name)} for values from (${sql.lit(new Date(p.from).toISOString())}) to (${sql.lit(new Date(p.to).toISOString())})`.execute(db);
    } else {
      await sql`alter table audit_entries attach partition ${sql.id(staging)} for values from (${sql.lit(new Date(p.from).toISOString())}) to (${sql.lit(new Date(p.to).toISOString())})`.execute(db);
      await sql`alter table ${sql.id(staging)} rename to ${sql.id(p.name)}`.execute(db);
    }
  }
  if (design === 'new') {
    // Closed days get their search indexes (the worker's job); BRIN ranges are summarized (autovacuum's).
    await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500, concurrently: false });
  }
  await sql`analyze audit_entries`.execute(db);
}

/**
 * PostgreSQL backend CPU (µs) per row stored through the writer's path: COPY in batches of 500, sealed in the new design,
 * which also copies a batch straight into its day's partition, in parts (docs/decisions/0035).
 */
async function storeCpu(db: AnyDb, copyIn: ReturnType<typeof poolCopyIn>, backendPid: number, design: 'old' | 'new', n: number): Promise<number> {
  const chain = design === 'new' ? new SealChain() : undefined;
  const opts = design === 'new' ? { targets: new AuditCopyTargets(db) } : { partRows: BATCH };
  const t0 = cpuNs(backendPid);
  for (let i = 0; i < n; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, n - i) }, (_, k) => liveEntry(i + k));
    const r = await copySealed(db, copyIn, batch, 60_000, chain, opts);
    if (r.seal) chain!.stored(r.seal);
  }
  return (cpuNs(backendPid) - t0) / 1e3 / n;
}

/** The floor's table: the audit row's columns and NOT NULLs, without an index, a constraint or partitions (created once per run, dropped at its end). */
const FLOOR_TABLE = 'bench_audit_floor';

/**
 * PostgreSQL backend CPU (µs) per row of the floor any design of this row pays: the same rows, encoded the same way and
 * copied the same way (binary COPY, batches of 500 in parts), into a plain heap with nothing to maintain — no index, no
 * CHECK, no seal. A design's µs over this floor's is what its indexes and seals cost on this machine; the ratio moves
 * much less between machines than either figure (docs/decisions/0024).
 */
async function floorCpu(copyIn: ReturnType<typeof poolCopyIn>, backendPid: number, n: number): Promise<number> {
  const statement = `copy ${FLOOR_TABLE} (${AUDIT_FIELDS.join(', ')}) from stdin with (format binary)`;
  const t0 = cpuNs(backendPid);
  for (let i = 0; i < n; i += BATCH) {
    const batch = auditBinaryBatch(Array.from({ length: Math.min(BATCH, n - i) }, (_, k) => liveEntry(i + k)))!;
    await copyIn(binaryParts(batch, AUDIT_COPY_PART_ROWS).map((data) => ({ statement, data })), 60_000);
  }
  return (cpuNs(backendPid) - t0) / 1e3 / n;
}

/**
 * CPU per row the new design defers: BRIN summarization of the hot partition's full ranges, as partition maintenance
 * runs it (autovacuum's autosummarize in production too); the range being filled keeps no summary.
 */
async function deferredCpu(oneDb: AnyDb, backendPid: number, rows: number): Promise<number> {
  const t0 = cpuNs(backendPid);
  await summarizeBrin(oneDb, dayPartitionName(new Date(now)));
  return (cpuNs(backendPid) - t0) / 1e3 / rows;
}

/**
 * CPU time (ns) a process has run, from /proc/<pid>/schedstat: nanosecond resolution, where a search's few ms would be
 * a tick or none in /proc/<pid>/stat, and 40,000 stored rows are read to 0.25 µs a row there.
 */
function cpuNs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

/** Searches on a connection of their own (`searchPid` its backend): wall clock, and that backend's CPU per search. */
async function searches(db: Kysely<AuditDatabase>, raw: AnyDb, searchPid: number): Promise<{ name: string; p50: number; p95: number; cpu: number; n: number }[]> {
  const hotIds = (await sql<{ request_id: string }>`select request_id from audit_entries where ts > now() - interval '1 hour' order by random() limit ${SEARCHES}`.execute(raw)).rows.map((r) => r.request_id);
  const oldIds = (await sql<{ request_id: string }>`select request_id from audit_entries tablesample system (0.01) limit ${SEARCHES}`.execute(raw)).rows.map((r) => r.request_id);
  const cases: { name: string; filters: (i: number) => AuditFilters }[] = [
    { name: 'newest page, no filter', filters: () => ({}) },
    { name: 'time range (last hour)', filters: () => ({ from: new Date(Date.now() - 3_600_000), to: new Date() }) },
    { name: 'time range (a day, a week ago)', filters: () => ({ from: new Date(now - 7 * 86_400_000), to: new Date(now - 6 * 86_400_000) }) },
    { name: 'identity (common, 2% of rows)', filters: (i) => ({ identity_id: 1 + (i % 50) }) },
    { name: 'identity (rare, 0.014%)', filters: (i) => ({ identity_id: 1000 + (i % 7) }) },
    { name: 'identity absent', filters: () => ({ identity_id: 999_999 }) },
    { name: 'source', filters: (i) => ({ source_id: `source_${i % 20}` }) },
    { name: 'decision deny', filters: () => ({ decision: 'deny' }) },
    { name: 'decision require_approval', filters: () => ({ decision: 'require_approval' }) },
    { name: 'request id (last hour)', filters: (i) => ({ request_id: hotIds[i % hotIds.length]! }) },
    { name: 'request id (any day)', filters: (i) => ({ request_id: oldIds[i % oldIds.length]! }) },
    { name: 'identity + last day', filters: (i) => ({ identity_id: 1 + (i % 50), from: new Date(Date.now() - 86_400_000), to: new Date() }) },
  ];
  const out: { name: string; p50: number; p95: number; cpu: number; n: number }[] = [];
  for (const c of cases) {
    await searchAudit(db, { ...c.filters(0), limit: 100 });
    const times: number[] = [];
    const cpu0 = cpuNs(searchPid);
    for (let i = 0; i < SEARCHES; i++) {
      const t0 = performance.now();
      await searchAudit(db, { ...c.filters(i), limit: 100 });
      times.push(performance.now() - t0);
    }
    times.sort((x, y) => x - y);
    const cpu = (cpuNs(searchPid) - cpu0) / 1e6 / SEARCHES;
    out.push({ name: c.name, p50: quantile(times, 0.5), p95: quantile(times, 0.95), cpu, n: times.length });
  }
  return out;
}

async function explainAll(raw: AnyDb): Promise<void> {
  const hot = (await sql<{ request_id: string }>`select request_id from audit_entries where ts > now() - interval '1 hour' limit 1`.execute(raw)).rows[0]?.request_id ?? 'x';
  const cols = 'id, ts, request_id, identity_id, source_id, decision';
  const queries: [string, string][] = [
    ['newest page', `select ${cols} from audit_entries order by ts desc, id desc limit 101`],
    ['time range', `select ${cols} from audit_entries where ts >= now() - interval '1 hour' and ts < now() order by ts desc, id desc limit 101`],
    ['identity', `select ${cols} from audit_entries where identity_id = 7 order by ts desc, id desc limit 101`],
    ['identity rare', `select ${cols} from audit_entries where identity_id = 1003 order by ts desc, id desc limit 101`],
    ['source', `select ${cols} from audit_entries where source_id = 'source_3' order by ts desc, id desc limit 101`],
    ['decision deny', `select ${cols} from audit_entries where decision = 'deny' order by ts desc, id desc limit 101`],
    ['request id (hot)', `select ${cols} from audit_entries where request_id = '${hot}' order by ts desc, id desc limit 101`],
  ];
  for (const [name, q] of queries) {
    const plan = (await sql.raw<{ 'QUERY PLAN': string }>(`explain (analyze, costs off, timing off, summary on) ${q}`).execute(raw)).rows.map((r) => r['QUERY PLAN']);
    // Long Append lists of never-executed partitions add nothing to read.
    console.log(`\n  EXPLAIN ${name}:\n${plan.filter((l) => !l.includes('never executed')).slice(0, 40).map((l) => `    ${l}`).join('\n')}`);
  }
}

const admin = new pg.Client({ ...PG, database: 'postgres' });
await admin.connect();
const created: string[] = [];
const results: Record<string, Record<number, number[]>> = {};
/** Rows a kept database held at start (0: filled by this run). */
let keptRows = 0;
try {
  console.log(`audit store bench: ${DESIGNS.join(' vs ')}, sizes ${SIZES.join(', ')}, ${DAYS} days of rows, ${MEASURE_N} rows stored per measurement in batches of ${BATCH}, ${ROUNDS} rounds`);
  console.log('CPU is the PostgreSQL backend of the writer\'s connection, from /proc/<pid>/schedstat (its time on a CPU, to the nanosecond): robust on this shared 2-core machine, where wall-clock figures are not.');
  const dbs: Record<string, { db: AnyDb; pool: pg.Pool; onePool: pg.Pool; oneDb: AnyDb; copyIn: ReturnType<typeof poolCopyIn>; pid: number; name: string }> = {};
  for (const design of DESIGNS) {
    const kept = design === 'new' && KEEP_DB !== undefined;
    const name = kept ? KEEP_DB! : `gh_bench_as_${design}_${randomBytes(3).toString('hex')}`;
    const there = kept && (await admin.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1;
    if (!there) await admin.query(`create database "${name}"`);
    if (!kept) created.push(name);
    const pool = new pg.Pool({ ...PG, database: name, max: 2 });
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) }) as AnyDb;
    await migrateToLatest(db, design === 'old' ? { migrations: OLD_MIGRATIONS } : {});
    if (design === 'new') await ensurePartitionsFor(db, [new Date(now)]);
    if (there) {
      const t0 = performance.now();
      const r = await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500, concurrently: true });
      const rows = Number((await pool.query('select count(*) from audit_entries')).rows[0].count);
      console.log(`  kept database ${name}: ${rows.toLocaleString('en')} rows, maintained in ${((performance.now() - t0) / 1000).toFixed(0)} s (built ${r.indexed.length} indexes)`);
      keptRows = rows;
    }
    const onePool = new pg.Pool({ ...PG, database: name, max: 1, idleTimeoutMillis: 0 });
    onePool.on('error', () => undefined);
    const oneDb = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: onePool }) }) as AnyDb;
    const pid = (await onePool.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    dbs[design] = { db, pool, onePool, oneDb, copyIn: poolCopyIn(onePool, name), pid, name };
    results[design] = {};
  }
  let done = 0;
  const total = SIZES[SIZES.length - 1]!;
  for (const size of SIZES) {
    // A kept database already past this size cannot be measured at it.
    const active = DESIGNS.filter((d) => (d === 'new' || size <= OLD_MAX) && !(d === 'new' && keptRows > size && size !== total));
    if (active.length === 0) continue;
    for (const design of active) {
      if (design === 'new' && keptRows >= size) continue;
      const t0 = performance.now();
      await fill(dbs[design]!.db, design, done, size, total);
      console.log(`  filled ${design} to ${size.toLocaleString('en')} rows in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    }
    done = size;
    for (const design of active) await storeCpu(dbs[design]!.oneDb, dbs[design]!.copyIn, dbs[design]!.pid, design, 2_000);
    const floor = dbs.new ?? dbs[active[0]!]!;
    await floor.onePool.query(`create table if not exists ${FLOOR_TABLE} (like audit_entries)`);
    await floorCpu(floor.copyIn, floor.pid, 2_000);
    const floorRounds: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const design of active) {
        const d = dbs[design]!;
        const us = await storeCpu(d.oneDb, d.copyIn, d.pid, design, MEASURE_N);
        (results[design]![size] ??= []).push(us);
      }
      // In the same rounds, alternating with the designs: the machine's speed moves within minutes.
      floorRounds.push(await floorCpu(floor.copyIn, floor.pid, MEASURE_N));
    }
    const line = active.map((design) => `${design} ${Math.min(...results[design]![size]!).toFixed(2)} µs/row (rounds ${results[design]![size]!.map((x) => x.toFixed(2)).join(', ')})`).join('; ');
    const ratio = active.length === 2 ? ` → new/old ${(Math.min(...results.new![size]!) / Math.min(...results.old![size]!)).toFixed(2)}` : '';
    console.log(`store CPU at ${size.toLocaleString('en')} rows: ${line}${ratio}  [goal new ≤ 4 µs/row] (load average ${loadavg()[0]!.toFixed(2)})`);
    // Each round's design against the floor measured right after it; the median of those ratios (docs/decisions/0032).
    const overFloor = active
      .map((design) => {
        const ratios = results[design]![size]!.map((us, r) => us / floorRounds[r]!);
        return `${design} ${median(ratios).toFixed(2)}× it (rounds ${ratios.map((x) => x.toFixed(2)).join(', ')})`;
      })
      .join('; ');
    console.log(`  the floor, the same rows into a plain heap (no index, no constraint, no seal): ${Math.min(...floorRounds).toFixed(2)} µs/row (rounds ${floorRounds.map((x) => x.toFixed(2)).join(', ')}); ${overFloor}`);
    if (dbs.new) {
      const hotRows = Number((await dbs.new.onePool.query(`select count(*) from ${dayPartitionName(new Date(now))}`)).rows[0].count);
      console.log(`  new design deferred: BRIN summarization of the hot partition (${hotRows.toLocaleString('en')} rows) ${(await deferredCpu(dbs.new.oneDb, dbs.new.pid, Math.max(hotRows, 1))).toFixed(2)} µs/row`);
    }
  }
  if (dbs.new) {
    // What a closed day's search indexes cost to build once (the maintainer's CREATE INDEX CONCURRENTLY), per row.
    const yesterday = dayPartitionName(new Date(now - 86_400_000));
    const n = Number((await dbs.new.onePool.query(`select count(*) from ${yesterday}`)).rows[0].count);
    const t0 = cpuNs(dbs.new.pid);
    for (const suffix of ['identity_idx', 'source_idx', 'channel_idx', 'request_idx', 'approval_idx']) {
      await dbs.new.onePool.query(`drop index if exists ${yesterday}_${suffix}`);
    }
    await maintainPartitions(dbs.new.oneDb, { monthsAhead: 1, retentionDays: 36_500, concurrently: true });
    console.log(`  new design deferred: building a closed day's five search indexes concurrently (${n.toLocaleString('en')} rows) ${((cpuNs(dbs.new.pid) - t0) / 1e3 / n).toFixed(2)} µs/row`);
  }
  for (const design of DESIGNS) {
    const d = dbs[design]!;
    const rows = Number((await d.pool.query('select count(*) from audit_entries')).rows[0].count);
    console.log(`\nsearch through searchAudit (the admin API's service), ${design} design, ${rows.toLocaleString('en')} rows, newest page of 100, ${SEARCHES} runs each [goal p95 ≤ 100 ms]:`);
    // One connection for the searches, so its backend's CPU is theirs.
    const searchPool = new pg.Pool({ ...PG, database: d.name, max: 1, idleTimeoutMillis: 0 });
    const searchDb = new Kysely<AuditDatabase>({ dialect: new PostgresDialect({ pool: searchPool }) });
    const searchPid = (await searchPool.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    console.log(`  (load average ${loadavg().map((x) => x.toFixed(2)).join(' ')})`);
    for (const s of await searches(searchDb, d.db, searchPid)) {
      console.log(`  ${s.name.padEnd(32)} p50 ${s.p50.toFixed(1).padStart(7)} ms   p95 ${s.p95.toFixed(1).padStart(7)} ms   PostgreSQL CPU ${s.cpu.toFixed(1).padStart(6)} ms/search`);
    }
    console.log(`  (load average ${loadavg().map((x) => x.toFixed(2)).join(' ')})`);
    await searchDb.destroy();
    if (design === 'new') await explainAll(d.db);
  }
  for (const design of DESIGNS) {
    await dbs[design]!.pool.query(`drop table if exists ${FLOOR_TABLE}`);
    await dbs[design]!.pool.end();
    await dbs[design]!.onePool.end();
  }
} finally {
  for (const name of created) {
    await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
    await admin.query(`drop database if exists "${name}"`);
  }
  await admin.end();
}
