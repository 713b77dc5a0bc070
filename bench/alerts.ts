// Alert evaluation benchmark (`npm run bench:alerts`): one tick of 100 rules while the audit log receives 2,000 entries/s, in a log of 500,000 and one of 5,000,000 entries measured in alternating phases of one run; prints the tick times and their ratio against the goals (tick ≤ 1 s, tick at 5M ≤ 1.5 × tick at 500k).
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { MemoryCoordination } from '../src/coord/memory.js';
import { AlertDelivery } from '../src/alerts/delivery.js';
import { AlertEvaluator } from '../src/alerts/evaluator.js';
import { rawMinutes } from '../src/alerts/figures.js';
import { CONDITION_TYPES } from '../src/alerts/conditions.js';
import { WebhookSecretBox } from '../src/alerts/secret.js';
import type { AlertsDatabase } from '../src/alerts/schema.js';
import { migrateToLatest } from '../src/store/migrate.js';
import { createTestDatabase } from '../test/support/pg.js';
import { quantile } from './stats.js';

const SIZES = (process.env.BENCH_ALERTS_SIZES ?? '500000,5000000').split(',').map(Number);
const RULES = Number(process.env.BENCH_ALERTS_RULES ?? 100);
const RATE = Number(process.env.BENCH_ALERTS_RATE ?? 2_000);
/** Live phase per size: ingest at RATE, tick every TICK_S; ticks after WARMUP_S are measured. */
const LIVE_S = Number(process.env.BENCH_ALERTS_LIVE_S ?? 80);
const WARMUP_S = Number(process.env.BENCH_ALERTS_WARMUP_S ?? 30);
/** Live phases per size, alternating between the sizes. */
const ROUNDS = Number(process.env.BENCH_ALERTS_ROUNDS ?? 2);
const TICK_S = Number(process.env.BENCH_ALERTS_TICK_S ?? 5);
const IDENTITIES = 200;
const SOURCES = 20;
/** History spreads over this many days before the live phase (inside the current monthly partition when it fits). */
const HISTORY_DAYS = Math.min(20, Math.max(1, new Date().getUTCDate() - 1));

/** Entries generated server-side: a realistic mix of channels, statuses, decisions, tables and durations. */
function generate(n: number, fromSql: string, spanSeconds: number) {
  return sql`insert into audit_entries (id, ts, request_id, channel, identity_id, source_id, operation, method, path, tables, decision, status, upstream_status, redactions, bytes_in, bytes_out, duration_ms)
    select gen_random_uuid(), ${sql.raw(fromSql)} + make_interval(secs => (g::float8 / ${n}) * ${spanSeconds}),
      'bench-' || g, (array['http','pgwire','mcp'])[1 + g % 3], 1 + (g::bigint * 7919) % ${IDENTITIES}, 'src-' || (1 + (g::bigint * 104729) % ${SOURCES}),
      'read', 'GET', '/v1/items', array['public.t' || (g % 50)],
      case when g % 53 = 0 then 'deny' else 'allow' end,
      case when g % 53 = 0 then 403 when g % 97 = 0 then 429 when g % 61 = 0 then 502 else 200 end,
      200, (g % 7 = 0)::int, 100, 2048, 1 + (g % 400) * 0.5
    from generate_series(1, ${n}) g`;
}

function rules(): string {
  const values: string[] = [];
  for (let i = 0; i < RULES; i++) {
    const type = CONDITION_TYPES[i % CONDITION_TYPES.length]!;
    const identity = i % 3 === 1 ? String(1 + (i % IDENTITIES)) : 'null';
    const source = i % 3 === 2 ? `'src-${1 + (i % SOURCES)}'` : 'null';
    const window = [300, 300, 300, 60, 900, 3600][i % 6];
    const threshold = type === 'error_rate' || type === 'denial_rate' ? 0.05 : 100;
    values.push(`('bench-${i}', '${type}', ${threshold}, '>', ${identity}, ${source}, 'log', ${window})`);
  }
  return `insert into alert_rules (name, condition_type, threshold, comparator, identity_id, source_id, notification_channel, window_seconds) values ${values.join(',')}`;
}

interface Subject {
  size: number;
  database: Awaited<ReturnType<typeof createTestDatabase>>;
  db: Kysely<AlertsDatabase>;
  coord: MemoryCoordination;
  delivery: AlertDelivery;
  evaluator: AlertEvaluator;
  ticks: number[];
  phases: Array<{ rollup: number; figures: number; apply: number }>;
}

const log = pino({ level: 'silent' });

