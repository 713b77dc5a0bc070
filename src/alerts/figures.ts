// Reading a window's figures from the audit log: per-minute rollups for closed minutes, the raw log (through its ts index) for the rest, the reach history and the approval queue (docs/alerts.md "How figures are read").
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { emptyFigures, LATENCY_BOUNDS, LATENCY_BUCKETS, type ConditionType, type WindowFigures } from './conditions.js';
import type { AlertsDatabase } from './schema.js';

type Db = Kysely<AlertsDatabase>;

/** Scope key of "every identity" / "every source" in rollups; -1 and '' stand for entries without one. */
export const ALL_IDENTITIES = 0;
export const NO_IDENTITY = -1;
export const ALL_SOURCES = '*';
export const NO_SOURCE = '';

/** Entries are rolled up once they are this old: the audit writer stores entries within this delay. */
export const SETTLE_MS = 10_000;
/** Where a store without rollups starts rolling up, and how many minutes one tick catches up at most. */
export const INITIAL_LOOKBACK_MINUTES = 60;
export const MAX_CATCHUP_MINUTES = 30;
/** first_seen: a reach is new when the identity did not reach that source or table in this many days before. */
export const FIRST_SEEN_LOOKBACK_DAYS = 30;

export interface Scope {
  identity_id: number | null;
  source_id: string | null;
}

export interface FigureQuery {
  condition_type: ConditionType;
  scope: Scope;
  window_seconds: number;
}

interface MinuteRow {
  minute: Date;
  identity_key: number;
  source_key: string;
  requests: number;
  errors: number;
  denials: number;
  rate_limited: number;
  redactions: number;
  cache_hits: number;
  cache_lookups: number;
  latency_hist: number[];
}

export const floorMinute = (ms: number): number => Math.floor(ms / 60_000) * 60_000;

/** The window of docs/alerts.md: from the start of the minute holding now − window_seconds, to now. */
export function windowStart(nowMs: number, windowSeconds: number): Date {
  return new Date(floorMinute(nowMs - windowSeconds * 1000));
}

const BOUNDS_LITERAL = sql.lit(`{${LATENCY_BOUNDS.join(',')}}`);
const BUCKETS = Array.from({ length: LATENCY_BUCKETS }, (_, i) => i);
/** One filtered count per histogram bucket (the bucket is width_bucket over the bounds: the count of bounds <= d). */
const HIST_COUNTS = sql.raw(BUCKETS.map((i) => `count(*) filter (where wb = ${i}) as h${i}`).join(', '));
const HIST_SUMS = sql.raw(`array[${BUCKETS.map((i) => `sum(h${i})`).join(', ')}]::bigint[]`);

/**
 * The per-minute figures of the raw log over [from, to), by minute and by the four scope grains (all, identity,
 * source, identity and source). The entries are aggregated once per (minute, identity, source); the grains are sums
 * of those few rows. Admin actions (channel admin) are not agent requests.
 */
export function rawMinutes(from: Date, to: Date) {
  return sql<MinuteRowRaw>`
    with cell as (
      select date_trunc('minute', ts) as minute, identity_id, source_id, count(*) as n,
        count(*) filter (where status >= 500) as errors,
        count(*) filter (where decision = 'deny' and status = 403) as denials,
        count(*) filter (where status = 429) as rate_limited,
        coalesce(sum(redactions), 0) as redactions,
        count(*) filter (where cache = 'hit') as cache_hits, count(*) filter (where cache in ('hit', 'miss')) as cache_lookups,
        ${HIST_COUNTS}
      from (select ts, identity_id, source_id, status, decision, redactions, cache, width_bucket(duration_ms, ${BOUNDS_LITERAL}::float8[]) as wb
            from audit_entries
            where ts >= ${from.toISOString()}::timestamptz and ts < ${to.toISOString()}::timestamptz and channel <> 'admin') e
      group by 1, 2, 3
    )
    select minute,
      case when grouping(identity_id) = 1 then ${ALL_IDENTITIES} else coalesce(identity_id, ${NO_IDENTITY}) end as identity_key,
      case when grouping(source_id) = 1 then ${ALL_SOURCES} else coalesce(source_id, ${NO_SOURCE}) end as source_key,
      sum(n) as requests, sum(errors) as errors, sum(denials) as denials, sum(rate_limited) as rate_limited, sum(redactions) as redactions,
      sum(cache_hits) as cache_hits, sum(cache_lookups) as cache_lookups,
      ${HIST_SUMS} as latency_hist
    from cell
    group by minute, grouping sets ((), (identity_id), (source_id), (identity_id, source_id))`;
}

