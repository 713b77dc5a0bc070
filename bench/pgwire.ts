// bench:pgwire — pgbench -S and the TPC-B-like script, 8 clients on loopback: PostgreSQL directly, PgBouncer (session mode), two bare Node relays (the platform's floor), Gatehouse with full governance; prints TPS, ratios and PASS/FAIL (docs/decisions/0002-pgwire-performance.md).
// The gateway runs in this process: start it with the V8 settings every `gatehouse` process has.
import '../src/runtime/v8-flags.js';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import net from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { startWireWorld } from '../test/pgwire/fixture.js';
import { dropRoles } from '../test/privileges/fixture.js';
import { cpuMeter } from './proc.js';
import { quantile } from './stats.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const MANAGED_PREFIX = `ghpb${Date.now().toString(36).slice(-5)}_`;
const CLIENTS = 8;
// Knobs for profiling one side at a time (the defaults are the issue's full run).
const TARGETS = (process.env.BENCH_TARGETS ?? 'direct,pgbouncer,node-pipe,node-frames,gatehouse').split(',');
/** The reference relays (bench/pgwire-relay.ts): what a Node proxy costs before it does anything of Gatehouse's own. */
const RELAYS = ['node-pipe', 'node-frames'] as const;
const SCRIPTS = (process.env.BENCH_SCRIPTS ?? '-S,tpcb').split(',');
const MODE = process.env.BENCH_MODE ?? 'prepared';
/**
 * Seconds of the unqueued latency probe (0 skips it): after the loaded runs, `pgbench -S` with one client and one
 * statement at a time against direct, node-frames and Gatehouse, each transaction's latency from pgbench's own log.
 * Gatehouse's p99 minus direct's is what the listener adds to one statement when nothing queues (goal ≤ 0.3 ms).
 */
const PROBE_S = Number(process.env.BENCH_PROBE_S ?? 5);
const PROBE_GOAL_MS = 0.3;
/** A directory the probes' `pgbench -l` logs are copied to (one line per statement, in order, with its time): where the tail is. */
const PROBE_DUMP_DIR = process.env.BENCH_PROBE_DUMP_DIR;
/** The gateway's audit durability: buffered by default, as in bench:proxy; `strict` (the production setting) makes every statement's answer wait for its stored entry. */
const AUDIT_MODE = process.env.BENCH_AUDIT_MODE ?? 'buffered';
/** When set, a CPU profile of the gateway side of each Gatehouse run is written there. */
const PROFILE_DIR = process.env.BENCH_CPU_PROFILE_DIR;
/** When set, a sampling heap profile of what the gateway side allocates over each Gatehouse run (collected objects included) is written there. */
const HEAP_PROFILE_DIR = process.env.BENCH_HEAP_PROFILE_DIR;
/** SERVICE_* variables of the bench's environment configure the in-process gateway (e.g. SERVICE_AUDIT__DURABILITY_MODE=buffered). */
/**
 * Gateway processes (gateway.processes). One by default: on this 2-core machine, where pgbench and eight
 * PostgreSQL backends share the cores, a second gateway process costs more CPU per transaction than it adds
 * (docs/decisions/0003-gateway-processes.md). With more, PgBouncer is also measured with as many processes
 * (so_reuseport) and its better figure is used, so the comparison never favours Gatehouse by handicapping it.
 */
const PROCESSES = Number(process.env.BENCH_GATEWAY_PROCESSES ?? 1);
const SERVICE_ENV = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith('SERVICE_') && e[1] !== undefined));

/**
 * A CPU profile of this process (the gateway's side) over one pgbench run only, without startup and setup; or, with
 * `heap`, a sampling heap profile of every allocation of the run, the ones the collector already freed included.
 */
async function startProfile(kind: 'cpu' | 'heap' = 'cpu'): Promise<(file: string) => Promise<string>> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) => new Promise<unknown>((resolve, reject) => session.post(method, params, (err, res) => (err ? reject(err) : resolve(res))));
  if (kind === 'heap') {
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  } else {
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval: 200 });
    await post('Profiler.start');
  }
  return async (file) => {
    const { profile } = (await post(kind === 'heap' ? 'HeapProfiler.stopSampling' : 'Profiler.stop')) as { profile: object };
    session.disconnect();
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(profile));
    return file;
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

/** A reference relay in its own process, so its CPU is read from /proc like PgBouncer's; it prints its port when listening. */
function startRelay(mode: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'pgwire-relay.ts'), mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`relay ${mode} exited with ${code}`)));
    child.once('error', reject);
    child.stdout!.once('data', (line: Buffer) => resolve({ child, port: Number(line.toString().trim()) }));
  });
}

