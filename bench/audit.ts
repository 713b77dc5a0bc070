// Audit benchmark (`npm run bench:audit`): buffered entries/s and strict added latency against an in-memory sink, and CPU per entry of the two store paths (JSON insert, COPY), all in one run.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { auditSchema } from '../src/config/schema.js';
import { AuditWriter } from '../src/audit/writer.js';
import { MemoryAuditSink, type AuditPort } from '../src/audit/port.js';
import { newAuditId, type AuditEntry } from '../src/audit/entry.js';
import { auditBinaryBatch } from '../src/audit/copy-binary.js';
import { copyAuditEntries, insertAuditEntries } from '../src/audit/insert.js';
import { poolCopyIn } from '../src/store/copy.js';
import { migrateToLatest } from '../src/store/migrate.js';
import { CLOCK_TICKS, procTicks } from './proc.js';
import { quantile } from './stats.js';

const PG = { host: process.env.BENCH_PG_HOST ?? '127.0.0.1', port: Number(process.env.BENCH_PG_PORT ?? 5432), user: 'postgres' };
const BUFFERED_N = Number(process.env.BENCH_AUDIT_N ?? 100_000);
const STRICT_REQUESTS = Number(process.env.BENCH_AUDIT_REQUESTS ?? 4_000);
const CONCURRENCY = Number(process.env.BENCH_AUDIT_CONCURRENCY ?? 16);
/** CPU section: entries per measurement, batch size (audit.batch_size's default), alternating rounds per path. */
const CPU_N = Number(process.env.BENCH_AUDIT_CPU_N ?? 20_000);
const CPU_BATCH = Number(process.env.BENCH_AUDIT_BATCH ?? 500);
const CPU_ROUNDS = Number(process.env.BENCH_AUDIT_ROUNDS ?? 5);
const quiet = { info() {}, warn() {}, error() {} };

function entry(i: number): AuditEntry {
  const now = Date.now();
  return {
    id: newAuditId(now), ts: new Date(now).toISOString(), request_id: `bench-${i}`, channel: 'http', identity_id: (i % 50) + 1,
    admin_user_id: null, source_id: 'orders', operation: 'read', method: 'GET', path: '/v1/orders/123', sql_fingerprint: null,
    sql_normalized: null, tables: [], decision: 'allow', reasons: ['grant:reader'], policy_ids: [3], approval_id: null, status: 200,
    upstream_status: 200, cache: 'miss', redactions: 1, bytes_in: 0, bytes_out: 2048, duration_ms: 3.2, client_ip: '10.0.0.1',
    action: null, target: null, changes: null, error_code: null,
  };
}

/** What the wire listener records for a read: fingerprint, normalized SQL, table, the policy trail. */
function pgwireEntry(i: number): AuditEntry {
  const now = Date.now();
  return {
    id: newAuditId(now), ts: new Date(now).toISOString(), request_id: `pgw-${i}`, channel: 'pgwire', identity_id: (i % 50) + 1,
    admin_user_id: null, source_id: 'warehouse', operation: 'read', method: null, path: null, sql_fingerprint: '4f1c2a9be07d3c15',
    sql_normalized: 'SELECT o.id, o.status, o.total_cents FROM public.orders o WHERE o.customer_id = $1 AND o.created_at > $2 ORDER BY o.created_at DESC LIMIT $3',
    tables: ['public.orders'], decision: 'allow', reasons: ['source role: reader allows read', 'policy 3 (reads) at priority 100: allow'], policy_ids: [3],
    approval_id: null, status: 0, upstream_status: null, cache: 'bypass', redactions: 2, bytes_in: 142, bytes_out: 5230, duration_ms: 1.734,
    client_ip: '127.0.0.1', action: null, target: null, changes: null, error_code: null,
  };
}

const KINDS = { proxy: entry, pgwire: pgwireEntry } as const;

async function throughput(port: AuditPort, n: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const w = port.write(entry(i));
    // Yield now and then, as a server between requests would.
    if (i % 500 === 0) await w;
    if (i % 5_000 === 0) await new Promise((r) => setImmediate(r));
  }
  await port.flush();
  return n / ((performance.now() - t0) / 1000);
}

/** Per-request latency of `await write()` with CONCURRENCY requests in flight. */
async function latencies(port: AuditPort, requests: number, concurrency: number): Promise<number[]> {
  const out: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < requests) {
      const i = next++;
      const t0 = performance.now();
      await port.write(entry(i));
      out.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return out.sort((a, b) => a - b);
}

