// SQL classification benchmark: cached and uncached typical OLTP statements, each against a baseline measured in the same run.
import { parseSync } from 'libpg-query';
import { SqlClassifier, initSqlParser } from '../src/governance/sql/index.js';
import { summarize, type Summary } from './stats.js';

const TARGET_CACHED_US = 2;
const TARGET_UNCACHED_US = 100;
/** Cached calls are timed in batches: one hrtime pair costs about as much as the call itself. */
const BATCH = 200;
const CACHED_SAMPLES = 2_000;
const UNCACHED_SAMPLES = 4_000;

/** Typical OLTP shapes; `n` makes every text distinct, as different literals would in real traffic. */
const TEMPLATES: readonly ((n: number) => string)[] = [
  (n) => `SELECT u.id, u.email, u.name FROM users u WHERE u.id = ${n}`,
  (n) => `SELECT o.id, o.total, o.status FROM orders o JOIN users u ON u.id = o.user_id WHERE u.id = ${n} AND o.status = 'paid' ORDER BY o.created_at DESC LIMIT 20`,
  (n) => `UPDATE accounts SET balance = balance - ${n % 500}, updated_at = now() WHERE id = ${n}`,
  (n) => `INSERT INTO events (user_id, kind, payload) VALUES (${n}, 'login', '{"ip":"10.0.${n % 256}.1"}') RETURNING id`,
  (n) => `DELETE FROM sessions WHERE user_id = ${n} AND expires_at < now()`,
  (n) => `SELECT count(*) FROM orders WHERE user_id = ${n} AND created_at > now() - interval '7 days'`,
];

function statements(count: number, offset: number): string[] {
  return Array.from({ length: count }, (_, i) => (TEMPLATES[i % TEMPLATES.length] as (n: number) => string)(offset + i));
}

let sink = 0;

/**
 * µs per call for two functions, each sample the mean of a batch of BATCH calls over `texts`. The
 * two alternate in rounds so that load from other processes falls on both alike.
 */
function batchedPair(texts: readonly string[], a: (sql: string) => unknown, b: (sql: string) => unknown): [Summary, Summary] {
  const rounds = 10;
  const per = CACHED_SAMPLES / rounds;
  const ta = new Float64Array(CACHED_SAMPLES);
  const tb = new Float64Array(CACHED_SAMPLES);
  const run = (fn: (sql: string) => unknown, out: Float64Array, from: number, n: number): void => {
    for (let s = 0; s < n; s += 1) {
      const t0 = process.hrtime.bigint();
      for (let k = 0; k < BATCH; k += 1) sink += fn(texts[(s + k) % texts.length] as string) === undefined ? 1 : 0;
      if (out.length > 0) out[from + s] = Number(process.hrtime.bigint() - t0) / 1000 / BATCH;
    }
  };
  run(a, new Float64Array(0), 0, 20);
  run(b, new Float64Array(0), 0, 20);
  for (let r = 0; r < rounds; r += 1) {
    run(a, ta, r * per, per);
    run(b, tb, r * per, per);
  }
  return [summarize(ta), summarize(tb)];
}

/** µs per call, one sample per call, every text used once. */
function single(texts: readonly string[], fn: (sql: string) => unknown): Summary {
  const times = new Float64Array(texts.length);
  for (let i = 0; i < texts.length; i += 1) {
    const sql = texts[i] as string;
    const t0 = process.hrtime.bigint();
    sink += fn(sql) === undefined ? 1 : 0;
    times[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  return summarize(times);
}

const fmt = (s: Summary): string => `median ${s.median.toFixed(2)} µs, p99 ${s.p99.toFixed(2)} µs`;
const ratio = (a: Summary, b: Summary): string => `median ${(a.median / b.median).toFixed(2)}×, p99 ${(a.p99 / b.p99).toFixed(2)}×`;

export async function bench(): Promise<void> {
  await initSqlParser();
  const classifier = new SqlClassifier();

  // Cached: a working set of 64 statements, all classified once; baseline a Map.get of the same text.
  const hot = statements(64, 1);
  const map = new Map<string, unknown>();
  for (const sql of hot) map.set(sql, classifier.classify(sql));
  const [baseCached, cached] = batchedPair(hot, (sql) => map.get(sql), (sql) => classifier.classify(sql));

  // Uncached: distinct texts so every call misses; warm the JIT on other texts first.
  // Baseline: raw parseSync of the very same texts (what any SQL-aware gateway must at least do).
  for (const sql of statements(1_000, 1_000_000)) sink += classifier.classify(sql).ok ? 1 : 0;
  for (const sql of statements(1_000, 2_000_000)) sink += parseSync(sql).stmts?.length ?? 0;
  const cold = statements(UNCACHED_SAMPLES, 3_000_000);
  const baseUncached = single(cold, (sql) => parseSync(sql));
  const coldClassifier = new SqlClassifier();
  const uncached = single(cold, (sql) => coldClassifier.classify(sql));
  if (coldClassifier.cachedEntries !== Math.min(UNCACHED_SAMPLES, 10_000)) throw new Error('uncached run hit the cache');

  const passCached = cached.median <= TARGET_CACHED_US;
  const passUncached = uncached.median <= TARGET_UNCACHED_US;
  console.log('\n== SQL classification (libpg-query 18) ==');
  console.log(`cached statement: baseline Map.get  ${fmt(baseCached)}`);
  console.log(`cached statement: classify()        ${fmt(cached)}`);
  console.log(`cached ratio classify/Map.get:      ${ratio(cached, baseCached)}`);
  console.log(`cached target median ≤ ${TARGET_CACHED_US} µs: ${passCached ? 'PASS' : 'FAIL'}`);
  console.log(`uncached OLTP: baseline parseSync   ${fmt(baseUncached)}`);
  console.log(`uncached OLTP: classify()           ${fmt(uncached)}  (parse + walk + fingerprint + normalize + cache insert)`);
  console.log(`uncached ratio classify/parseSync:  ${ratio(uncached, baseUncached)}`);
  console.log(`uncached target median ≤ ${TARGET_UNCACHED_US} µs: ${passUncached ? 'PASS' : 'FAIL'}`);
  if (sink === -1) console.log(sink);
}