interface MinuteRowRaw {
  minute: Date;
  identity_key: number;
  source_key: string;
  requests: string;
  errors: string;
  denials: string;
  rate_limited: string;
  redactions: string;
  cache_hits: string;
  cache_lookups: string;
  latency_hist: string[];
}

const toRow = (r: MinuteRowRaw): MinuteRow => ({
  minute: r.minute,
  identity_key: r.identity_key,
  source_key: r.source_key,
  requests: Number(r.requests),
  errors: Number(r.errors),
  denials: Number(r.denials),
  rate_limited: Number(r.rate_limited),
  redactions: Number(r.redactions),
  cache_hits: Number(r.cache_hits),
  cache_lookups: Number(r.cache_lookups),
  latency_hist: r.latency_hist.map(Number),
});

export async function readWatermark(db: Db): Promise<Date | null> {
  const row = await db.selectFrom('alert_rollup_state').select('watermark').executeTakeFirst();
  return row?.watermark ?? null;
}

/**
 * Adds the entries of [watermark, now − SETTLE_MS) to the per-minute rollups (and the reach history) and moves the
 * watermark there, at most MAX_CATCHUP_MINUTES per call. Each entry is counted once: the state row is locked for the
 * whole transaction and the watermark moves in it. The minute holding the watermark is partly rolled up; its
 * rest comes from the raw log until a later call adds it. Returns the new watermark.
 */
export async function rollUp(db: Db, nowMs: number): Promise<{ watermark: Date; minutes: number }> {
  return db.transaction().execute(async (trx) => {
    await sql`insert into alert_rollup_state (id, watermark) values (true, ${new Date(floorMinute(nowMs) - INITIAL_LOOKBACK_MINUTES * 60_000).toISOString()}::timestamptz) on conflict (id) do nothing`.execute(trx);
    const state = await sql<{ watermark: Date }>`select watermark from alert_rollup_state where id for update`.execute(trx);
    const from = state.rows[0]!.watermark;
    const upto = Math.min(nowMs - SETTLE_MS, from.getTime() + MAX_CATCHUP_MINUTES * 60_000);
    if (upto <= from.getTime()) return { watermark: from, minutes: 0 };
    const to = new Date(upto);
    const raw = rawMinutes(from, to);
    await sql`insert into alert_rollups (minute, identity_key, source_key, requests, errors, denials, rate_limited, redactions, cache_hits, cache_lookups, latency_hist)
      select minute, identity_key, source_key, requests, errors, denials, rate_limited, redactions, cache_hits, cache_lookups, latency_hist from (${raw}) r
      on conflict (identity_key, source_key, minute) do update set requests = alert_rollups.requests + excluded.requests,
        errors = alert_rollups.errors + excluded.errors, denials = alert_rollups.denials + excluded.denials,
        rate_limited = alert_rollups.rate_limited + excluded.rate_limited, redactions = alert_rollups.redactions + excluded.redactions,
        cache_hits = alert_rollups.cache_hits + excluded.cache_hits, cache_lookups = alert_rollups.cache_lookups + excluded.cache_lookups,
        latency_hist = (select array_agg(a + b order by i) from unnest(alert_rollups.latency_hist, excluded.latency_hist) with ordinality as u(a, b, i))`.execute(trx);
    await sql`insert into alert_reach (identity_id, source_id, object, new_since, last_seen)
      select identity_id, source_id, object, min(ts), max(ts) from (
        select identity_id, source_id, ts, unnest(array_prepend(''::text, tables)) as object from audit_entries
        where ts >= ${from.toISOString()}::timestamptz and ts < ${to.toISOString()}::timestamptz and channel <> 'admin'
          and decision = 'allow' and identity_id is not null and source_id is not null
      ) x group by identity_id, source_id, object
      on conflict (identity_id, source_id, object) do update set
        new_since = case when excluded.new_since > alert_reach.last_seen + make_interval(days => ${FIRST_SEEN_LOOKBACK_DAYS}) then excluded.new_since else alert_reach.new_since end,
        last_seen = greatest(alert_reach.last_seen, excluded.last_seen)`.execute(trx);
    await sql`update alert_rollup_state set watermark = ${to.toISOString()}::timestamptz where id`.execute(trx);
    return { watermark: to, minutes: (upto - from.getTime()) / 60_000 };
  });
}

