// bench:pgwire — pgbench -S and the TPC-B-like script, 8 clients on loopback: PostgreSQL directly, PgBouncer (session mode), two bare Node relays (the platform's floor), Gatehouse with full governance; prints TPS, ratios and PASS/FAIL (docs/decisions/0002-pgwire-performance.md).
// The gateway runs in this process: start it with the V8 settings every `gatehouse` process has.
import '../src/runtime/v8-flags.js';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import net from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { startWireWorld } from '../test/pgwire/fixture.js';
import { dropRoles } from '../test/privileges/fixture.js';
import { cpuMeter } from './proc.js';
import { median, quantile } from './stats.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
/**
 * Rounds of every target (BENCH_ROUNDS): each round runs each target once, in the opposite order of the round before.
 * This machine's speed moves by up to 2× within minutes (steal time), so a ratio of two targets measured once each
 * minutes apart says as much about the machine as about them; a ratio is taken within each round, and the median of
 * the rounds' ratios is the one judged (docs/decisions/0032-ratios-within-rounds.md).
 */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
/** The goal of the performance issue for `-S`: Gatehouse at ≥ 70% of the bare framing relay, in the same run. */
const FRAMES_GOAL = 0.7;
const MANAGED_PREFIX = `ghpb${Date.now().toString(36).slice(-5)}_`;
const CLIENTS = 8;
// Knobs for profiling one side at a time (the defaults are the issue's full run).
const TARGETS = (process.env.BENCH_TARGETS ?? 'direct,pgbouncer,node-pipe,node-frames,gatehouse').split(',');
/** The reference relays (bench/pgwire-relay.ts): what a Node proxy costs before it does anything of Gatehouse's own. */
const RELAYS = ['node-pipe', 'node-frames'] as const;
/** PgBouncer is started only when measured; it is a Debian package (`apt-get install -y pgbouncer`), not an npm one. */
const WITH_BOUNCER = TARGETS.includes('pgbouncer');
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

/** The probe's figures of the latencies (µs) of every round of one target together. */
function probeOf(times: number[]): Probe {
  const sorted = Float64Array.from(times).sort();
  return { transactions: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), p999: quantile(sorted, 0.999) };
}

/** One pgbench client, one `-S` statement at a time, for PROBE_S seconds: the latency (µs) of each, from `pgbench -l`. */
async function probe(name: string, args: string[], env: Record<string, string>, dir: string): Promise<number[]> {
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
    // Read once: the next round's probe of the same target writes a log of its own.
    rmSync(path.join(dir, f));
  }
  return times;
}

/** Whether a command is on the PATH, as spawn would look for it. */
function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir !== '' && existsSync(path.join(dir, command)));
}

