// Extra gateway processes on one host (gateway.processes): spawns gateway-role replicas that share the gateway listeners through SO_REUSEPORT, restarts one that dies, and stops them with the service.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../observability/logger.js';

/** Set in a replica's environment: it serves the gateway only and never spawns replicas of its own. */
export const REPLICA_ENV = 'GATEHOUSE_GATEWAY_REPLICA';

/** What a replica tells its parent over the IPC channel once its listeners are bound. */
export const REPLICA_LISTENING = 'gatehouse:replica-listening';

export const isReplica = (): boolean => process.env[REPLICA_ENV] === '1';

/**
 * The CLI entry beside this module (dist/main.js, or src/main.ts under tsx) rather than process.argv[1]: the
 * service may be embedded in another program (tests, benches). This process's node flags (a CPU profile, the
 * tsx loader) carry over; a TypeScript entry without the tsx loader gets it.
 */
function replicaNodeArgs(): string[] {
  const self = fileURLToPath(import.meta.url);
  const entry = path.join(path.dirname(self), '..', `main${path.extname(self)}`);
  const loader = entry.endsWith('.ts') && !process.execArgv.some((a) => a.includes('tsx')) ? ['--import', 'tsx'] : [];
  // An inspector port is the parent's alone: a replica asking for the same one would fail to start.
  const inherited = process.execArgv.filter((a) => !a.startsWith('--inspect') && !a.startsWith('--debug'));
  return [...inherited, ...loader, entry];
}

const START_TIMEOUT_MS = 60_000;
const RESTART_BACKOFF_MS = { initial: 1_000, max: 30_000 };
/** A replica that ran this long before dying was healthy: its next restart starts from the initial backoff again. */
const HEALTHY_RUN_MS = 60_000;

export interface ReplicaOptions {
  count: number;
  /** The environment and directory the service's configuration was loaded from: replicas load the same. */
  origin: { env: NodeJS.ProcessEnv; cwd: string };
  /** Bound ports, by environment variable: replicas must bind exactly these (the config may say 0). */
  ports: Record<string, number>;
  /** The service's audit spool directory; each replica spools under its own subdirectory of it. */
  spoolDir: string;
  log: Logger;
  graceMs: number;
}

interface Slot {
  index: number;
  child: ChildProcess | null;
  startedAt: number;
  backoffMs: number;
  restartTimer: NodeJS.Timeout | null;
}

/**
 * Node answers one request at a time per process; replicas are how a host's other cores serve the gateway.
 * Each replica is a full gateway (its own pools, memo and L1 cache), exactly like a replica on another host,
 * which is why the configuration insists on a shared database and Redis. The parent keeps the admin and
 * worker roles; the kernel spreads new connections across every process listening on the port.
 */
export class GatewayReplicas {
  readonly #slots: Slot[] = [];
  #stopping = false;

  private constructor(private readonly opts: ReplicaOptions) {}

  /** Spawns the replicas and resolves once every one is listening; rejects (and stops them) if one fails to start. */
  static async start(opts: ReplicaOptions): Promise<GatewayReplicas> {
    const replicas = new GatewayReplicas(opts);
    try {
      await Promise.all(Array.from({ length: opts.count }, (_, index) => replicas.#spawn({ index, child: null, startedAt: 0, backoffMs: RESTART_BACKOFF_MS.initial, restartTimer: null })));
    } catch (err) {
      await replicas.stop();
      throw err;
    }
    return replicas;
  }

  /** Passes a signal on to every running replica (SIGHUP: reload TLS certificates). */
  signal(signal: NodeJS.Signals): void {
    for (const s of this.#slots) if (s.child && s.child.exitCode === null && s.child.signalCode === null) s.child.kill(signal);
  }

  /** Process ids of the running replicas (tests and operators' tooling). */
  pids(): number[] {
    return this.#slots.flatMap((s) => (s.child?.pid !== undefined && s.child.exitCode === null && s.child.signalCode === null ? [s.child.pid] : []));
  }

  #spawn(slot: Slot): Promise<void> {
    // PATH and HOME from this process when the configuration's environment lacks them (an embedded service's does).
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...this.opts.origin.env, [REPLICA_ENV]: '1' };
    for (const [name, port] of Object.entries(this.opts.ports)) env[name] = String(port);
    // A spool has one writer (it is locked by pid); a restarted replica takes over its slot's spool and replays it.
    env.SERVICE_AUDIT__SPOOL__DIR = path.resolve(this.opts.origin.cwd, this.opts.spoolDir, `gateway-replica-${slot.index + 1}`);
    const child = spawn(process.execPath, [...replicaNodeArgs(), 'start', '--role', 'gateway'], {
      env,
      cwd: this.opts.origin.cwd,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    slot.child = child;
    slot.startedAt = Date.now();
    if (!this.#slots.includes(slot)) this.#slots.push(slot);

    return new Promise<void>((resolve, reject) => {
      let listening = false;
      const timer = setTimeout(() => {
        if (listening) return;
        child.kill('SIGKILL');
        reject(new Error(`gateway replica ${slot.index + 1} did not start within ${START_TIMEOUT_MS / 1000} s`));
      }, START_TIMEOUT_MS);
      child.on('message', (message) => {
        if (message !== REPLICA_LISTENING || listening) return;
        listening = true;
        clearTimeout(timer);
        this.opts.log.info({ replica: slot.index + 1, replica_pid: child.pid }, 'gateway replica listening');
        resolve();
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (!listening) {
          reject(Object.assign(new Error(`gateway replica ${slot.index + 1} exited before listening (${signal ?? `exit code ${String(code)}`})`), { code: 'replica_failed' }));
          return;
        }
        if (this.#stopping) return;
        this.#scheduleRestart(slot, code, signal);
      });
    });
  }

  #scheduleRestart(slot: Slot, code: number | null, signal: NodeJS.Signals | null): void {
    if (Date.now() - slot.startedAt >= HEALTHY_RUN_MS) slot.backoffMs = RESTART_BACKOFF_MS.initial;
    const delay = slot.backoffMs;
    slot.backoffMs = Math.min(slot.backoffMs * 2, RESTART_BACKOFF_MS.max);
    this.opts.log.error({ replica: slot.index + 1, exit_code: code, signal, restart_in_ms: delay }, 'gateway replica exited; restarting it');
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = null;
      if (this.#stopping) return;
      this.#spawn(slot).catch((err: unknown) => {
        if (this.#stopping) return;
        this.opts.log.error({ replica: slot.index + 1, err: (err as Error).message }, 'gateway replica failed to restart');
        this.#scheduleRestart(slot, null, null);
      });
    }, delay);
  }

  /** Asks every replica to drain (SIGTERM) and waits for them, killing any still running after the grace period. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all(
      this.#slots.map(async (slot) => {
        if (slot.restartTimer !== null) clearTimeout(slot.restartTimer);
        const child = slot.child;
        if (child === null || child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        const force = setTimeout(() => child.kill('SIGKILL'), this.opts.graceMs + 1_000);
        await exited;
        clearTimeout(force);
      }),
    );
  }
}

/**
 * In a replica: tell the parent the listeners are bound, and drain when the parent goes away (its IPC channel
 * closes when it exits, even on SIGKILL), so no replica outlives the service it belongs to.
 */
export function announceReplica(onOrphaned: () => void): void {
  process.send?.(REPLICA_LISTENING);
  process.once('disconnect', onOrphaned);
}