const admin = new pg.Client({ ...PG, database: 'postgres' });
await admin.connect();
const name = `gh_bench_audit_${randomBytes(4).toString('hex')}`;
await admin.query(`create database "${name}"`);
const spoolDir = await mkdtemp(path.join(tmpdir(), 'gh-bench-spool-'));
const pool = new pg.Pool({ ...PG, database: name, max: 8 });
pool.on('error', () => undefined);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
const copyIn = poolCopyIn(pool, `${PG.host}:${PG.port}/${name}`);
// One connection, kept: the CPU section reads its server backend's CPU time from /proc.
const onePool = new pg.Pool({ ...PG, database: name, max: 1, idleTimeoutMillis: 0 });
onePool.on('error', () => undefined);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const oneDb = new Kysely<any>({ dialect: new PostgresDialect({ pool: onePool }) });
const oneCopyIn = poolCopyIn(onePool, `${PG.host}:${PG.port}/${name}`);
let failed: boolean;
try {
  await migrateToLatest(db);
  const { rows } = await pool.query<{ s: string; f: string }>("select current_setting('synchronous_commit') as s, current_setting('fsync') as f");
  console.log(`gatehouse audit benchmark — node ${process.versions.node}, PostgreSQL ${PG.host}:${PG.port} (synchronous_commit=${rows[0]!.s}, fsync=${rows[0]!.f}), ${new Date().toISOString()}`);

  // Buffered throughput, through each store path (the writer uses COPY when given the store's copyIn).
  const memRate = await throughput(new MemoryAuditSink(), BUFFERED_N);
  console.log(`\nbuffered: ${BUFFERED_N} entries`);
  console.log(`  in-memory sink   ${Math.round(memRate).toLocaleString('en')} entries/s`);
  let bufferedPass = true;
  const rates: Record<string, number> = {};
  for (const path of ['insert', 'copy'] as const) {
    await pool.query('truncate audit_entries');
    const buffered = new AuditWriter({
      db, copyIn: path === 'copy' ? copyIn : undefined, logger: quiet,
      config: auditSchema.parse({ durability_mode: 'buffered', buffer_max_entries: BUFFERED_N, batch_size: 1_000, spool: { dir: spoolDir } }),
    });
    await buffered.start();
    const t0 = performance.now();
    await throughput(buffered, BUFFERED_N);
    // Counted until every entry is committed, spool included.
    while (buffered.stats().spooled_entries > 0) await buffered.replayNow();
    const pgRate = BUFFERED_N / ((performance.now() - t0) / 1000);
    rates[path] = pgRate;
    const bStats = buffered.stats();
    await buffered.close();
    const stored = Number((await pool.query<{ n: string }>('select count(*) as n from audit_entries')).rows[0]!.n);
    console.log(`  postgres ${path.padEnd(7)} ${Math.round(pgRate).toLocaleString('en')} entries/s  (ratio ${(pgRate / memRate).toFixed(4)} of in-memory; stored ${stored}, spooled ${bStats.spooled_entries}, written ${bStats.written})`);
    bufferedPass &&= pgRate >= 20_000 && stored === BUFFERED_N;
  }
  console.log(`  copy / insert    ${(rates.copy! / rates.insert!).toFixed(2)}× entries/s`);
  console.log(`  goal ≥ 20,000 entries/s, all stored: ${bufferedPass ? 'PASS' : 'FAIL'}`);

  // Strict added latency, through each store path: one request at a time (the goal, on the production path: COPY),
  // then CONCURRENCY in flight (closed loop, informational).
  let strictPass = true;
  for (const concurrency of [1, CONCURRENCY]) {
    const memLat = await latencies(new MemoryAuditSink(), STRICT_REQUESTS, concurrency);
    const [m50, m99] = [quantile(memLat, 0.5), quantile(memLat, 0.99)];
    console.log(`\nstrict: ${STRICT_REQUESTS} requests, ${concurrency} concurrent, group commit`);
    console.log(`  in-memory sink   p50 ${m50.toFixed(3)} ms  p99 ${m99.toFixed(3)} ms`);
    for (const path of ['insert', 'copy'] as const) {
      const strict = new AuditWriter({
        db, copyIn: path === 'copy' ? copyIn : undefined, logger: quiet, strictConcurrency: 8,
        config: auditSchema.parse({ durability_mode: 'strict', batch_size: 500, spool: { dir: spoolDir } }),
      });
      await strict.start();
      await latencies(strict, 200, concurrency); // warm the pool
      const strictLat = await latencies(strict, STRICT_REQUESTS, concurrency);
      const sStats = strict.stats();
      await strict.close();
      const [s50, s99] = [quantile(strictLat, 0.5), quantile(strictLat, 0.99)];
      console.log(`  postgres ${path.padEnd(7)} p50 ${s50.toFixed(3)} ms  p99 ${s99.toFixed(3)} ms  (ratio p50 ${(s50 / Math.max(m50, 1e-6)).toFixed(0)}×, p99 ${(s99 / Math.max(m99, 1e-6)).toFixed(0)}×; spooled ${sStats.spooled_entries})`);
      console.log(`    added          p50 ${(s50 - m50).toFixed(3)} ms  p99 ${(s99 - m99).toFixed(3)} ms`);
      if (concurrency === 1 && path === 'copy') strictPass = s99 - m99 <= 2;
    }
    if (concurrency === 1) console.log(`  goal: strict (COPY) adds ≤ 2 ms p99 per request: ${strictPass ? 'PASS' : 'FAIL'}`);
    else console.log('  (closed loop: every request writes back to back, so this is queueing at saturation, not a goal)');
  }
  // The floor PostgreSQL sets on this disk: one single-row INSERT committed per request, no Gatehouse code.
  const floor: number[] = [];
  for (let i = 0; i < 300; i++) {
    const e = entry(i);
    const t = performance.now();
    await pool.query('insert into audit_entries (id, ts, request_id, channel, decision, status) values ($1, $2, $3, $4, $5, $6)', [newAuditId(), e.ts, 'floor', 'http', 'allow', 200]);
    floor.push(performance.now() - t);
  }
  floor.sort((a, b) => a - b);
  console.log(`  floor: plain INSERT+COMMIT, sequential  p50 ${quantile(floor, 0.5).toFixed(3)} ms  p99 ${quantile(floor, 0.99).toFixed(3)} ms`);

  const cpuKeep = await cpuPerEntry();
  failed = !bufferedPass || !strictPass || !cpuKeep;
} finally {
  await oneDb.destroy();
  await db.destroy();
  await admin.query(`drop database if exists "${name}"`);
  await admin.end();
  await rm(spoolDir, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;

// ---------------------------------------------------------------------------------------------
// CPU per entry of the two store paths

/** User + system CPU of a local process in µs (/proc/<pid>/stat counts clock ticks of 10 ms). */
function procCpuUs(pid: number): number {
  return (procTicks(pid) * 1e6) / CLOCK_TICKS;
}

/** Whether the server backend is a process of this host, so /proc tells its CPU. */
function isLocalPostgres(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres');
  } catch {
    return false;
  }
}

/** This process's CPU (all threads: the driver's socket writes and the GC count) in µs. */
function ownCpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}

