// Console page benchmark (`npm run bench:console`): the overview, the approvals inbox and the audit explorer (first page, an identity filter, a deep keyset page) with 100,000 and 1,000,000 audit entries and 10,000 approvals, each size in its own scratch database behind a running admin listener; prints each page's p95 and the 1M/100k ratio against the goals (p95 ≤ 150 ms, ratio ≤ 2), and the EXPLAIN plans of the queries behind them.
import { performance } from 'node:perf_hooks';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { floorMinute, minuteTotals, rollUp } from '../src/alerts/figures.js';
import type { AlertsDatabase } from '../src/alerts/schema.js';
import { ensurePartitionsFor, maintainPartitions } from '../src/audit/partitions.js';
import { searchAudit } from '../src/audit/search.js';
import { startTestService, type TestService } from '../test/support/service.js';
import { AdminClient } from '../test/support/admin-client.js';
import { quantile } from './stats.js';

const SIZES = (process.env.BENCH_CONSOLE_SIZES ?? '100000,1000000').split(',').map(Number);
const APPROVALS = Number(process.env.BENCH_CONSOLE_APPROVALS ?? 10_000);
/** Requests per page per round; rounds alternate between the sizes so both see the same machine load. */
const REQUESTS = Number(process.env.BENCH_CONSOLE_REQUESTS ?? 40);
const ROUNDS = Number(process.env.BENCH_CONSOLE_ROUNDS ?? 3);
const IDENTITIES = 200;
const SOURCES = 20;
const PASSWORD = 'bench-console-owner-password-1';
/** History spreads over this many days, inside the current monthly partition when it fits (as bench:alerts). */
const HISTORY_DAYS = Math.min(20, Math.max(1, new Date().getUTCDate() - 1));
/** One pending approval in this many (the rest decided): the inbox lists every pending one. */
const PENDING_EVERY = 20;

function generate(n: number, fromSql: string, spanSeconds: number) {
  return sql`insert into audit_entries (id, ts, request_id, channel, identity_id, source_id, operation, method, path, tables, decision, reasons, status, upstream_status, cache, redactions, bytes_in, bytes_out, duration_ms)
    select gen_random_uuid(), ${sql.raw(fromSql)} + make_interval(secs => (g::float8 / ${n}) * ${spanSeconds}),
      'bench-' || g, (array['http','pgwire','mcp'])[1 + g % 3], 1 + (g::bigint * 7919) % ${IDENTITIES}, 'src-' || (1 + (g::bigint * 104729) % ${SOURCES}),
      'read', 'GET', '/v1/items', array['public.t' || (g % 50)],
      case when g % 53 = 0 then 'deny' when g % 89 = 0 then 'require_approval' else 'allow' end,
      array['no policy matched; source role allows'],
      case when g % 53 = 0 then 403 when g % 89 = 0 then 202 when g % 97 = 0 then 429 when g % 61 = 0 then 502 else 200 end,
      200, (array['hit','miss','bypass'])[1 + g % 3], (g % 7 = 0)::int, 100, 2048, 1 + (g % 400) * 0.5
    from generate_series(1, ${n}) g`;
}

interface Subject {
  size: number;
  svc: TestService;
  db: Kysely<AlertsDatabase>;
  admin: AdminClient;
  times: Map<string, number[]>;
  /** CPU microseconds of this process (server and client share it) per page, summed over the measured requests. */
  cpu: Map<string, number>;
  deepCursor: string;
}