/** Drops rollups older than the longest window (they can no longer be read) and reach runs older than the lookback. */
export async function pruneRollups(db: Db, nowMs: number, keepSeconds: number): Promise<void> {
  await sql`delete from alert_rollups where minute < ${new Date(floorMinute(nowMs) - keepSeconds * 1000).toISOString()}::timestamptz`.execute(db);
  await sql`delete from alert_reach where last_seen < ${new Date(nowMs - (FIRST_SEEN_LOOKBACK_DAYS + 1) * 86_400_000).toISOString()}::timestamptz`.execute(db);
}

const identityKey = (s: Scope): number => s.identity_id ?? ALL_IDENTITIES;
const sourceKey = (s: Scope): string => s.source_id ?? ALL_SOURCES;

function add(f: WindowFigures, r: MinuteRow): void {
  f.requests += r.requests;
  f.errors += r.errors;
  f.denials += r.denials;
  f.rate_limited += r.rate_limited;
  f.redactions += r.redactions;
  f.cache_hits += r.cache_hits;
  f.cache_lookups += r.cache_lookups;
  for (let i = 0; i < LATENCY_BUCKETS; i++) f.latency_hist[i]! += r.latency_hist[i] ?? 0;
}

/**
 * The figures of each query's window ending at `nowMs`: rollups for minutes before the watermark, the raw log
 * from the watermark (or the window start, when later) to now. Reads only the longest window, never the whole log.
 */