/** JS cost per entry of turning a batch into what goes on the wire, payload and UTF-8 bytes, best of 5 passes. */
function encodeCost(batches: AuditEntry[][], encode: (b: AuditEntry[]) => Buffer): number {
  let best = Infinity;
  for (let pass = 0; pass < 5; pass++) {
    const t = ownCpuUs();
    for (const b of batches) encode(b);
    best = Math.min(best, (ownCpuUs() - t) / (batches.length * batches[0]!.length));
  }
  return best;
}

// Declarations, not consts: the benchmark above runs (top-level await) before this part of the module is evaluated.
function encodeJson(b: AuditEntry[]): Buffer {
  return Buffer.from(JSON.stringify(b));
}

function encodeCopy(b: AuditEntry[]): Buffer {
  const data = auditBinaryBatch(b)?.bytes ?? null;
  if (data === null) throw new Error('bench entries must be COPY-faithful');
  return data;
}

/**
 * Stores fresh entries in batches of `batchSize` through one connection and one path, into an emptied table; answers
 * the server backend's and this process's CPU per entry (the process figure is the whole store call: encoding, driver,
 * socket writes).
 */
async function storeCpu(path: 'insert' | 'copy', entries: AuditEntry[], batchSize: number, backendPid: number): Promise<{ pg: number; js: number }> {
  await onePool.query('truncate audit_entries');
  const store = (batch: AuditEntry[]): Promise<number> => (path === 'copy' ? copyAuditEntries(oneDb, oneCopyIn, batch, 30_000) : insertAuditEntries(oneDb, batch));
  const batches: AuditEntry[][] = [];
  for (let i = 0; i < entries.length; i += batchSize) batches.push(entries.slice(i, i + batchSize));
  const pg0 = procCpuUs(backendPid);
  const js0 = ownCpuUs();
  for (const batch of batches) await store(batch);
  const js = (ownCpuUs() - js0) / entries.length;
  return { pg: (procCpuUs(backendPid) - pg0) / entries.length, js };
}

