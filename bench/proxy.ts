// HTTP proxy benchmark: the upstream directly, nginx as a plain reverse proxy, Gatehouse on an origin miss and on a cache hit (with OTLP export off and on; authenticated by an agent JWT from a real OpenID provider), and a bare Node proxy as the platform's floor — one run, loopback, small JSON, ratios with PASS/FAIL.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { createWriteStream, existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import { createTestDatabase } from '../test/support/pg.js';
import { ownerToken } from '../test/support/world.js';
import { REVOCATION_MARKER_MS } from '../src/identity/key-sessions.js';
import { TestProvider } from '../test/support/oidc-provider.js';
import { cpuMeter, kernelMeter, processTree } from './proc.js';
import { median, quantile } from './stats.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const WARMUP_S = 2;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const AUDIT_MODE = process.env.BENCH_AUDIT_MODE ?? 'buffered';
const NGINX = process.env.BENCH_NGINX ?? '/usr/sbin/nginx';
/** Extra node arguments for the Gatehouse process, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it. */
const GATEHOUSE_NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
/** BENCH_LATENCY_DETAIL=1 prints each case's latency distribution (autocannon's whole milliseconds) as it ends. */
const LATENCY_DETAIL = process.env.BENCH_LATENCY_DETAIL === '1';
/**
 * Seconds of the sequential latency probe (one connection, one request at a time) run after the load for (a), (c),
 * (d) and (e); 0 skips it. It shows what a proxy adds to one request when nothing queues, in microseconds.
 */
const PROBE_S = Number(process.env.BENCH_PROBE_S ?? 5);
/** Only these cases (letters a–h), e.g. `BENCH_CASES=d` while profiling the hit path; each ratio is printed when its cases ran. */
const CASES = new Set((process.env.BENCH_CASES ?? 'abcdefgh').split(''));
/** (h) a cache hit authenticated by an agent JWT against (d) the same hit with an API key (docs/agent-jwt.md: verified JWTs are remembered until exp). */
const GOAL_JWT_VS_KEY_HIT = 0.9;
const AGENT_AUDIENCE = 'https://gatehouse.bench/agents';
const AGENT_CLIENT = { client_id: 'bench-agent', client_secret: 'bench-agent-secret-0000000001' };
/** Telemetry cases (f) miss and (g) hit: the same as (c) and (d) on a second Gatehouse exporting OTLP to a local receiver (docs/observability.md). */
const GOAL_TELEMETRY_RATIO = 0.95;
/** Rounds of each telemetry off/on pair (BENCH_TELEMETRY_ROUNDS); with more than one, each case's figures are summed over its rounds. */
const TELEMETRY_ROUNDS = Number(process.env.BENCH_TELEMETRY_ROUNDS ?? 4);
/** The telemetry cases run against a second Gatehouse that does not export (an A/A control of the pair; BENCH_TELEMETRY_AA=1). */
const TELEMETRY_AA = process.env.BENCH_TELEMETRY_AA === '1';
/**
 * Gateway processes (gateway.processes), one per core by default: how an operator runs Gatehouse on a host.
 * nginx is measured with one worker and with as many workers as Gatehouse has processes, and the better of
 * the two is (b), so the comparison never favours Gatehouse by handicapping nginx.
 */
const PROCESSES = Number(process.env.BENCH_GATEWAY_PROCESSES ?? availableParallelism());
const ROOT = path.resolve(import.meta.dirname, '..');
const PASSWORD = 'bench-owner-password-0001';

/**
 * Rounds of the cases (BENCH_ROUNDS): each round measures every case once, in the opposite order of the round before.
 * This machine's speed moves by up to 2× within minutes, so each ratio is taken within a round and the median of the
 * rounds' ratios is the one judged (docs/decisions/0032-ratios-within-rounds.md).
 */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const GOAL_P99_OVERHEAD_MS = 3;
/** The performance issue's goals: against the floors measured in the same run. */
const GOAL_MISS_VS_BARE = 0.7;
const GOAL_HIT_VS_NGINX = 0.75;
const GOAL_UNQUEUED_OVERHEAD_MS = 0.5;
/** The long-run mark against nginx, still printed. */
const GOAL_MISS_VS_NGINX = 0.35;

interface Figures {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** CPU microseconds per request of the case's proxy (or upstream) processes, from /proc; null when not measured. */
  cpuUs: number | null;
  /** Of cpuUs, the kernel's (system-mode) microseconds per request; null when not measured. */
  sysUs: number | null;
  /** Read- and write-family system calls per request of the same processes (/proc/<pid>/io); null when not measured. */
  syscalls: number | null;
  /** A detail row (one nginx configuration), printed but not one of the cases. */
  extra?: boolean;
  /** Requests and seconds of the measured run, so rounds of one case can be summed. */
  requests?: number;
  seconds?: number;
  /** With OTLP export on: spans the receiver got per request, warm-up included. */
  spansPerRequest?: number | undefined;
}