/** Seconds of unmeasured load before each target's measured run (BENCH_WARMUP_S; 0 skips it), as bench:proxy warms up each case. */
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 3);

interface Run {
  tps: number;
  transactions: number;
}

function pgbench(args: string[], env: Record<string, string> = {}, seconds = SECONDS): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile('pgbench', ['-n', '-c', String(CLIENTS), '-j', '2', '-T', String(seconds), '-M', MODE, ...args], { env: { ...process.env, PGSSLMODE: 'disable', ...env }, timeout: (seconds + 60) * 1000 }, (err, stdout, stderr) => {
      const m = /tps = ([\d.]+)/.exec(stdout);
      const n = /transactions actually processed: (\d+)/.exec(stdout);
      if (err || !m) return reject(new Error(`pgbench failed: ${stderr || stdout}`));
      resolve({ tps: Number(m[1]), transactions: Number(n?.[1] ?? 0) });
    });
  });
}

interface Probe {
  transactions: number;
  p50: number;
  p99: number;
  p999: number;
}

/** One pgbench client, one `-S` statement at a time, for PROBE_S seconds: the latency (µs) of each, from `pgbench -l`. */
async function probe(name: string, args: string[], env: Record<string, string>, dir: string): Promise<Probe> {
  const prefix = path.join(dir, `probe-${name}`);
  await new Promise<void>((resolve, reject) => {
    execFile('pgbench', ['-n', '-c', '1', '-j', '1', '-T', String(PROBE_S), '-M', MODE, '-S', '-l', `--log-prefix=${prefix}`, ...args], { cwd: dir, env: { ...process.env, PGSSLMODE: 'disable', ...env }, timeout: (PROBE_S + 60) * 1000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`pgbench probe failed: ${stderr || stdout}`)) : resolve(),
    );
  });
  const times: number[] = [];
  for (const f of readdirSync(dir).filter((f) => f.startsWith(`probe-${name}.`))) {
    if (PROBE_DUMP_DIR) copyFileSync(path.join(dir, f), path.join(PROBE_DUMP_DIR, f));
    // client_id transaction_no time(µs) script_no time_epoch time_us
    for (const line of readFileSync(path.join(dir, f), 'utf8').split('\n')) {
      const t = Number(line.split(' ')[2]);
      if (line !== '' && Number.isFinite(t)) times.push(t);
    }
  }
  const sorted = Float64Array.from(times).sort();
  return { transactions: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), p999: quantile(sorted, 0.999) };
}