/** Prints the CPU section; true when COPY costs less PostgreSQL + gateway CPU per entry than the insert for every kind of entry, in batches of CPU_BATCH. */
async function cpuPerEntry(): Promise<boolean> {
  const { rows } = await onePool.query<{ pid: number }>('select pg_backend_pid() as pid');
  const backendPid = rows[0]!.pid;
  const local = isLocalPostgres(backendPid);
  console.log(`\nCPU per entry: ${CPU_ROUNDS} alternating rounds per path (median), one connection, table emptied before each`);
  if (!local) console.log('  (PostgreSQL is not a process of this host: backend CPU not measured)');
  let keep = true;
  for (const [kind, make] of Object.entries(KINDS)) {
    let n = 0;
    const fresh = (count: number): AuditEntry[] => Array.from({ length: count }, () => make(n++));
    const sample = Array.from({ length: 40 }, () => fresh(CPU_BATCH));
    const enc = { insert: encodeCost(sample, encodeJson), copy: encodeCost(sample, encodeCopy) };
    console.log(`  ${kind} entries`);
    console.log(`    encode a batch of ${CPU_BATCH} (JS)   JSON.stringify ${enc.insert.toFixed(2)} µs   COPY binary ${enc.copy.toFixed(2)} µs   ratio ${(enc.copy / enc.insert).toFixed(2)}`);
    // Batches of CPU_BATCH (buffered mode, strict under load) decide; single entries (strict, one request at a time) are shown.
    for (const [batchSize, count] of [[CPU_BATCH, CPU_N], [1, Math.round(CPU_N / 8)]] as const) {
      // Warm both paths (JIT, plans) before measuring.
      await storeCpu('insert', fresh(4 * batchSize), batchSize, backendPid);
      await storeCpu('copy', fresh(4 * batchSize), batchSize, backendPid);
      const runs: Record<'insert' | 'copy', { pg: number[]; js: number[] }> = { insert: { pg: [], js: [] }, copy: { pg: [], js: [] } };
      for (let round = 0; round < CPU_ROUNDS; round++) {
        for (const path of round % 2 === 0 ? (['insert', 'copy'] as const) : (['copy', 'insert'] as const)) {
          const r = await storeCpu(path, fresh(count), batchSize, backendPid);
          runs[path].js.push(r.js);
          runs[path].pg.push(r.pg);
        }
      }
      const fig = (path: 'insert' | 'copy') => ({ pg: local ? median(runs[path].pg) : 0, js: median(runs[path].js) });
      const [ins, cop] = [fig('insert'), fig('copy')];
      const total = (f: { pg: number; js: number }): number => f.pg + f.js;
      console.log(`    batches of ${batchSize}, ${count} entries`);
      if (local) console.log(`      PostgreSQL backend    insert ${ins.pg.toFixed(1)} µs   copy ${cop.pg.toFixed(1)} µs   ratio ${(cop.pg / ins.pg).toFixed(2)}`);
      console.log(`      gateway process (JS)  insert ${ins.js.toFixed(1)} µs   copy ${cop.js.toFixed(1)} µs   ratio ${(cop.js / ins.js).toFixed(2)}`);
      console.log(`      sum                   insert ${total(ins).toFixed(1)} µs   copy ${total(cop).toFixed(1)} µs   ratio ${(total(cop) / total(ins)).toFixed(2)}`);
      if (batchSize === CPU_BATCH) keep &&= total(cop) < total(ins);
    }
  }
  console.log(`  COPY costs less PostgreSQL + gateway CPU per entry than the insert (batches of ${CPU_BATCH}): ${keep ? 'PASS' : 'FAIL'}`);
  return keep;
}
