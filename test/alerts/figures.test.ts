// The figures of a window are the same whether read from the raw log or from rollups plus the raw tail, wherever the rollups were cut (partial minutes included); latency buckets agree with PostgreSQL's width_bucket.
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { collectFigures, rollUp, type FigureQuery } from '../../src/alerts/figures.js';
import { CONDITION_TYPES, LATENCY_BOUNDS, latencyBucket, p95FromHistogram } from '../../src/alerts/conditions.js';
import type { AlertsDatabase } from '../../src/alerts/schema.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';

let store: MigratedStore;
let db: Kysely<AlertsDatabase>;
let pool: pg.Pool;
const NOW = Date.now();

beforeAll(async () => {
  store = await withMigratedStore();
  pool = new pg.Pool({ connectionString: store.database.url, max: 2 });
  db = new Kysely<AlertsDatabase>({ dialect: new PostgresDialect({ pool }) });
  // 3,000 entries over the last 20 minutes: 5 identities, 3 sources, mixed outcomes and durations.
  await sql`insert into audit_entries (id, ts, request_id, channel, identity_id, source_id, tables, decision, status, redactions, duration_ms)
    select gen_random_uuid(), ${new Date(NOW).toISOString()}::timestamptz - make_interval(secs => (g % 1200) + (g % 7) / 10.0), 'r' || g,
      (array['http','pgwire','mcp','admin'])[1 + g % 4], case when g % 11 = 0 then null else 1 + g % 5 end, 's' || (g % 3), array['public.t' || (g % 4)],
      case when g % 9 = 0 then 'deny' else 'allow' end, case when g % 9 = 0 then 403 when g % 13 = 0 then 502 when g % 17 = 0 then 429 else 200 end,
      g % 3, (g % 97) * 3.7
    from generate_series(1, 3000) g`.execute(db);
  // An identity that first appears in the last three minutes, on two sources and a new table: first_seen material.
  await sql`insert into audit_entries (id, ts, request_id, channel, identity_id, source_id, tables, decision, status, redactions, duration_ms)
    select gen_random_uuid(), ${new Date(NOW).toISOString()}::timestamptz - make_interval(secs => g), 'n' || g, 'http', 9, 's' || (g % 2), array['public.new' || (g % 3)], 'allow', 200, 0, 5
    from generate_series(1, 180) g`.execute(db);
});

afterAll(async () => {
  await db?.destroy();
  await store?.cleanup();
});

const queries: FigureQuery[] = [];
for (const type of CONDITION_TYPES) {
  for (const scope of [{ identity_id: null, source_id: null }, { identity_id: 2, source_id: null }, { identity_id: null, source_id: 's1' }, { identity_id: 3, source_id: 's2' }]) {
    for (const window_seconds of [60, 300, 900]) queries.push({ condition_type: type, scope, window_seconds });
  }
}

// first_seen depends on the reach history, which only rollups build: compared with its own definition below.
const plain = (fs: Awaited<ReturnType<typeof collectFigures>>) => fs.map((f) => ({ ...f, first_seen: 0, denials_by_identity: [...f.denials_by_identity].sort() }));

/** first_seen by definition, with the whole log as history: pairs whose first allowed reach is in the window. */
async function firstSeenTruth(q: FigureQuery): Promise<number> {
  const start = new Date(Math.floor((NOW - q.window_seconds * 1000) / 60_000) * 60_000).toISOString();
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from (
      select identity_id, source_id, object, min(ts) as first from (
        select identity_id, source_id, ts, unnest(array_prepend(''::text, tables)) as object from audit_entries
        where channel <> 'admin' and decision = 'allow' and identity_id is not null and source_id is not null
          and (${q.scope.identity_id}::int is null or identity_id = ${q.scope.identity_id}::int) and (${q.scope.source_id}::text is null or source_id = ${q.scope.source_id}::text)
      ) x group by 1, 2, 3) p
    where p.first >= ${start}::timestamptz and p.first < ${new Date(NOW).toISOString()}::timestamptz`.execute(db);
  return rows[0]!.n;
}

it('rollups plus the raw tail give the raw log\'s figures at every cut', async () => {
  const raw = plain(await collectFigures(db, queries, NOW, { useRollups: false }));
  expect(raw.some((f) => f.requests > 0)).toBe(true);
  // The rollups catch up from an hour back (the history the reach table is built from) in steps ending at arbitrary instants (mid-minute included).
  for (const cut of [NOW - 17 * 60_000 - 12_345, NOW - 9 * 60_000 - 30_000, NOW - 4 * 60_000 - 1, NOW - 60_000 + 7_777]) {
    // At most 30 minutes per call: the first cut needs two calls to catch up from an hour back.
    while ((await rollUp(db, cut)).minutes > 0);
    const { rows } = await sql<{ watermark: Date }>`select watermark from alert_rollup_state`.execute(db);
    expect(rows[0]!.watermark.getTime()).toBe(cut - 10_000);
    const figures = await collectFigures(db, queries, NOW);
    expect(plain(figures)).toEqual(raw);
    for (let i = 0; i < queries.length; i++) {
      if (queries[i]!.condition_type === 'first_seen') expect(figures[i]!.first_seen, JSON.stringify(queries[i])).toBe(await firstSeenTruth(queries[i]!));
    }
  }
  expect(await firstSeenTruth({ condition_type: 'first_seen', scope: { identity_id: 9, source_id: null }, window_seconds: 300 })).toBe(2 + 2 * 3);
  // Rolling up again at the same instant adds nothing twice.
  await rollUp(db, NOW - 60_000 + 7_777);
  expect(plain(await collectFigures(db, queries, NOW))).toEqual(raw);
});

it('latency buckets: the JavaScript rule is width_bucket over the bounds, and p95 is the upper bound of its bucket', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.double({ min: 0, max: 100_000, noNaN: true }), { minLength: 1, maxLength: 50 }), async (ds) => {
      const { rows } = await sql<{ wb: number }>`select width_bucket(d, ${`{${LATENCY_BOUNDS.join(',')}}`}::float8[]) as wb from unnest(${ds}::float8[]) with ordinality as u(d, i) order by i`.execute(db);
      expect(rows.map((r) => r.wb)).toEqual(ds.map(latencyBucket));
      const hist = new Array<number>(LATENCY_BOUNDS.length + 1).fill(0);
      for (const d of ds) hist[latencyBucket(d)]!++;
      const sorted = [...ds].sort((a, b) => a - b);
      const exact = sorted[Math.ceil(0.95 * ds.length) - 1]!;
      const p95 = p95FromHistogram(hist);
      if (exact >= LATENCY_BOUNDS.at(-1)!) expect(p95).toBe(Number.POSITIVE_INFINITY);
      else {
        expect(p95).toBeGreaterThan(exact);
        expect(p95).toBeLessThanOrEqual(Math.max(1, exact * 1.25) + 1e-9);
      }
    }),
    { numRuns: 30 },
  );
});