async function main(): Promise<void> {
  // BENCH_MANAGED=1: the source uses managed privileges (docs/least-privilege.md; the superuser is the privilege admin
  // here only because pgbench -i creates its tables as postgres): sessions SET ROLE once to the managed role.
  const managed = process.env.BENCH_MANAGED === '1' ? { privileges: 'managed', privilege_admin: { user: 'postgres' }, managed_role_prefix: MANAGED_PREFIX } : {};
  const ww = await startWireWorld({ sourceId: 'benchsrc', setupSql: 'select 1', sourceConfig: { pool_max: 16, ...managed }, env: { SERVICE_OBSERVABILITY__LOG_LEVEL: 'warn', SERVICE_AUDIT__DURABILITY_MODE: AUDIT_MODE, SERVICE_GATEWAY__PROCESSES: String(PROCESSES), ...SERVICE_ENV } });
  const db = ww.upstream.name;
  execFileSync('pgbench', ['-i', '-q', '-s', '10', '-h', '127.0.0.1', '-p', '5432', '-U', 'postgres', db], { stdio: 'ignore' });
  const agent = await ww.world.agent('bench-agent', [{ source_id: ww.sourceId, role_key: 'writer' }]);

  const dir = mkdtempSync(path.join(tmpdir(), 'gh-pgbouncer-'));
  chmodSync(dir, 0o777);
  const bouncerPort = await freePort();
  const bouncerGroupPort = await freePort();
  writeFileSync(path.join(dir, 'userlist.txt'), '"postgres" ""\n');
  const startBouncer = (name: string, port: number, reuse: boolean) => {
    const ini = path.join(dir, `${name}.ini`);
    writeFileSync(
      ini,
      `[databases]\n${db} = host=127.0.0.1 port=5432 dbname=${db} user=postgres\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = ${port}\nunix_socket_dir =\nauth_type = trust\nauth_file = ${dir}/userlist.txt\npool_mode = session\nmax_client_conn = 100\ndefault_pool_size = 16\nlogfile = ${dir}/${name}.log\n${reuse ? 'so_reuseport = 1\n' : ''}`,
    );
    chmodSync(ini, 0o644);
    // PgBouncer refuses to run as root: -u drops to the postgres user.
    return spawn('pgbouncer', ['-u', 'postgres', ini], { stdio: 'ignore' });
  };
  const bouncer = startBouncer('pgbouncer', bouncerPort, false);
  const bouncerGroup = PROCESSES > 1 ? Array.from({ length: PROCESSES }, (_, i) => startBouncer(`pgbouncer-group-${i}`, bouncerGroupPort, true)) : [];
  const relays = new Map<string, { child: ChildProcess; port: number }>();
  const results: Record<string, Record<string, number>> = { '-S': {}, 'tpcb': {} };
  const probes: Record<string, Probe> = {};
  // Everything started so far is stopped in `finally`, also when a relay fails to start.
  try {
    for (const mode of RELAYS) if (TARGETS.includes(mode)) relays.set(mode, await startRelay(mode));
    await new Promise((r) => setTimeout(r, 1_000));

    const targets = {
      direct: { args: ['-h', '127.0.0.1', '-p', '5432', '-U', 'postgres', db], env: {} },
      pgbouncer: { args: ['-h', '127.0.0.1', '-p', String(bouncerPort), '-U', 'postgres', db], env: {} },
      ...(bouncerGroup.length > 0 ? { [`pgbouncer×${PROCESSES}`]: { args: ['-h', '127.0.0.1', '-p', String(bouncerGroupPort), '-U', 'postgres', db], env: {} } } : {}),
      ...Object.fromEntries([...relays].map(([mode, r]) => [mode, { args: ['-h', '127.0.0.1', '-p', String(r.port), '-U', 'postgres', db], env: {} }])),
      gatehouse: { args: ['-h', '127.0.0.1', '-p', String(ww.port), '-U', 'bench-agent', ww.sourceId], env: { PGPASSWORD: agent.key } },
    };
    const audit = ww.world.svc.running.services.config.audit;
    console.log(`pgbench -M ${MODE}, ${CLIENTS} clients, ${SECONDS} s after ${WARMUP_S} s of warm-up; gateway.processes ${PROCESSES}; gateway audit durability ${audit.durability_mode}, pii default ${ww.world.svc.running.services.config.pii.default_mode}; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    for (const [script, extra] of [['-S', ['-S']], ['tpcb', []]] as const) {
      if (!SCRIPTS.includes(script)) continue;
      for (const [name, t] of Object.entries(targets)) {
        if (!TARGETS.includes(name.replace(/×\d+$/, ''))) continue;
        // The gateway runs in this process: its CPU time per transaction is a figure the machine's load disturbs less than TPS.
        const profile = name === 'gatehouse' && PROFILE_DIR ? await startProfile() : null;
        const heapProfile = name === 'gatehouse' && HEAP_PROFILE_DIR ? await startProfile('heap') : null;
        // The gateway's replicas run in their own processes: their CPU comes from /proc, this process's from Node.
        const replicaPids = ww.world.svc.running.replicas?.pids() ?? [];
        const bouncers = name === 'pgbouncer' ? [bouncer] : name.startsWith('pgbouncer') ? bouncerGroup : [];
        const relay = relays.get(name);
        // Whose CPU from /proc stands for the target's own: PgBouncer's processes, the relay's, or the gateway's replicas.
        const proxyLabel = bouncers.length > 0 ? 'PgBouncer' : relay ? 'relay' : '';
        const proxyPids = name === 'gatehouse' ? replicaPids : [...bouncers, ...(relay ? [relay.child] : [])].map((p) => p.pid!);
        // Unmeasured warm-up of the same load: the gateway's JIT and pools, PgBouncer's and the relays' connections.
        if (WARMUP_S > 0) await pgbench([...extra, ...t.args], t.env, WARMUP_S);
        const cpu = process.cpuUsage();
        const otherUsSince = cpuMeter(proxyPids);
        const run = await pgbench([...extra, ...t.args], t.env);
        const own = process.cpuUsage(cpu);
        const otherUs = otherUsSince();
        const used = { user: own.user, system: own.system, replicas: name === 'gatehouse' ? otherUs : 0 };
        const proxyUs = proxyLabel !== '' ? otherUs : 0;
        if (profile) console.log(`cpu profile: ${await profile(path.join(PROFILE_DIR!, `gatehouse${script}-${MODE}-${Date.now()}.cpuprofile`))}`);
        if (heapProfile) console.log(`heap profile: ${await heapProfile(path.join(HEAP_PROFILE_DIR!, `gatehouse${script}-${MODE}-${Date.now()}.heapprofile`))}`);
        results[script]![name] = run.tps;
        const perTx =
          name === 'gatehouse' && run.transactions > 0
            ? `, gateway CPU ${((used.user + used.system + used.replicas) / run.transactions).toFixed(0)} µs/transaction (this process: user ${(used.user / run.transactions).toFixed(0)}, system ${(used.system / run.transactions).toFixed(0)}${replicaPids.length > 0 ? `; replicas ${(used.replicas / run.transactions).toFixed(0)}` : ''})`
            : '';
        const proxyPerTx = run.transactions > 0 && proxyUs > 0 ? `, ${proxyLabel} CPU ${(proxyUs / run.transactions).toFixed(0)} µs/transaction` : '';
        console.log(`${script.padEnd(5)} ${name.padEnd(11)} ${run.tps.toFixed(0)} tps${perTx}${proxyPerTx}`);
      }
    }
    if (PROBE_S > 0) {
      const probed = Object.entries(targets).filter(([name]) => ['direct', 'node-frames', 'gatehouse'].includes(name) && TARGETS.includes(name));
      for (const [name, t] of probed) probes[name] = await probe(name, t.args, t.env, dir);
      console.log(`\nUnqueued latency, -S -M ${MODE}: 1 client, one statement at a time, ${PROBE_S} s each (ms)`);
      for (const [name, p] of Object.entries(probes)) {
        console.log(`${name.padEnd(11)} ${String(p.transactions).padStart(7)} statements  p50 ${(p.p50 / 1000).toFixed(3)}  p99 ${(p.p99 / 1000).toFixed(3)}  p99.9 ${(p.p999 / 1000).toFixed(3)}`);
      }
    }
  } finally {
    for (const p of [bouncer, ...bouncerGroup, ...[...relays.values()].map((r) => r.child)]) p.kill('SIGTERM');
    await ww.stop();
    if (process.env.BENCH_MANAGED === '1') await dropRoles(MANAGED_PREFIX);
    rmSync(dir, { recursive: true, force: true });
  }
  // PgBouncer's figure is its better configuration: one process, or one per gateway process.
  for (const r of Object.values(results)) r.pgbouncer = Math.max(r.pgbouncer ?? 0, r[`pgbouncer×${PROCESSES}`] ?? 0) || r.pgbouncer!;
  const s = results['-S']!;
  const t = results.tpcb!;
  console.log('');
  if (s.gatehouse !== undefined && s.direct !== undefined && s.pgbouncer !== undefined && t.gatehouse !== undefined && t.direct !== undefined && t.pgbouncer !== undefined) {
    const vsDirect = s.gatehouse / s.direct;
    const vsBouncer = s.gatehouse / s.pgbouncer;
    console.log(`-S   gatehouse/direct ${(vsDirect * 100).toFixed(1)}% (goal ≥ 50%) ${vsDirect >= 0.5 ? 'PASS' : 'FAIL'}`);
    console.log(`-S   gatehouse/pgbouncer ${(vsBouncer * 100).toFixed(1)}% (goal ≥ 80%) ${vsBouncer >= 0.8 ? 'PASS' : 'FAIL'}`);
    console.log(`tpcb gatehouse/direct ${((t.gatehouse / t.direct) * 100).toFixed(1)}%, gatehouse/pgbouncer ${((t.gatehouse / t.pgbouncer) * 100).toFixed(1)}%`);
  }
  // Informational, no goal: how far the platform itself is from PgBouncer, and how much of Gatehouse's gap is its own work.
  for (const [a, b] of [['node-pipe', 'pgbouncer'], ['node-frames', 'pgbouncer'], ['gatehouse', 'node-frames']] as const) {
    if (s[a] !== undefined && s[b] !== undefined) console.log(`-S   ${a}/${b} ${((s[a] / s[b]) * 100).toFixed(1)}%`);
  }
  const [pd, pf, pg] = [probes.direct, probes['node-frames'], probes.gatehouse];
  if (pg !== undefined && pd !== undefined) {
    const added = (pg.p99 - pd.p99) / 1000;
    console.log(`-S   unqueued p99 added per statement, gatehouse − direct ${added.toFixed(3)} ms (goal ≤ ${PROBE_GOAL_MS} ms) ${added <= PROBE_GOAL_MS ? 'PASS' : 'FAIL'}`);
  }
  if (pf !== undefined && pd !== undefined) console.log(`-S   unqueued p99 added per statement, node-frames − direct ${((pf.p99 - pd.p99) / 1000).toFixed(3)} ms`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
