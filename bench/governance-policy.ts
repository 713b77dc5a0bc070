// Policy decision benchmark: 1,000 policies across 100 sources, compared with a source-id linear scan measured in the same run.
import { compilePolicies } from '../src/governance/policy/compile.js';
import type { PolicyInput } from '../src/governance/policy/compile.js';
import { evaluate } from '../src/governance/policy/evaluate.js';
import type { PolicyRecord } from '../src/governance/policy/schema.js';
import { summarize, type Summary } from './stats.js';

const POLICIES = 1000;
const SOURCES = 100;
const INPUTS = 5000;
const WARMUP_ROUNDS = 3;
const MEASURED = 50_000;
const TARGET_MEDIAN_US = 10;

/** Small deterministic PRNG so every run measures the same policy set and inputs. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const rand = rng(42);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
const some = <T>(xs: readonly T[], max: number): T[] => {
  const n = 1 + Math.floor(rand() * max);
  return [...new Set(Array.from({ length: n }, () => pick(xs)))];
};

const sources = Array.from({ length: SOURCES }, (_, i) => `src-${String(i).padStart(3, '0')}`);
const roles = ['analyst', 'support', 'etl', 'admin', 'reporting', 'ml'];
const teams = ['data', 'ops', 'finance', 'growth'];
const schemas = ['public', 'sales', 'hr', 'billing', 'audit'];
const tableNames = ['users', 'orders', 'invoices', 'payments', 'events', 'employees', 'salaries', 'tickets'];
const tables = schemas.flatMap((s) => tableNames.map((t) => `${s}.${t}`));
const columnNames = ['id', 'email', 'ssn', 'amount', 'created_at', 'phone', 'card_number', 'name'];
const ops = ['read', 'write', 'ddl', 'admin'] as const;
const paths = ['/v1/users', '/v1/users/42', '/v1/orders/7/items', '/v2/reports/daily', '/admin/settings', '/v1/search'];

function makePolicy(id: number): PolicyRecord {
  const conditions: Record<string, unknown> = {};
  // 95% of policies name one or two exact sources; the rest are global or use a source glob.
  const r = rand();
  if (r < 0.95) conditions.source_ids = some(sources, 2);
  else if (r < 0.975) conditions.source_ids = [`src-0${Math.floor(rand() * 10)}*`];
  if (rand() < 0.6) conditions.operations = some(ops, 2);
  if (rand() < 0.3) conditions.identity_roles = some(roles, 2);
  if (rand() < 0.15) conditions.teams = some(teams, 1);
  if (rand() < 0.4) conditions.tables = rand() < 0.5 ? some(tables, 3) : [`${pick(schemas)}.*`];
  if (rand() < 0.2) conditions.columns = some(columnNames, 2);
  if (rand() < 0.15) conditions.paths = [rand() < 0.5 ? '/v1/**' : '/admin/*'];
  if (rand() < 0.1) conditions.methods = ['POST', 'DELETE'];
  if (rand() < 0.1) conditions.classification_tags = ['pii'];
  const actions: Record<string, unknown> = { effect: pick(['allow', 'allow', 'deny', 'require_approval']) };
  if (rand() < 0.3) actions.rate_limit = pick(['100/minute', '10/second', '1000/hour']);
  if (rand() < 0.3) actions.redact_columns = some(['email', 'ssn', '*.*.card_number', 'phone'], 2);
  if (rand() < 0.2) actions.pii_mode = pick(['fast', 'deep']);
  return { id, name: `policy-${id}`, priority: Math.floor(rand() * 10), enabled: rand() < 0.95, conditions, actions };
}

function makeInput(): PolicyInput {
  const http = rand() < 0.4;
  const t = http ? [] : some(tables, 3);
  return {
    identity: { id: 1 + Math.floor(rand() * 500), roles: some(roles, 2), team: rand() < 0.8 ? pick(teams) : null },
    source_id: pick(sources),
    operation: http ? (rand() < 0.7 ? 'read' : 'write') : pick(['read', 'read', 'read', 'write']),
    method: http ? pick(['GET', 'GET', 'POST', 'DELETE']) : undefined,
    path: http ? pick(paths) : undefined,
    tables: t,
    columns: t.length > 0 ? some(columnNames, 4).map((c) => `${t[0]}.${c}`) : [],
    classification_tags: rand() < 0.2 ? ['pii'] : [],
    roleDecision: { allowed: rand() < 0.95 },
  };
}

function measure(inputs: readonly PolicyInput[], fn: (i: PolicyInput) => unknown): Summary {
  let sink = 0;
  for (let w = 0; w < WARMUP_ROUNDS; w += 1) for (const i of inputs) sink += fn(i) === null ? 1 : 0;
  const times = new Float64Array(MEASURED);
  for (let k = 0; k < MEASURED; k += 1) {
    const i = inputs[k % inputs.length] as PolicyInput;
    const t0 = process.hrtime.bigint();
    const r = fn(i);
    const t1 = process.hrtime.bigint();
    sink += r === null ? 1 : 0;
    times[k] = Number(t1 - t0) / 1000;
  }
  if (sink < 0) console.log(sink);
  return summarize(times);
}

export async function bench(): Promise<void> {
  const records = Array.from({ length: POLICIES }, (_, i) => makePolicy(i + 1));
  const inputs = Array.from({ length: INPUTS }, makeInput);

  const c0 = process.hrtime.bigint();
  const set = compilePolicies(records, { version: 1 });
  const compileMs = Number(process.hrtime.bigint() - c0) / 1e6;

  // Baseline: the cheapest imaginable scan, one source-id comparison per policy, no conditions, no trace.
  const flat = records.map((r) => ({ id: r.id, sources: ((r.conditions as { source_ids?: string[] }).source_ids) ?? null }));
  const baseline = (i: PolicyInput): number => {
    let n = 0;
    for (const p of flat) if (p.sources === null || p.sources.includes(i.source_id)) n += 1;
    return n;
  };

  const base = measure(inputs, baseline);
  const engine = measure(inputs, (i) => evaluate(set, i));
  let candidates = 0;
  for (const i of inputs) candidates += evaluate(set, i).trace.length - 1;

  const pass = engine.median <= TARGET_MEDIAN_US;
  console.log('\n== policy decision (1,000 policies, 100 sources) ==');
  console.log(`compile: ${compileMs.toFixed(1)} ms; enabled policies ${set.policies.length}; mean candidates per decision ${(candidates / inputs.length).toFixed(1)}`);
  console.log(`baseline linear source-id scan: median ${base.median.toFixed(2)} µs, p99 ${base.p99.toFixed(2)} µs`);
  console.log(`policy engine evaluate():       median ${engine.median.toFixed(2)} µs, p99 ${engine.p99.toFixed(2)} µs`);
  console.log(`ratio engine/baseline: median ${(engine.median / base.median).toFixed(2)}×, p99 ${(engine.p99 / base.p99).toFixed(2)}×`);
  console.log(`target median ≤ ${TARGET_MEDIAN_US} µs: ${pass ? 'PASS' : 'FAIL'} (timer overhead of ~0.05 µs included in both)`);
}