async function main(): Promise<void> {
  // Before anything is started: a missing PgBouncer used to end the run minutes in, with ENOENT from spawn.
  if (WITH_BOUNCER && !onPath('pgbouncer')) throw new Error('pgbouncer is missing: apt-get install -y pgbouncer (or leave pgbouncer out of BENCH_TARGETS)');
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
  // PgBouncer only when it is measured: `BENCH_TARGETS=node-frames,gatehouse` runs without it installed.
  const bouncer = WITH_BOUNCER ? startBouncer('pgbouncer', bouncerPort, false) : null;
  const bouncerGroup = WITH_BOUNCER && PROCESSES > 1 ? Array.from({ length: PROCESSES }, (_, i) => startBouncer(`pgbouncer-group-${i}`, bouncerGroupPort, true)) : [];
  const relays = new Map<string, { child: ChildProcess; port: number }>();
  /** Per script and target, each round's TPS in round order; the target's figure is their median. */
  const rounds: Record<string, Record<string, number[]>> = { '-S': {}, 'tpcb': {} };
  const probes: Record<string, Probe> = {};
  /** node-frames run at Gatehouse's median `-S` rate, and both CPU figures per transaction (µs). */
  let equalRate: { rate: number; tps: number; framesUs: number; gatehouseUs: number } | null = null;
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
    console.log(`pgbench -M ${MODE}, ${CLIENTS} clients, ${ROUNDS} round(s) of every target, each ${SECONDS} s after ${WARMUP_S} s of warm-up (1 s after the first round); gateway.processes ${PROCESSES}; gateway audit durability ${audit.durability_mode}, pii default ${ww.world.svc.running.services.config.pii.default_mode}; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    const measured = Object.keys(targets).filter((name) => TARGETS.includes(name.replace(/×\d+$/, '')));
    for (const [script, extra] of [['-S', ['-S']], ['tpcb', []]] as const) {
      if (!SCRIPTS.includes(script)) continue;
      /** CPU µs and transactions of every round of a target together: its CPU per transaction is their quotient. */
      const cpu: Record<string, { user: number; system: number; replicas: number; proxy: number; transactions: number }> = {};
      for (let round = 0; round < ROUNDS; round++) {
        for (const name of round % 2 === 0 ? measured : [...measured].reverse()) {
          const t = targets[name as keyof typeof targets];
          // The gateway runs in this process: its CPU time per transaction is a figure the machine's load disturbs less than TPS.
          const profile = name === 'gatehouse' && PROFILE_DIR ? await startProfile() : null;
          const heapProfile = name === 'gatehouse' && HEAP_PROFILE_DIR ? await startProfile('heap') : null;
          // The gateway's replicas run in their own processes: their CPU comes from /proc, this process's from Node.
          const replicaPids = ww.world.svc.running.replicas?.pids() ?? [];
          const bouncers = name === 'pgbouncer' && bouncer ? [bouncer] : name.startsWith('pgbouncer') ? bouncerGroup : [];
          const relay = relays.get(name);
          // Whose CPU from /proc stands for the target's own: PgBouncer's processes, the relay's, or the gateway's replicas.
          const proxyLabel = bouncers.length > 0 ? 'PgBouncer' : relay ? 'relay' : '';
          const proxyPids = name === 'gatehouse' ? replicaPids : [...bouncers, ...(relay ? [relay.child] : [])].map((p) => p.pid!);
          // Unmeasured warm-up of the same load: the gateway's JIT and pools, PgBouncer's and the relays' connections.
          const warmup = round === 0 ? WARMUP_S : Math.min(WARMUP_S, 1);
          if (warmup > 0) await pgbench([...extra, ...t.args], t.env, warmup);
          const before = process.cpuUsage();
          const otherUsSince = cpuMeter(proxyPids);
          const run = await pgbench([...extra, ...t.args], t.env);
          const own = process.cpuUsage(before);
          const otherUs = otherUsSince();
          const sum = (cpu[name] ??= { user: 0, system: 0, replicas: 0, proxy: 0, transactions: 0 });
          if (name === 'gatehouse') {
            sum.user += own.user;
            sum.system += own.system;
            sum.replicas += otherUs;
          } else if (proxyLabel !== '') sum.proxy += otherUs;
          sum.transactions += run.transactions;
          if (profile) console.log(`cpu profile: ${await profile(path.join(PROFILE_DIR!, `gatehouse${script}-${MODE}-${Date.now()}.cpuprofile`))}`);
          if (heapProfile) console.log(`heap profile: ${await heapProfile(path.join(HEAP_PROFILE_DIR!, `gatehouse${script}-${MODE}-${Date.now()}.heapprofile`))}`);
          (rounds[script]![name] ??= []).push(run.tps);
          const n = run.transactions;
          const perTx =
            name === 'gatehouse' && n > 0
              ? `, gateway CPU ${((own.user + own.system + otherUs) / n).toFixed(0)} µs/transaction (this process: user ${(own.user / n).toFixed(0)}, system ${(own.system / n).toFixed(0)}${replicaPids.length > 0 ? `; replicas ${(otherUs / n).toFixed(0)}` : ''})`
              : '';
          const proxyPerTx = n > 0 && proxyLabel !== '' && otherUs > 0 ? `, ${proxyLabel} CPU ${(otherUs / n).toFixed(0)} µs/transaction` : '';
          console.log(`${script.padEnd(5)} ${ROUNDS > 1 ? `round ${round + 1} ` : ''}${name.padEnd(11)} ${run.tps.toFixed(0)} tps${perTx}${proxyPerTx}`);
        }
      }
      // The floor at Gatehouse's own rate. A relay's CPU per transaction is not a constant of the relay: on this kind of
      // machine the same node-frames costs 45–51 µs at its full rate and 79–82 at 6,000 TPS (each write then wakes a
      // reader that had gone to sleep). Comparing Gatehouse's CPU per transaction with the floor's at full rate
      // overstates Gatehouse's own work; at the same rate it is what Gatehouse adds (docs/decisions/0029).
      const frames = relays.get('node-frames');
      const gatehouseTps = rounds[script]!.gatehouse;
      if (script === '-S' && frames && gatehouseTps && cpu.gatehouse && cpu.gatehouse.transactions > 0) {
        const rate = Math.max(1, Math.round(median(gatehouseTps)));
        const since = cpuMeter([frames.child.pid!]);
        const run = await pgbench([...extra, '-R', String(rate), '-h', '127.0.0.1', '-p', String(frames.port), '-U', 'postgres', db]);
        const framesUs = since() / Math.max(1, run.transactions);
        const g = cpu.gatehouse;
        const gatehouseUs = (g.user + g.system + g.replicas) / g.transactions;
        equalRate = { rate, tps: run.tps, framesUs, gatehouseUs };
        console.log(`${script.padEnd(5)} node-frames at gatehouse's rate (-R ${rate}): ${run.tps.toFixed(0)} tps, relay CPU ${framesUs.toFixed(0)} µs/transaction; gatehouse ${gatehouseUs.toFixed(0)}, ${(gatehouseUs - framesUs).toFixed(0)} µs over the floor at the same rate`);
      }
      if (ROUNDS > 1) {
        for (const name of measured) {
          const c = cpu[name]!;
          const n = c.transactions;
          const gateway = name === 'gatehouse' && n > 0 ? `, gateway CPU ${((c.user + c.system + c.replicas) / n).toFixed(0)} µs/transaction (user ${(c.user / n).toFixed(0)}, system ${(c.system / n).toFixed(0)})` : '';
          const proxy = c.proxy > 0 && n > 0 ? `, proxy CPU ${(c.proxy / n).toFixed(0)} µs/transaction` : '';
          console.log(`${script.padEnd(5)} median   ${name.padEnd(11)} ${median(rounds[script]![name]!).toFixed(0)} tps${gateway}${proxy}`);
        }
      }
    }
    if (PROBE_S > 0) {
      const probed = measured.filter((name) => ['direct', 'node-frames', 'gatehouse'].includes(name));
      const times: Record<string, number[]> = {};
      // In rounds too, alternating: a stall of the machine falls on one round of one target, not on all of its probe.
      for (let round = 0; round < ROUNDS; round++) {
        for (const name of round % 2 === 0 ? probed : [...probed].reverse()) {
          const t = targets[name as keyof typeof targets];
          // concat, not push(...): a probe of more than ≈ 120,000 statements overflows the call stack as arguments.
          times[name] = (times[name] ?? []).concat(await probe(name, t.args, t.env, dir));
        }
      }
      for (const name of probed) probes[name] = probeOf(times[name]!);
      console.log(`\nUnqueued latency, -S -M ${MODE}: 1 client, one statement at a time, ${ROUNDS} × ${PROBE_S} s each (ms)`);
      for (const [name, p] of Object.entries(probes)) {
        console.log(`${name.padEnd(11)} ${String(p.transactions).padStart(7)} statements  p50 ${(p.p50 / 1000).toFixed(3)}  p99 ${(p.p99 / 1000).toFixed(3)}  p99.9 ${(p.p999 / 1000).toFixed(3)}`);
      }
    }
  } finally {
    for (const p of [...(bouncer ? [bouncer] : []), ...bouncerGroup, ...[...relays.values()].map((r) => r.child)]) p.kill('SIGTERM');
    await ww.stop();
    if (process.env.BENCH_MANAGED === '1') await dropRoles(MANAGED_PREFIX);
    rmSync(dir, { recursive: true, force: true });
  }
  // PgBouncer's figure is its better configuration, one process or one per gateway process, round by round.
  for (const r of Object.values(rounds)) {
    const group = r[`pgbouncer×${PROCESSES}`];
    if (r.pgbouncer !== undefined && group !== undefined) r.pgbouncer = r.pgbouncer.map((tps, i) => Math.max(tps, group[i] ?? 0));
  }
  /** a ÷ b of one script: the median of the rounds' ratios, and each round's, in percent. */
  const ratio = (script: string, a: string, b: string): { median: number; text: string } | null => {
    const x = rounds[script]![a];
    const y = rounds[script]![b];
    if (x === undefined || y === undefined) return null;
    const each = x.map((v, i) => v / y[i]!);
    const m = median(each);
    return { median: m, text: `${(m * 100).toFixed(1)}%${each.length > 1 ? ` (rounds ${each.map((v) => (v * 100).toFixed(1)).join(', ')})` : ''}` };
  };
  const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');
  console.log('');
  const sd = ratio('-S', 'gatehouse', 'direct');
  const sb = ratio('-S', 'gatehouse', 'pgbouncer');
  if (sd && sb) {
    console.log(`-S   gatehouse/direct ${sd.text} (goal ≥ 50%) ${verdict(sd.median >= 0.5)}`);
    console.log(`-S   gatehouse/pgbouncer ${sb.text} (goal ≥ 80%, the long-run mark) ${verdict(sb.median >= 0.8)}`);
  }
  const td = ratio('tpcb', 'gatehouse', 'direct');
  const tb = ratio('tpcb', 'gatehouse', 'pgbouncer');
  if (td && tb) console.log(`tpcb gatehouse/direct ${td.text}, gatehouse/pgbouncer ${tb.text}`);
  // How far the platform itself is from PgBouncer, and how much of Gatehouse's gap is its own work (the goal).
  for (const [a, b] of [['node-pipe', 'pgbouncer'], ['node-frames', 'pgbouncer']] as const) {
    const r = ratio('-S', a, b);
    if (r) console.log(`-S   ${a}/${b} ${r.text}`);
  }
  const gf = ratio('-S', 'gatehouse', 'node-frames');
  if (gf) console.log(`-S   gatehouse/node-frames ${gf.text} (goal ≥ ${FRAMES_GOAL * 100}%) ${verdict(gf.median >= FRAMES_GOAL)}`);
  if (equalRate) console.log(`-S   CPU per transaction at ${equalRate.rate} tps: gatehouse ${equalRate.gatehouseUs.toFixed(0)} µs, node-frames ${equalRate.framesUs.toFixed(0)} µs (gatehouse adds ${(equalRate.gatehouseUs - equalRate.framesUs).toFixed(0)})`);
  const [pd, pf, pg] = [probes.direct, probes['node-frames'], probes.gatehouse];
  if (pg !== undefined && pd !== undefined) {
    const added = (pg.p99 - pd.p99) / 1000;
    console.log(`-S   unqueued p99 added per statement, gatehouse − direct ${added.toFixed(3)} ms (goal ≤ ${PROBE_GOAL_MS} ms) ${verdict(added <= PROBE_GOAL_MS)}`);
  }
  if (pf !== undefined && pd !== undefined) console.log(`-S   unqueued p99 added per statement, node-frames − direct ${((pf.p99 - pd.p99) / 1000).toFixed(3)} ms`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