export async function collectFigures(db: Db, queries: readonly FigureQuery[], nowMs: number, opts: { useRollups?: boolean } = {}): Promise<WindowFigures[]> {
  const out = queries.map(() => emptyFigures());
  if (queries.length === 0) return out;
  const starts = queries.map((q) => windowStart(nowMs, q.window_seconds).getTime());
  const minStart = Math.min(...starts);
  const now = new Date(nowMs);
  const wmDate = opts.useRollups === false ? null : await readWatermark(db);
  // Rollups hold entries before the watermark; evaluated in the past, the rollups of `now`'s minute hold later
  // entries too, so that minute comes from the raw log.
  const rolled = wmDate === null ? minStart : wmDate.getTime() <= nowMs ? wmDate.getTime() : floorMinute(nowMs);
  const wm = Math.max(rolled, minStart);
  const needsLog = queries.some((q) => q.condition_type !== 'approval_backlog' && q.condition_type !== 'first_seen');
  const rolledRows = async (): Promise<MinuteRow[]> => {
    if (!needsLog || wm <= minStart) return [];
    const keys = new Set<string>();
    const burstSources = new Set<string>();
    for (const q of queries) {
      if (q.condition_type === 'denied_burst' && q.scope.identity_id === null) burstSources.add(sourceKey(q.scope));
      else keys.add(`${identityKey(q.scope)}\u0000${sourceKey(q.scope)}`);
    }
    const pairs = [...keys].map((k) => k.split('\u0000') as [string, string]);
    const keyFilter = pairs.length > 0 ? sql`(identity_key, source_key) in (${sql.join(pairs.map(([i, s]) => sql`(${Number(i)}::int, ${s}::text)`))})` : sql`false`;
    const burstFilter = burstSources.size > 0 ? sql`(identity_key > 0 and source_key = any(${[...burstSources]}::text[]))` : sql`false`;
    const r = await sql<MinuteRowRaw>`select minute, identity_key, source_key, requests::text, errors::text, denials::text, rate_limited::text, redactions::text, cache_hits::text, cache_lookups::text, latency_hist::text[]
      from alert_rollups where minute >= ${new Date(minStart).toISOString()}::timestamptz and minute < ${new Date(wm).toISOString()}::timestamptz
        and (${keyFilter} or ${burstFilter})`.execute(db);
    return r.rows.map(toRow);
  };
  const tailRows = async (): Promise<MinuteRow[]> => (needsLog ? (await rawMinutes(new Date(wm), now).execute(db)).rows.map(toRow) : []);
  // The reads are independent: they run side by side on the pool.
  const [fromRollups, tail, reaches, backlog] = await Promise.all([
    rolledRows(),
    tailRows(),
    queries.some((q) => q.condition_type === 'first_seen') ? newReaches(db, new Date(minStart), new Date(wm), now) : Promise.resolve([]),
    queries.some((q) => q.condition_type === 'approval_backlog') ? pendingApprovals(db) : Promise.resolve([]),
  ]);
  const rows = [...fromRollups, ...tail];

  for (let i = 0; i < queries.length; i++) {
    const q = queries[i]!;
    const f = out[i]!;
    const start = starts[i]!;
    const ik = identityKey(q.scope);
    const sk = sourceKey(q.scope);
    const inScope = (identity: number | null, source: string | null) =>
      (q.scope.identity_id === null || identity === q.scope.identity_id) && (q.scope.source_id === null || source === q.scope.source_id);
    if (q.condition_type === 'denied_burst') {
      for (const r of rows) {
        if (r.minute.getTime() < start || r.source_key !== sk || r.identity_key <= 0) continue;
        if (q.scope.identity_id !== null && r.identity_key !== q.scope.identity_id) continue;
        if (r.denials > 0) f.denials_by_identity.set(r.identity_key, (f.denials_by_identity.get(r.identity_key) ?? 0) + r.denials);
        f.denials += r.denials;
      }
      continue;
    }
    for (const r of rows) if (r.minute.getTime() >= start && r.identity_key === ik && r.source_key === sk) add(f, r);
    if (q.condition_type === 'first_seen') {
      for (const r of reaches) if (r.at >= start && inScope(r.identity_id, r.source_id)) f.first_seen++;
    }
    if (q.condition_type === 'approval_backlog') {
      let oldest: number | null = null;
      for (const a of backlog) {
        if (!inScope(a.identity_id, a.source_id)) continue;
        f.approvals_pending += a.n;
        if (oldest === null || a.oldest < oldest) oldest = a.oldest;
      }
      f.oldest_pending_seconds = oldest === null ? null : Math.max(0, Math.round((nowMs - oldest) / 1000));
    }
  }
  return out;
}

/**
 * Reaches new since `from`, each with the time it became new: runs of the reach history that began in [from, wm),
 * plus reaches in the raw log of [wm, now) whose identity, source and object have no history row, one last seen more
 * than the lookback before their first reach, or one whose run began no earlier than that reach. One read for every
 * first_seen rule of a tick; each rule counts those of its scope and window.
 */
async function newReaches(db: Db, from: Date, wm: Date, now: Date): Promise<Array<{ identity_id: number; source_id: string; at: number }>> {
  const rolled = await sql<{ identity_id: number; source_id: string; at: Date }>`select r.identity_id, r.source_id, r.new_since as at from alert_reach r
    where r.new_since >= ${from.toISOString()}::timestamptz and r.new_since < ${wm.toISOString()}::timestamptz`.execute(db);
  const fresh = await sql<{ identity_id: number; source_id: string; at: Date }>`select t.identity_id, t.source_id, t.first_ts as at from (
      select e.identity_id, e.source_id, e.object, min(e.ts) as first_ts from (
        select a.identity_id, a.source_id, a.ts, unnest(array_prepend(''::text, a.tables)) as object from audit_entries a
        where a.ts >= ${(wm > from ? wm : from).toISOString()}::timestamptz and a.ts < ${now.toISOString()}::timestamptz and a.channel <> 'admin'
          and a.decision = 'allow' and a.identity_id is not null and a.source_id is not null
      ) e group by e.identity_id, e.source_id, e.object
    ) t left join alert_reach r on r.identity_id = t.identity_id and r.source_id = t.source_id and r.object = t.object
    where r.identity_id is null or r.last_seen < t.first_ts - make_interval(days => ${FIRST_SEEN_LOOKBACK_DAYS}) or r.new_since >= t.first_ts`.execute(db);
  return [...rolled.rows, ...fresh.rows].map((r) => ({ identity_id: r.identity_id, source_id: r.source_id, at: r.at.getTime() }));
}