type Case = 'a' | 'b' | 'c' | 'd' | 'e' | 'f' | 'g' | 'h';

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const child = spawn(cmd, args, { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return child;
}

async function waitFor(url: string, headers: Record<string, string> = {}, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(url, { headers });
      await res.arrayBuffer();
      if (res.status < 500) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not come up`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** The request target of an absolute URL; the load generator shares the cores with the subject, so it parses once. */
function pathAndQuery(url: string): string {
  const u = new URL(url);
  return u.pathname + u.search;
}

/** Runs one case; `pids` names the processes whose CPU per request is reported (the proxy's, with its workers or replicas). */
async function load(name: string, url: string | (() => string), headers: Record<string, string> = {}, pids: number[] = [], spansExported?: () => Promise<number>, overallRate?: number): Promise<Figures> {
  const opts = (duration: number) => {
    const base = { connections: CONNECTIONS, duration, headers, ...(overallRate !== undefined ? { overallRate } : {}) };
    if (typeof url === 'string') return { ...base, url };
    // A unique query per request: every request is an origin miss.
    const first = new URL(url());
    return { ...base, url: first.origin, requests: [{ setupRequest: (r: Record<string, unknown>) => ({ ...r, path: pathAndQuery(url()) }) }] };
  };
  const spansBefore = spansExported ? await spansExported() : 0;
  const warm = await autocannon(opts(WARMUP_S) as autocannon.Options);
  const tree = pids.flatMap(processTree);
  const cpu = cpuMeter(tree);
  const kernel = kernelMeter(tree);
  const r = await autocannon(opts(DURATION_S) as autocannon.Options);
  const measured = tree.length > 0 && r.requests.total > 0;
  const cpuUs = measured ? cpu() / r.requests.total : null;
  const k = kernel();
  const sysUs = measured ? k.systemUs / r.requests.total : null;
  const syscalls = measured ? k.syscalls / r.requests.total : null;
  let spansPerRequest: number | undefined;
  if (spansExported) {
    // The batch span processor sends within a second of a span's end (src/observability/telemetry.ts).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    spansPerRequest = ((await spansExported()) - spansBefore) / (warm.requests.total + r.requests.total);
  }
  if (LATENCY_DETAIL) {
    const l = r.latency;
    console.log(`  ${name}: latency ms p50 ${l.p50} · p90 ${l.p90} · p97.5 ${l.p97_5} · p99 ${l.p99} · p99.9 ${l.p99_9} · max ${l.max}`);
  }
  return { name, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx, cpuUs, sysUs, syscalls, requests: r.requests.total, seconds: r.duration, spansPerRequest };
}

/** One case measured in several rounds: requests per second and CPU per request over all of them, the worst p99. */
function combineRounds(rounds: Figures[]): Figures {
  if (rounds.length === 1) return rounds[0]!;
  const requests = rounds.reduce((t, r) => t + (r.requests ?? 0), 0);
  const seconds = rounds.reduce((t, r) => t + (r.seconds ?? 0), 0);
  // A per-request figure over all rounds: each round's weighted by its requests.
  const perRequest = (of: (r: Figures) => number | null): number | null => (rounds.every((r) => of(r) !== null) ? rounds.reduce((t, r) => t + of(r)! * (r.requests ?? 0), 0) / requests : null);
  return {
    name: rounds[0]!.name,
    rps: requests / seconds,
    p50: quantile(rounds.map((r) => r.p50).sort((x, y) => x - y), 0.5),
    p99: Math.max(...rounds.map((r) => r.p99)),
    errors: rounds.reduce((t, r) => t + r.errors, 0),
    non2xx: rounds.reduce((t, r) => t + r.non2xx, 0),
    cpuUs: perRequest((r) => r.cpuUs),
    sysUs: perRequest((r) => r.sysUs),
    syscalls: perRequest((r) => r.syscalls),
    spansPerRequest: rounds.every((r) => r.spansPerRequest !== undefined) ? rounds.reduce((t, r) => t + r.spansPerRequest!, 0) / rounds.length : undefined,
  };
}

async function startNginx(upstreamPort: number, workers: number): Promise<{ port: number; child: ChildProcess; dir: string }> {
  if (!existsSync(NGINX)) throw new Error(`${NGINX} is missing: apt-get install -y nginx`);
  const dir = await mkdtemp(path.join(tmpdir(), 'gh-bench-nginx-'));
  await mkdir(path.join(dir, 'logs'));
  const port = await freePort();
  const conf = `
worker_processes ${workers};
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  # Keep the load generator's connections open for the whole run, as Gatehouse does (nginx closes after 1,000 requests by default).
  keepalive_requests 10000000;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream backend { server 127.0.0.1:${upstreamPort}; keepalive 64; keepalive_requests 10000000; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}`;
  await writeFile(path.join(dir, 'nginx.conf'), conf);
  const child = run(NGINX, ['-p', dir, '-c', path.join(dir, 'nginx.conf')]);
  await waitFor(`http://127.0.0.1:${port}/x`);
  return { port, child, dir };
}

/**
 * Case (e): bench/proxy-bare.ts as PROCESSES processes on one port, started like the upstream. Its first stdout
 * line says every process listens; a probe alone could be answered by the first one up.
 */
async function startBare(upstreamPort: number): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = run(process.execPath, ['bench/proxy-bare.ts', String(upstreamPort), String(port), String(PROCESSES)]);
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`bare proxy exited (${String(code)}): ${stderr.slice(-2000)}`)));
  });
  await waitFor(`http://127.0.0.1:${port}/x`);
  return { port, child };
}