async function subject(size: number): Promise<Subject> {
  const database = await createTestDatabase();
  const db = new Kysely<AlertsDatabase>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.url, max: 6 }) }) });
  await migrateToLatest(db);
  await sql.raw(rules()).execute(db);
  // History: older than the live phases, spread over HISTORY_DAYS, in chunks so one statement stays bounded.
  const t0 = performance.now();
  for (let done = 0; done < size; done += 500_000) {
    const n = Math.min(500_000, size - done);
    const span = HISTORY_DAYS * 86_400 - 900;
    await generate(n, `now() - interval '${HISTORY_DAYS} days' + make_interval(secs => ${(done / size) * span})`, (n / size) * span).execute(db);
  }
  await sql`analyze audit_entries`.execute(db);
  console.log(`history: ${size.toLocaleString('en')} entries (${((performance.now() - t0) / 1000).toFixed(0)} s to generate)`);
  const coord = new MemoryCoordination({});
  const delivery = new AlertDelivery({ log, slack: null, allowPrivateEgress: false, timeoutMs: 1000, maxAttempts: 1, box: new WebhookSecretBox('bench'), adminBaseUrl: null });
  const evaluator = new AlertEvaluator({ db, coord, log, intervalMs: TICK_S * 1000, repeatMs: 3_600_000, delivery, holder: 'bench' });
  return { size, database, db, coord, delivery, evaluator, ticks: [], phases: [] };
}

/** One live phase: RATE entries/s in 4 batches a second and a tick every TICK_S; ticks after WARMUP_S are kept. */
async function live(s: Subject): Promise<void> {
  const liveStart = Date.now();
  let inserted = 0;
  let ingest: Promise<unknown> = Promise.resolve();
  const ingester = setInterval(() => {
    const n = RATE / 4;
    ingest = ingest.then(() => generate(n, `now() - interval '250 milliseconds'`, 0.25).execute(s.db)).then(() => (inserted += n));
  }, 250);
  const kept: number[] = [];
  for (let k = 1; Date.now() - liveStart < LIVE_S * 1000; k++) {
    await new Promise((r) => setTimeout(r, Math.max(0, liveStart + k * TICK_S * 1000 - Date.now())));
    const t = performance.now();
    const report = await s.evaluator.tick(Date.now());
    const ms = performance.now() - t;
    if (!report.leader || report.evaluated !== RULES) throw new Error(`tick evaluated ${report.evaluated} rules`);
    if (process.env.BENCH_ALERTS_VERBOSE) console.log(`    tick ${ms.toFixed(0)} ms`, report.phases_ms, `rolled ${report.rolled_minutes.toFixed(2)} min`);
    // Warm-up ticks (the rollups catching up at the start of a phase) are not kept.
    if (Date.now() - liveStart >= WARMUP_S * 1000) {
      kept.push(ms);
      s.phases.push(report.phases_ms);
    }
  }
  clearInterval(ingester);
  await ingest;
  s.ticks.push(...kept);
  const sorted = [...kept].sort((a, b) => a - b);
  const total = Number((await sql<{ n: string }>`select count(*)::text as n from audit_entries`.execute(s.db)).rows[0]!.n);
  console.log(`  ${s.size.toLocaleString('en')}: ingest ${(inserted / ((Date.now() - liveStart) / 1000)).toFixed(0)} entries/s, log ${total.toLocaleString('en')} entries; tick median ${quantile(sorted, 0.5).toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms (${kept.length} ticks)`);
}

const subjects: Subject[] = [];
try {
  for (const size of SIZES) subjects.push(await subject(size));
  // Phases alternate between the sizes, so the machine's other load falls on both alike.
  for (let round = 1; round <= ROUNDS; round++) for (const s of subjects) await live(s);
  for (const s of subjects) {
    // How the newest minute of the log is read: through the ts index of the current partition only.
    const plan = await sql<{ 'QUERY PLAN': string }>`explain (analyze, costs off, timing off, summary off) ${rawMinutes(new Date(Date.now() - 60_000), new Date())}`.execute(s.db);
    const scans = plan.rows.map((r) => r['QUERY PLAN']).filter((l) => /Scan/.test(l)).map((l) => l.trim());
    console.log(`raw-minute plan at ${s.size.toLocaleString('en')}: ${scans.join(' | ')}`);
    const med = (k: 'rollup' | 'figures' | 'apply') => quantile(s.phases.map((p) => p[k]).sort((a, b) => a - b), 0.5);
    console.log(`  phases at ${s.size.toLocaleString('en')} (median ms): rollup ${med('rollup')}, figures ${med('figures')}, apply ${med('apply')}`);
  }
} finally {
  for (const s of subjects) {
    await s.evaluator.stop();
    await s.delivery.close();
    await s.db.destroy();
    await s.coord.close();
    await s.database.drop();
  }
}

const median = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);
const worst = Math.max(...subjects.flatMap((r) => r.ticks));
console.log(`\ngoal: one tick of ${RULES} rules <= 1000 ms: worst ${worst.toFixed(0)} ms, median ${median(subjects.flatMap((r) => r.ticks)).toFixed(0)} ms -> ${worst <= 1000 ? 'PASS' : 'FAIL'}`);
if (subjects.length >= 2) {
  const small = subjects[0]!;
  const big = subjects[subjects.length - 1]!;
  const ratio = median(big.ticks) / median(small.ticks);
  console.log(`goal: tick at ${big.size.toLocaleString('en')} <= 1.5 x tick at ${small.size.toLocaleString('en')} (medians): ${median(big.ticks).toFixed(0)} / ${median(small.ticks).toFixed(0)} ms = ${ratio.toFixed(2)} -> ${ratio <= 1.5 ? 'PASS' : 'FAIL'}`);
}
