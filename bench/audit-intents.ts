// Write-intent benchmark (`npx tsx bench/audit-intents.ts`): what the durable intent adds to a strict write's audit path, one request at a time and 16 concurrent, against today's path on the same writer.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { auditSchema } from '../src/config/schema.js';
import { AuditWriter } from '../src/audit/writer.js';
import { newAuditId, type AuditEntry } from '../src/audit/entry.js';
import { poolCopyIn } from '../src/store/copy.js';
import { migrateToLatest } from '../src/store/migrate.js';
import { quantile } from './stats.js';

const PG = { host: process.env.BENCH_PG_HOST ?? '127.0.0.1', port: Number(process.env.BENCH_PG_PORT ?? 5432), user: 'postgres' };
const REQUESTS = Number(process.env.BENCH_INTENT_REQUESTS ?? 2_000);
const ROUNDS = Number(process.env.BENCH_INTENT_ROUNDS ?? 3);
const quiet = { info() {}, warn() {}, error() {} };

function writeEntry(i: number): AuditEntry {
  const now = Date.now();
  return {
    id: newAuditId(now), ts: new Date(now).toISOString(), request_id: `intent-${i}`, channel: 'http', identity_id: (i % 50) + 1,
    admin_user_id: null, source_id: 'orders', operation: 'write', method: 'POST', path: '/v1/orders', sql_fingerprint: null,
    sql_normalized: null, tables: [], decision: 'allow', reasons: ['grant:writer'], policy_ids: [3], approval_id: null, status: 0,
    upstream_status: null, cache: null, redactions: 0, bytes_in: 512, bytes_out: 0, duration_ms: 0, client_ip: '10.0.0.1',
    action: null, target: null, changes: null, error_code: null,
  };
}

/** Per request: (intent, then) the finished entry; the upstream's own time is not part of it. */
async function latencies(writer: AuditWriter, withIntent: boolean, concurrency: number): Promise<number[]> {
  const out: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < REQUESTS) {
      const e = writeEntry(next++);
      const t0 = performance.now();
      if (withIntent) await writer.recordIntent({ ...e });
      await writer.write({ ...e, status: 201, upstream_status: 201, bytes_out: 64, duration_ms: 2.5 });
      out.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return out.sort((a, b) => a - b);
}

const admin = new pg.Client({ ...PG, database: 'postgres' });
await admin.connect();
const name = `gh_bench_intents_${randomBytes(4).toString('hex')}`;
await admin.query(`create database "${name}"`);
const spoolDir = await mkdtemp(path.join(tmpdir(), 'gh-bench-intents-'));
const pool = new pg.Pool({ ...PG, database: name, max: 8 });
pool.on('error', () => undefined);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
try {
  await migrateToLatest(db);
  const writer = new AuditWriter({ db, copyIn: poolCopyIn(pool, name), logger: quiet, config: auditSchema.parse({ durability_mode: 'strict', spool: { dir: spoolDir } }) });
  await writer.start();
  console.log(`gatehouse write-intent benchmark — node ${process.versions.node}, PostgreSQL ${PG.host}:${PG.port}, spool on ${spoolDir}, ${REQUESTS} requests × ${ROUNDS} rounds, ${new Date().toISOString()}`);
  for (const concurrency of [1, 16]) {
    const rows: Record<string, number[][]> = { today: [], intent: [] };
    // Alternating rounds, so drift of a shared machine falls on both paths alike.
    for (let r = 0; r < ROUNDS; r++) {
      rows.today!.push(await latencies(writer, false, concurrency));
      rows.intent!.push(await latencies(writer, true, concurrency));
    }
    console.log(`\n${concurrency === 1 ? 'one request at a time' : `${concurrency} concurrent`} (ms per request's audit work, median of rounds)`);
    for (const [label, runs] of Object.entries(rows)) {
      const med = (q: number) => runs.map((s) => quantile(s, q)).sort((a, b) => a - b)[Math.floor(runs.length / 2)]!;
      console.log(`  ${label.padEnd(7)} p50 ${med(0.5).toFixed(3)}  p99 ${med(0.99).toFixed(3)}`);
    }
  }
  await writer.close();
} finally {
  await db.destroy();
  await admin.query(`drop database if exists "${name}"`);
  await admin.end();
  await rm(spoolDir, { recursive: true, force: true });
}