async function subject(size: number): Promise<Subject> {
  const svc = await startTestService({ role: 'admin', env: { SERVICE_ADMIN__BOOTSTRAP_PASSWORD: PASSWORD } });
  const db = new Kysely<AlertsDatabase>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: svc.database!.url, max: 4 }) }) });
  const t0 = performance.now();
  await sql`insert into identities (name) select 'bench-agent-' || g from generate_series(1, ${IDENTITIES}) g`.execute(db);
  await sql`insert into data_sources (source_id, name, source_type, connection_config)
    select 'src-' || g, 'src-' || g, 'http', jsonb_build_object('base_url', 'http://127.0.0.1:9/') from generate_series(1, ${SOURCES}) g`.execute(db);
  const span = HISTORY_DAYS * 86_400 - 120;
  // Daily partitions for the history (the writer's fallback and the worker's maintenance create them in service).
  await ensurePartitionsFor(db, Array.from({ length: HISTORY_DAYS + 2 }, (_, i) => new Date(Date.now() - (HISTORY_DAYS - i) * 86_400_000)));
  for (let done = 0; done < size; done += 500_000) {
    const n = Math.min(500_000, size - done);
    await generate(n, `now() - interval '${HISTORY_DAYS} days' + make_interval(secs => ${(done / size) * span})`, (n / size) * span).execute(db);
  }
  await sql`insert into approvals (identity_id, source_id, sql_text, risk_level, status, created_at, expires_at, request_metadata)
    select 1 + g % ${IDENTITIES}, 'src-' || (1 + g % ${SOURCES}), 'POST /v1/items/' || g, (array['low','medium','high'])[1 + g % 3],
      case when g % ${PENDING_EVERY} = 0 then 'pending' else (array['approved','rejected','expired','executed','failed'])[1 + g % 5] end,
      now() - make_interval(secs => g * 30), now() - make_interval(secs => g * 30) + interval '1 day', '{}'::jsonb
    from generate_series(1, ${APPROVALS}) g`.execute(db);
  // As the worker's partition maintenance does: the search indexes of every closed (past) day are built.
  const built = await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500, concurrently: false });
  await sql`analyze`.execute(db);
  // The worker's alert evaluator keeps the per-minute rollups; here they are caught up from a day back, as it would have.
  await sql`insert into alert_rollup_state (id, watermark) values (true, ${new Date(floorMinute(Date.now()) - 86_400_000 - 3_600_000).toISOString()}::timestamptz)`.execute(db);
  for (let i = 0; i < 60; i++) if ((await rollUp(db, Date.now())).minutes === 0) break;
  const fill = performance.now() - t0;
  const admin = await AdminClient.signIn(svc.adminUrl, 'admin', PASSWORD);
  // A cursor half-way down the log: a deep page, reached without an offset.
  const mid = await sql<{ ts: Date; id: string }>`select ts, id from audit_entries order by ts desc, id desc limit 1 offset ${Math.floor(size / 2)}`.execute(db);
  const deepCursor = Buffer.from(JSON.stringify([mid.rows[0]!.ts.toISOString(), mid.rows[0]!.id])).toString('base64url');
  console.log(`filled ${size.toLocaleString('en')} entries, ${APPROVALS.toLocaleString('en')} approvals (${APPROVALS / PENDING_EVERY} pending) and the rollups in ${(fill / 1000).toFixed(1)} s (${built.indexed.length} partition indexes built)`);
  return { size, svc, db, admin, times: new Map(), cpu: new Map(), deepCursor };
}

const pages = (s: Subject): Record<string, string> => ({
  overview: '/dashboard/overview',
  'approvals inbox': '/dashboard/approvals',
  'audit explorer': '/dashboard/audit',
  'audit, identity filter': '/dashboard/audit?identity_id=17&channel=http',
  'audit, deep page': `/dashboard/audit?cursor=${s.deepCursor}`,
});

async function measure(s: Subject, name: string, path: string, n: number): Promise<void> {
  const headers = { cookie: s.admin.cookie, accept: 'text/html' };
  const list = s.times.get(name) ?? [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const res = await fetch(s.admin.baseUrl + path, { headers });
    const body = await res.text();
    const ms = performance.now() - t;
    if (res.status !== 200) throw new Error(`${name}: ${res.status} ${body.slice(0, 300)}`);
    list.push(ms);
  }
  const cpu = process.cpuUsage(cpu0);
  s.cpu.set(name, (s.cpu.get(name) ?? 0) + cpu.user + cpu.system);
  s.times.set(name, list);
}