/** Pending approvals per identity and source with the oldest creation time (approval_backlog: the queue now, not a window). */
async function pendingApprovals(db: Db): Promise<Array<{ identity_id: number; source_id: string; n: number; oldest: number }>> {
  const r = await sql<{ identity_id: number; source_id: string; n: string; oldest: Date }>`select p.identity_id, p.source_id, count(*)::text as n, min(p.created_at) as oldest
    from approvals p where p.status = 'pending' group by p.identity_id, p.source_id`.execute(db);
  return r.rows.map((x) => ({ identity_id: x.identity_id, source_id: x.source_id, n: Number(x.n), oldest: x.oldest.getTime() }));
}

/** One minute of every identity and source: what the console's overview counts and charts. */
export interface MinuteTotals {
  minute: number;
  requests: number;
  errors: number;
  denials: number;
  cache_hits: number;
  cache_lookups: number;
}

/**
 * The per-minute figures of every identity and source over [from, now): the rollups where they cover (from the
 * first rolled-up minute to the watermark), the raw log through its ts index before the first rollup and after
 * the watermark. The watermark's minute comes from both (its rolled-up part and the rest) and is summed.
 */
export async function minuteTotals(db: Db, fromMs: number, nowMs: number): Promise<MinuteTotals[]> {
  const from = floorMinute(fromMs);
  const [wmDate, first] = await Promise.all([readWatermark(db), sql<{ first: Date | null }>`select min(minute) as first from alert_rollups`.execute(db)]);
  const covered = first.rows[0]?.first?.getTime() ?? null;
  const wm = wmDate === null || covered === null ? null : Math.min(wmDate.getTime(), nowMs);
  // Only the counted columns (float8 arrives as a number); the latency histograms are not read.
  const totals = sql.raw('minute, requests::float8 as requests, errors::float8 as errors, denials::float8 as denials, cache_hits::float8 as cache_hits, cache_lookups::float8 as cache_lookups');
  type Row = Omit<MinuteTotals, 'minute'> & { minute: Date };
  const allGrain = (a: number, b: number) =>
    sql<Row>`select ${totals} from (${rawMinutes(new Date(a), new Date(b))}) r where identity_key = ${ALL_IDENTITIES} and source_key = ${ALL_SOURCES}`.execute(db).then((r) => r.rows);
  const reads: Array<Promise<Row[]>> = [];
  if (wm === null || covered === null) reads.push(allGrain(from, nowMs));
  else {
    if (from < covered) reads.push(allGrain(from, Math.min(covered, nowMs)));
    const lo = Math.max(from, covered);
    if (lo < wm) {
      reads.push(
        sql<Row>`select ${totals} from alert_rollups where identity_key = ${ALL_IDENTITIES} and source_key = ${ALL_SOURCES}
            and minute >= ${new Date(lo).toISOString()}::timestamptz and minute < ${new Date(wm).toISOString()}::timestamptz`.execute(db).then((r) => r.rows),
      );
    }
    reads.push(allGrain(Math.max(wm, from), nowMs));
  }
  const byMinute = new Map<number, MinuteTotals>();
  for (const r of (await Promise.all(reads)).flat()) {
    const m = r.minute.getTime();
    const t = byMinute.get(m);
    if (!t) byMinute.set(m, { ...r, minute: m });
    else {
      t.requests += r.requests;
      t.errors += r.errors;
      t.denials += r.denials;
      t.cache_hits += r.cache_hits;
      t.cache_lookups += r.cache_lookups;
    }
  }
  return [...byMinute.values()].sort((a, b) => a.minute - b.minute);
}