/**
 * One Gatehouse as two processes on one store: `--role admin` (seeded through its API) and the measured `--role gateway`
 * (with its replicas). A role `all` process would also run the worker's pollers and sweeps, whose CPU would land in the
 * gateway's CPU per request unevenly between runs: two identical role-`all` instances differed by 6–12% per request
 * here (docs/decisions/0030-telemetry-overhead.md).
 */
async function startGatehouse(upstreamPort: number, idp: TestProvider, extraEnv: Record<string, string> = {}): Promise<{ child: ChildProcess; admin: ChildProcess; gatewayUrl: string; key: string; jwt: string; dropDb: () => Promise<void>; dir: string }> {
  const database = await createTestDatabase();
  const dir = await mkdtemp(path.join(tmpdir(), 'gh-bench-'));
  const [gatewayPort, adminPort, pgPort] = [await freePort(), await freePort(), await freePort()];
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    SERVICE_ENVIRONMENT: 'test',
    SERVICE_GATEWAY__HTTP_PORT: String(gatewayPort),
    SERVICE_GATEWAY__PG_PORT: String(pgPort),
    SERVICE_ADMIN__PORT: String(adminPort),
    SERVICE_ADMIN__BOOTSTRAP_PASSWORD: PASSWORD,
    SERVICE_DATABASE__URL: database.url,
    SERVICE_DATABASE__EMBEDDED_DIR: path.join(dir, 'pgdata'),
    SERVICE_REDIS__URL: 'redis://127.0.0.1:6379',
    SERVICE_REDIS__KEY_PREFIX: `ghbench:${randomBytes(6).toString('hex')}:`,
    SERVICE_AUDIT__DURABILITY_MODE: AUDIT_MODE,
    SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'bench',
    SERVICE_OBSERVABILITY__LOG_LEVEL: 'warn',
    SERVICE_GATEWAY__PROCESSES: String(PROCESSES),
    // Agent JWTs from a real OpenID provider on loopback, for case (h).
    SERVICE_AUTH__OIDC__ENABLED: 'true',
    SERVICE_AUTH__OIDC__ISSUER_URL: idp.issuer,
    SERVICE_AUTH__OIDC__ADMIN_CLIENT_ID: 'bench-admin',
    SERVICE_AUTH__OIDC__ADMIN_CLIENT_SECRET_REF: 'env:GH_BENCH_OIDC_SECRET',
    GH_BENCH_OIDC_SECRET: 'bench-admin-secret-0000000000001',
    SERVICE_AUTH__OIDC__ADMIN_REDIRECT_URI: 'http://127.0.0.1:1/auth/oidc/callback',
    SERVICE_AUTH__OIDC__AGENT_AUDIENCE: AGENT_AUDIENCE,
    SERVICE_AUTH__OIDC__ALLOW_INSECURE_ENDPOINTS: 'true',
    SERVICE_AUTH__OIDC__ALLOW_PRIVATE_NETWORK: 'true',
    // SERVICE_* variables of the bench's environment configure Gatehouse further (e.g. SERVICE_AUDIT__BATCH_SIZE), as in bench:pgwire.
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('SERVICE_'))),
    ...extraEnv,
  };
  const built = existsSync(path.join(ROOT, 'dist/main.js')) && process.env.BENCH_FROM_SOURCE !== '1';
  let stderr = '';
  const startRole = (role: 'admin' | 'gateway', nodeArgs: string[]): ChildProcess => {
    // Each process keeps its own audit spool (two processes cannot share one).
    const roleEnv = { ...env, SERVICE_AUDIT__SPOOL__DIR: path.join(dir, `audit-spool-${role}`) };
    const child = built
      ? run(process.execPath, [...nodeArgs, 'dist/main.js', 'start', '--role', role], roleEnv)
      : run(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/main.ts', 'start', '--role', role], roleEnv);
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    // Always drain the service's log stream: an unread pipe fills up and stalls every log write in the service.
    child.stdout?.pipe(createWriteStream(path.join(process.env.BENCH_LOG_DIR ?? dir, `gatehouse-${role}.log`)));
    return child;
  };
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  // The admin migrates the store at start (outside production); the gateway starts on the migrated store.
  const adminChild = startRole('admin', []);
  let child: ChildProcess | undefined;
  try {
    await waitFor(`${adminUrl}/health`, {}, 60_000);
    child = startRole('gateway', GATEHOUSE_NODE_ARGS);
    await waitFor(`${gatewayUrl}/health`, {}, 30_000);
  } catch (err) {
    throw new Error(`gatehouse did not start: ${String(err)}\n${stderr.slice(-2000)}`, { cause: err });
  }
  const token = await ownerToken(adminUrl, PASSWORD);
  const admin = async (method: string, p: string, json: unknown) => {
    const res = await fetch(adminUrl + p, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(json) });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  await admin('POST', '/api/data-sources', { name: 'bench', source_id: 'bench', source_type: 'http', connection_config: { base_url: `http://127.0.0.1:${upstreamPort}/` }, create_default_roles: true });
  const identity = await admin('POST', '/api/identities', { name: 'bench-agent', generate_key: true });
  await admin('POST', `/api/identities/${String(identity.id)}/grants`, { source_id: 'bench', role_key: 'reader' });
  // Origin misses: /miss/** is never cached, so every request goes through the whole pipeline to the upstream.
  await admin('POST', '/api/policies', { name: 'bench: no cache on /miss', conditions: { source_ids: ['bench'], paths: ['/miss/**'] }, actions: { effect: 'allow', cache: false } });
  const key = identity.api_key as string;
  await admin('PUT', `/api/admin-auth/oidc/agents/${String(identity.id)}`, { subject: AGENT_CLIENT.client_id });
  const jwt = await idp.agentToken(AGENT_CLIENT.client_id, AGENT_CLIENT.client_secret);
  // The registry and policy set reload on change announcements: wait until a governed GET answers.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const res = await fetch(`${gatewayUrl}/proxy/bench/miss/ready`, { headers: { authorization: `Bearer ${key}` } });
    await res.arrayBuffer();
    const hit = await fetch(`${gatewayUrl}/proxy/bench/miss/ready`, { headers: { authorization: `Bearer ${key}` } });
    await hit.arrayBuffer();
    if (res.status === 200 && hit.headers.get('x-gatehouse-cache') !== 'hit') break;
    if (Date.now() > deadline) throw new Error(`gatehouse proxy not ready: ${res.status} ${hit.headers.get('x-gatehouse-cache')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const warm = await fetch(`${gatewayUrl}/proxy/bench/hit/item`, { headers: { authorization: `Bearer ${key}` } });
  await warm.arrayBuffer();
  const second = await fetch(`${gatewayUrl}/proxy/bench/hit/item`, { headers: { authorization: `Bearer ${key}` } });
  await second.arrayBuffer();
  if (second.headers.get('x-gatehouse-cache') !== 'hit') throw new Error(`cache hit path not cached: ${second.headers.get('x-gatehouse-cache')}`);
  // Measure the steady state: the grant just made left a key-session revocation marker, during which every
  // request of the identity reads the control store (src/identity/key-sessions.ts).
  await new Promise((r) => setTimeout(r, REVOCATION_MARKER_MS + 500));
  const viaJwt = await fetch(`${gatewayUrl}/proxy/bench/hit/item`, { headers: { authorization: `Bearer ${jwt}` } });
  await viaJwt.arrayBuffer();
  if (viaJwt.headers.get('x-gatehouse-cache') !== 'hit') throw new Error(`JWT hit path not a hit: ${viaJwt.status} ${viaJwt.headers.get('x-gatehouse-cache')}`);
  return { child: child!, admin: adminChild, gatewayUrl, key, jwt, dir, dropDb: () => database.drop() };
}

interface Probe {
  name: string;
  requests: number;
  /** Microseconds from sending a request to its last body byte. */
  p50: number;
  p99: number;
  p999: number;
}

/**
 * One keep-alive connection, one request at a time, for PROBE_S seconds after a second of warm-up: each request's
 * time from send to the end of its body, with nothing queued in front of it. Closed loop, so the probe's own timer
 * jitter never enters (an open-loop pacer on this VM measured its own jitter, docs/decisions/0001).
 */
async function probe(name: string, url: string | (() => string), headers: Record<string, string> = {}): Promise<number[]> {
  const next = typeof url === 'string' ? () => url : url;
  const pool = new Pool(new URL(next()).origin, { connections: 1, pipelining: 1 });
  const samples: number[] = [];
  try {
    for (const phase of ['warm-up', 'measure'] as const) {
      const until = performance.now() + (phase === 'warm-up' ? 1000 : PROBE_S * 1000);
      while (performance.now() < until) {
        const started = process.hrtime.bigint();
        const res = await pool.request({ method: 'GET', path: pathAndQuery(next()), headers });
        await res.body.arrayBuffer();
        if (res.statusCode !== 200) throw new Error(`${name}: status ${res.statusCode}`);
        if (phase === 'measure') samples.push(Number(process.hrtime.bigint() - started) / 1000);
      }
    }
  } finally {
    await pool.close();
  }
  return samples;
}

/** The probe's figures over every round of one case. */
function probeOf(name: string, samples: readonly number[]): Probe {
  const sorted = Float64Array.from(samples).sort();
  return { name, requests: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), p999: quantile(sorted, 0.999) };
}

const fmt = (n: number, d = 0) => n.toFixed(d).padStart(9);

async function main(): Promise<void> {
  const upstreamPort = await freePort();
  const upstream = run(process.execPath, ['bench/proxy-upstream.ts', String(upstreamPort)]);
  await waitFor(`http://127.0.0.1:${upstreamPort}/x`);
  const nginxWorkers = [...new Set([1, PROCESSES])];
  // nginx only when (b) is measured: `BENCH_CASES=ce` runs without it installed.
  const nginxes = CASES.has('b') ? await Promise.all(nginxWorkers.map((w) => startNginx(upstreamPort, w))) : [];
  const idp = await TestProvider.start({ agentClients: [AGENT_CLIENT], agentAudience: AGENT_AUDIENCE });
  const gh = await startGatehouse(upstreamPort, idp);
  // (f), (g): a local OTLP/HTTP receiver in its own process, and a Gatehouse exporting every span and metric to it.
  const telemetry = CASES.has('f') || CASES.has('g');
  const sinkPort = telemetry ? await freePort() : 0;
  const sink = telemetry ? run(process.execPath, ['bench/otlp-sink.ts', String(sinkPort)]) : null;
  if (sink) await waitFor(`http://127.0.0.1:${sinkPort}/ready`);
  // BENCH_TELEMETRY_AA=1 starts the second Gatehouse without export: (f)/(c) and (g)/(d) then show the bench's own
  // difference between two identical instances, the floor below which it cannot resolve the cost of export.
  const exportEnv: Record<string, string> = TELEMETRY_AA ? {} : { SERVICE_OBSERVABILITY__OTLP_ENDPOINT: `http://127.0.0.1:${sinkPort}`, SERVICE_OBSERVABILITY__METRICS_EXPORT_INTERVAL_MS: '5000' };
  const ghOtel = telemetry ? await startGatehouse(upstreamPort, idp, exportEnv) : null;
  const authOtel: Record<string, string> = ghOtel ? { authorization: `Bearer ${ghOtel.key}` } : {};
  const bare = CASES.has('e') ? await startBare(upstreamPort) : null;
  const auth = { authorization: `Bearer ${gh.key}` };
  let n = 0;
  try {
    const cases: Partial<Record<Case, Figures>> = {};
    /** The bare proxy run at the miss's rate, and both CPU figures per request (µs). */
    let equalRate: { rate: number; missUs: number; floorUs: number } | null = null;
    /** (c) and (d) as measured beside (f) and (g), for the telemetry ratios. */
    const telemetryOff: Partial<Record<Case, Figures>> = {};
    const details: Figures[] = [];
    /** Each round's figures of a case, in round order (b: the better nginx configuration of that round). */
    const perRound: Partial<Record<Case, Figures[]>> = {};
    const nginxRounds: Figures[][] = nginxes.map(() => []);
    const measures: Array<[Case, () => Promise<Figures>]> = [];
    if (CASES.has('a')) measures.push(['a', () => load('(a) upstream direct', `http://127.0.0.1:${upstreamPort}/item`, {}, [upstream.pid!])]);
    if (CASES.has('b')) {
      measures.push([
        'b',
        async () => {
          const each: Figures[] = [];
          for (const [i, nginx] of nginxes.entries()) {
            const f = await load(`    nginx, ${nginxWorkers[i]} worker${nginxWorkers[i] === 1 ? '' : 's'}`, `http://127.0.0.1:${nginx.port}/item`, {}, [nginx.child.pid!]);
            nginxRounds[i]!.push(f);
            each.push(f);
          }
          return { ...each.reduce((x, y) => (y.rps > x.rps ? y : x)), name: '(b) nginx proxy, best', extra: false };
        },
      ]);
    }
    if (CASES.has('c')) measures.push(['c', () => load('(c) gatehouse miss', () => `${gh.gatewayUrl}/proxy/bench/miss/item?n=${n++}`, auth, [gh.child.pid!])]);
    if (CASES.has('d')) measures.push(['d', () => load('(d) gatehouse hit', `${gh.gatewayUrl}/proxy/bench/hit/item`, auth, [gh.child.pid!])]);
    if (CASES.has('h')) measures.push(['h', () => load('(h) hit, agent JWT', `${gh.gatewayUrl}/proxy/bench/hit/item`, { authorization: `Bearer ${gh.jwt}` }, [gh.child.pid!])]);
    // The same unique-query misses as (c), so both proxies parse and forward the same request line.
    if (bare !== null) measures.push(['e', () => load('(e) bare node proxy', () => `http://127.0.0.1:${bare.port}/miss/item?n=${n++}`, {}, [bare.child.pid!])]);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [which, measure] of round % 2 === 0 ? measures : [...measures].reverse()) (perRound[which] ??= []).push(await measure());
    }
    for (const [which, figures] of Object.entries(perRound) as Array<[Case, Figures[]]>) {
      cases[which] = combineRounds(figures);
      if (figures.length > 1) for (const [i, f] of figures.entries()) details.push({ ...f, name: `    round ${i + 1} ${which}`, extra: true });
    }
    // The floor at the miss's own rate: a proxy's CPU per request depends on its rate (at a lower one, fewer requests
    // share each wake-up), so (e)'s figure at its full rate would overstate what Gatehouse adds (docs/decisions/0028).
    if (bare !== null && cases.c && cases.c.cpuUs !== null) {
      const rate = Math.max(1, Math.round(cases.c.rps));
      const floor = await load('(e) at the miss rate', () => `http://127.0.0.1:${bare.port}/miss/item?n=${n++}`, {}, [bare.child.pid!], undefined, rate);
      details.push({ ...floor, extra: true });
      if (floor.cpuUs !== null) equalRate = { rate, missUs: cases.c.cpuUs, floorUs: floor.cpuUs };
    }
    for (const figures of nginxRounds) if (figures.length > 0) details.push({ ...combineRounds(figures), extra: true });
    // Telemetry off and on are measured as adjacent pairs, in TELEMETRY_ROUNDS rounds that alternate which goes first,
    // so a change of the machine's load during the run weighs on both sides of the ratio alike.
    if (ghOtel) {
      const missOff = () => load('(c) gatehouse miss', () => `${gh.gatewayUrl}/proxy/bench/miss/item?n=${n++}`, auth, [gh.child.pid!]);
      const spansExported = async () => ((await (await fetch(`http://127.0.0.1:${sinkPort}/stats`)).json()) as { spans: number }).spans;
      const missOn = () => load('(f) miss, telemetry on', () => `${ghOtel.gatewayUrl}/proxy/bench/miss/item?n=${n++}`, authOtel, [ghOtel.child.pid!], spansExported);
      const hitOff = () => load('(d) gatehouse hit', `${gh.gatewayUrl}/proxy/bench/hit/item`, auth, [gh.child.pid!]);
      const hitOn = () => load('(g) hit, telemetry on', `${ghOtel.gatewayUrl}/proxy/bench/hit/item`, authOtel, [ghOtel.child.pid!], spansExported);
      const pairs: Array<[Case, () => Promise<Figures>, Case, () => Promise<Figures>]> = [];
      if (CASES.has('f')) pairs.push(['c', missOff, 'f', missOn]);
      if (CASES.has('g')) pairs.push(['d', hitOff, 'g', hitOn]);
      const rounds: Partial<Record<Case, Figures[]>> = {};
      for (let round = 0; round < TELEMETRY_ROUNDS; round++) {
        for (const [offCase, off, onCase, on] of pairs) {
          const order = round % 2 === 0 ? ([[offCase, off], [onCase, on]] as const) : ([[onCase, on], [offCase, off]] as const);
          for (const [which, measure] of order) (rounds[which] ??= []).push(await measure());
        }
      }
      // (f)/(c) and (g)/(d) are ratios of these adjacent pairs; the cases' own rows come from the rounds above.
      for (const [which, figures] of Object.entries(rounds) as Array<[Case, Figures[]]>) {
        const combined = combineRounds(figures);
        if (which === 'f' || which === 'g') cases[which] = combined;
        else telemetryOff[which] = combined;
        if (figures.length > 1) for (const [i, f] of figures.entries()) details.push({ ...f, name: `    telemetry ${i + 1} ${which}`, extra: true });
      }
    }

    const results = [cases.a, cases.b, ...details.filter((r) => r.name.includes('nginx')), cases.c, cases.d, cases.h, cases.e, ...details.filter((r) => r.name.startsWith('(e) at')), cases.f, cases.g, ...details.filter((r) => r.name.startsWith('    round')), ...details.filter((r) => r.name.startsWith('    telemetry'))].filter((r) => r !== undefined);
    console.log(`\nHTTP proxy bench: ${CONNECTIONS} connections, ${ROUNDS} round(s) of every case, ${DURATION_S}s each after ${WARMUP_S}s warm-up, audit ${AUDIT_MODE}, gateway.processes ${PROCESSES}, loopback, ${process.version}`);
    console.log(`${'case'.padEnd(22)}${'req/s'.padStart(9)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}${'errors'.padStart(9)}${'non2xx'.padStart(9)}${'cpu µs/req'.padStart(12)}${'sys µs'.padStart(8)}${'syscalls'.padStart(10)}`);
    for (const r of results) console.log(`${r.name.padEnd(22)}${fmt(r.rps)}${fmt(r.p50, 2)}${fmt(r.p99, 2)}${fmt(r.errors)}${fmt(r.non2xx)}${(r.cpuUs === null ? '-' : r.cpuUs.toFixed(0)).padStart(12)}${(r.sysUs === null ? '-' : r.sysUs.toFixed(0)).padStart(8)}${(r.syscalls === null ? '-' : r.syscalls.toFixed(1)).padStart(10)}`);
    const { a, c, d, e, f, g } = cases;
    if (equalRate) console.log(`\nCPU per request at ${equalRate.rate} req/s: (c) miss ${equalRate.missUs.toFixed(0)} µs, (e) bare Node proxy ${equalRate.floorUs.toFixed(0)} µs (the miss adds ${(equalRate.missUs - equalRate.floorUs).toFixed(0)})`);
    const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
    /** x ÷ y throughput: the median of the rounds' ratios (each round's beside it), or of the combined figures. */
    const ratio = (x: Case, y: Case): { value: number; text: string } | null => {
      const xs = perRound[x];
      const ys = perRound[y];
      if (xs === undefined || ys === undefined) return null;
      const each = xs.map((r, i) => r.rps / ys[i]!.rps);
      const value = median(each);
      return { value, text: `${(value * 100).toFixed(1)}%${each.length > 1 ? ` (rounds ${each.map((v) => (v * 100).toFixed(1)).join(', ')})` : ''}` };
    };
    const pct = (x: number, y: number) => `${((x / y) * 100).toFixed(1)}%`;
    const goalLine = (label: string, r: { value: number; text: string } | null, goal: number, note = '') => {
      if (r) console.log(`${label} ${r.text} (goal ≥ ${goal * 100}%${note})  ${verdict(r.value >= goal)}`);
    };
    console.log('');
    if (a && c) {
      const overhead = c.p99 - a.p99;
      console.log(`(c) p99 overhead over (a): ${overhead.toFixed(2)} ms (goal ≤ ${GOAL_P99_OVERHEAD_MS} ms)  ${verdict(overhead <= GOAL_P99_OVERHEAD_MS)}`);
    }
    goalLine('(c) / (e) throughput:     ', ratio('c', 'e'), GOAL_MISS_VS_BARE, ', Gatehouse miss against a bare Node proxy');
    goalLine('(d) / (b) throughput:     ', ratio('d', 'b'), GOAL_HIT_VS_NGINX);
    goalLine('(h) / (d) throughput:     ', ratio('h', 'd'), GOAL_JWT_VS_KEY_HIT);
    goalLine('(c) / (b) throughput:     ', ratio('c', 'b'), GOAL_MISS_VS_NGINX, ', the long-run mark');
    // Informational: how much of the gap to nginx is the platform's own.
    const eb = ratio('e', 'b');
    if (eb) console.log(`(e) / (b) throughput:      ${eb.text} — the platform's floor against nginx`);
    const cOff = telemetryOff.c;
    const dOff = telemetryOff.d;
    if (cOff && f) console.log(`(f) / (c) throughput:      ${pct(f.rps, cOff.rps)} — miss with OTLP export on (goal ≥ ${GOAL_TELEMETRY_RATIO * 100}%)  ${verdict(f.rps / cOff.rps >= GOAL_TELEMETRY_RATIO)}`);
    if (dOff && g) console.log(`(g) / (d) throughput:      ${pct(g.rps, dOff.rps)} — hit with OTLP export on (goal ≥ ${GOAL_TELEMETRY_RATIO * 100}%)  ${verdict(g.rps / dOff.rps >= GOAL_TELEMETRY_RATIO)}`);
    for (const r of [f, g]) if (r?.spansPerRequest !== undefined) console.log(`${r.name}: ${r.spansPerRequest.toFixed(2)} spans exported per request (observability.trace_sample_ratio ${process.env.SERVICE_OBSERVABILITY__TRACE_SAMPLE_RATIO ?? 'default'}, trace_max_per_second ${process.env.SERVICE_OBSERVABILITY__TRACE_MAX_PER_SECOND ?? 'default'})`);
    if (results.some((r) => r.errors > 0 || r.non2xx > 0)) console.log('WARNING: some requests failed; the figures above are not comparable');

    if (PROBE_S > 0 && (a || c || d || e)) {
      const probeCases: Array<[string, () => Promise<number[]>]> = [];
      if (a) probeCases.push(['(a) upstream direct', () => probe('(a) upstream direct', `http://127.0.0.1:${upstreamPort}/item`)]);
      if (c) probeCases.push(['(c) gatehouse miss', () => probe('(c) gatehouse miss', () => `${gh.gatewayUrl}/proxy/bench/miss/item?n=${n++}`, auth)]);
      if (d) probeCases.push(['(d) gatehouse hit', () => probe('(d) gatehouse hit', `${gh.gatewayUrl}/proxy/bench/hit/item`, auth)]);
      if (e && bare !== null) probeCases.push(['(e) bare node proxy', () => probe('(e) bare node proxy', () => `http://127.0.0.1:${bare.port}/miss/item?n=${n++}`)]);
      // In rounds too, alternating: a stall of the machine falls on one round of one case, not on all of its probe.
      const samples = new Map<string, number[][]>(probeCases.map(([name]) => [name, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const [name, measure] of round % 2 === 0 ? probeCases : [...probeCases].reverse()) samples.get(name)!.push(await measure());
      }
      // Each case's latencies (µs, in the order sent), one array per round.
      const dump = process.env.BENCH_PROBE_DUMP_DIR;
      if (dump) for (const [name, rounds] of samples) writeFileSync(path.join(dump, `${name.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '')}.json`), JSON.stringify(rounds));
      const probes = probeCases.map(([name]) => probeOf(name, samples.get(name)!.flat()));
      console.log(`\nUnqueued latency: 1 connection, one request at a time, ${ROUNDS} × ${PROBE_S}s each (the goal above is at ${CONNECTIONS} connections)`);
      console.log(`${'case'.padEnd(22)}${'requests'.padStart(9)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}${'p99.9 ms'.padStart(10)}`);
      for (const r of probes) console.log(`${r.name.padEnd(22)}${fmt(r.requests)}${fmt(r.p50 / 1000, 3)}${fmt(r.p99 / 1000, 3)}${(r.p999 / 1000).toFixed(3).padStart(10)}`);
      const [pa, pc] = [probes.find((p) => p.name.startsWith('(a)')), probes.find((p) => p.name.startsWith('(c)'))];
      if (pa && pc) {
        const overhead = (pc.p99 - pa.p99) / 1000;
        console.log(`(c) p99 overhead over (a), unqueued: ${overhead.toFixed(3)} ms (goal ≤ ${GOAL_UNQUEUED_OVERHEAD_MS} ms)  ${verdict(overhead <= GOAL_UNQUEUED_OVERHEAD_MS)}; p50 ${((pc.p50 - pa.p50) / 1000).toFixed(3)} ms`);
      }
    }
  } finally {
    if (bare !== null) await stop(bare.child);
    await stop(gh.child);
    await stop(gh.admin);
    if (ghOtel) {
      await stop(ghOtel.child);
      await stop(ghOtel.admin);
      await ghOtel.dropDb().catch(() => undefined);
      await rm(ghOtel.dir, { recursive: true, force: true });
    }
    if (sink) await stop(sink);
    for (const nginx of nginxes) await stop(nginx.child);
    await stop(upstream);
    await idp.stop();
    await gh.dropDb().catch(() => undefined);
    await rm(gh.dir, { recursive: true, force: true });
    for (const nginx of nginxes) await rm(nginx.dir, { recursive: true, force: true });
  }
}

await main();