async function plans(s: Subject): Promise<void> {
  const queries: Array<{ label: string; sql: string; params: readonly unknown[] }> = [];
  const pool = new pg.Pool({ connectionString: s.svc.database!.url, max: 2 });
  const capture = new Kysely<AlertsDatabase>({
    dialect: new PostgresDialect({ pool }),
    log: (e) => {
      if (e.level === 'query') queries.push({ label: '', sql: e.query.sql, params: e.query.parameters });
    },
  });
  const label = async (name: string, run: () => Promise<unknown>) => {
    const before = queries.length;
    await run();
    for (const q of queries.slice(before)) q.label = name;
  };
  await label('audit first page', () => searchAudit(capture as never, { limit: 50 }));
  await label('audit identity filter', () => searchAudit(capture as never, { limit: 50, identity_id: 17, channel: 'http' }));
  await label('audit deep page', () => searchAudit(capture as never, { limit: 50, cursor: s.deepCursor }));
  await label('overview minutes', () => minuteTotals(capture, Date.now() - 86_400_000, Date.now()));
  await label('newest pending approvals', () => capture.selectFrom('approvals').select(['id']).where('status', '=', 'pending').orderBy('created_at', 'desc').orderBy('id', 'desc').limit(5).execute());
  const client = await pool.connect();
  try {
    for (const q of queries) {
      if (!/^\s*(select|with)/i.test(q.sql)) continue;
      const plan = await client.query<{ 'QUERY PLAN': string }>(`explain (analyze, costs off, timing off, summary on) ${q.sql}`, q.params as unknown[]);
      const lines = plan.rows.map((r) => r['QUERY PLAN']);
      // Partition scans repeat per day: each kind once, with how many partitions it ran on and the rows it returned.
      const kinds = new Map<string, { n: number; rows: number }>();
      for (const l of lines) {
        const m = /(Seq Scan|Index Only Scan|Index Scan|Bitmap Index Scan|Bitmap Heap Scan)(?: using (\S+))? on (\S+).*actual rows=(\d+)/.exec(l);
        if (!m) continue;
        const key = `${m[1]}${m[2] ? ` using ${m[2]}` : ''} on ${m[3]}`.replace(/audit_entries_p\d+/g, 'audit_entries_p*');
        const k = kinds.get(key) ?? { n: 0, rows: 0 };
        k.n++;
        k.rows += Number(m[4]);
        kinds.set(key, k);
      }
      const time = lines.find((l) => l.startsWith('Execution Time'))?.replace('Execution Time: ', '') ?? '?';
      console.log(`  [${s.size.toLocaleString('en')}] ${q.label} (${time}): ${[...kinds].map(([k, v]) => `${k} ×${v.n} (${v.rows} rows)`).join('; ')}`);
    }
  } finally {
    client.release();
    await capture.destroy();
  }
}

const subjects: Subject[] = [];
try {
  for (const size of SIZES) subjects.push(await subject(size));
  for (const s of subjects) for (const [name, path] of Object.entries(pages(s))) await measure(s, name, path, 5); // warm-up
  for (const s of subjects) {
    s.times.clear();
    s.cpu.clear();
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of subjects) for (const [name, path] of Object.entries(pages(s))) await measure(s, name, path, REQUESTS);
  }
  console.log(`\nbench:console — page time p95 over ${REQUESTS * ROUNDS} requests each (sequential, loopback; the machine is shared, figures are noisy)`);
  const names = Object.keys(pages(subjects[0]!));
  const p95 = (s: Subject, name: string) => quantile([...(s.times.get(name) ?? [])].sort((a, b) => a - b), 0.95);
  const median = (s: Subject, name: string) => quantile([...(s.times.get(name) ?? [])].sort((a, b) => a - b), 0.5);
  for (const name of names) {
    const cpuMs = (s: Subject) => (s.cpu.get(name) ?? 0) / 1000 / (s.times.get(name)?.length ?? 1);
    const cells = subjects.map((s) => `${s.size.toLocaleString('en')}: p95 ${p95(s, name).toFixed(1)} ms (median ${median(s, name).toFixed(1)}, CPU ${cpuMs(s).toFixed(1)} ms/request)`);
    const small = subjects[0]!;
    const big = subjects[subjects.length - 1]!;
    const ratio = p95(big, name) / p95(small, name);
    const goal = p95(big, name) <= 150 && ratio <= 2 ? 'met' : 'NOT met';
    console.log(`${name.padEnd(24)} ${cells.join('  ')}  ratio ${ratio.toFixed(2)}  (goal p95 ≤ 150 ms, ratio ≤ 2: ${goal})`);
  }
  console.log('\nplans (EXPLAIN ANALYZE of the queries as the pages run them):');
  for (const s of subjects) await plans(s);
} finally {
  for (const s of subjects) {
    await s.db.destroy();
    await s.svc.stop();
  }
}
