// The background worker role: listens on nothing; sends heartbeats and runs the periodic tasks registered with it (ingestion, catalog, sweeps).
import os from 'node:os';
import type { Services } from '../runtime/services.js';
import { recordHeartbeat } from '../store/repos/workers.js';
import { whenMigrated } from '../runtime/when-migrated.js';
import type { JsonObject } from '../store/schema.js';

export interface PeriodicTask {
  name: string;
  intervalMs: number;
  /** Run once as soon as the worker starts, not only after the first interval. */
  runAtStart?: boolean;
  /** A further run at this moment (after `now`), asked again after each: work due at a time of day, e.g. just after midnight. */
  alsoAt?(now: Date): Date;
  run(): Promise<void>;
}

/** The longest delay a Node timer holds (2^31 − 1 ms, ≈ 24.8 days); longer ones fire at once. */
const MAX_TIMER_MS = 2_147_483_647;
/** The shortest wait for a task's next moment (PeriodicTask.alsoAt). */
const MIN_AT_WAIT_MS = 1_000;

export class Worker {
  readonly workerId: string;
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #running = new Map<PeriodicTask, Promise<void>>();
  readonly #tasks: PeriodicTask[] = [];
  readonly #heartbeatMetadata: Array<() => JsonObject> = [];
  readonly #stoppers: Array<() => Promise<void>> = [];
  readonly #services: Array<{ start(): void; stop(): Promise<void> }> = [];
  #stopped = false;

  constructor(private readonly services: Services) {
    this.workerId = services.config.worker.id ?? `${os.hostname()}-${process.pid}`;
    this.#tasks.push({ name: 'heartbeat', intervalMs: services.config.worker.heartbeat_interval_seconds * 1000, run: () => this.heartbeat() });
  }

  addTask(task: PeriodicTask): void {
    this.#tasks.push(task);
  }

  /** Adds fields to every heartbeat's metadata (spec §2 WorkerStatus.metadata), e.g. the jobs a runner holds. */
  addHeartbeatMetadata(fields: () => JsonObject): void {
    this.#heartbeatMetadata.push(fields);
  }

  /** Runs after the worker is migrated-ready (`start`), stopped by `stop` before in-flight tasks are awaited. */
  addService(service: { start(): void; stop(): Promise<void> }): void {
    this.#services.push(service);
  }

  async start(): Promise<void> {
    await whenMigrated(this.services, 'worker tasks', () => this.#schedule());
  }

  async #schedule(): Promise<void> {
    if (this.#stopped) return;
    await this.heartbeat();
    for (const task of this.#tasks) {
      if (task.runAtStart) this.#runOnce(task);
      const timer = setInterval(() => this.#runOnce(task), task.intervalMs);
      this.#timers.push(timer);
      if (task.alsoAt) this.#runAt(task, task.alsoAt);
    }
    for (const service of this.#services) {
      service.start();
      this.#stoppers.push(() => service.stop());
    }
    this.services.log.info({ worker_id: this.workerId, tasks: this.#tasks.map((t) => t.name) }, 'worker started');
  }

  async heartbeat(): Promise<void> {
    const extra = Object.assign({}, ...this.#heartbeatMetadata.map((f) => f())) as JsonObject;
    await recordHeartbeat(this.services.db, this.workerId, { host: os.hostname(), pid: process.pid, concurrency: this.services.config.worker.concurrency, ...extra });
  }

  /** Runs the task at `at(now)`, then asks for the next moment; a moment more than a timer can hold away is approached in steps. */
  #runAt(task: PeriodicTask, at: (now: Date) => Date): void {
    const now = Date.now();
    const due = at(new Date(now)).getTime();
    // At least a second: a moment asked for that is not after `now` must not become a loop of runs.
    const wait = Math.min(Math.max(MIN_AT_WAIT_MS, due - now), MAX_TIMER_MS);
    const timer = setTimeout(() => {
      this.#timers.splice(this.#timers.indexOf(timer), 1);
      if (this.#stopped) return;
      if (Date.now() >= due) this.#runOnce(task);
      this.#runAt(task, at);
    }, wait);
    this.#timers.push(timer);
  }

  /**
   * Starts a run unless the task's last one is still going: a run may outlast the interval (a large day's index builds),
   * and two at once would do the same work twice, or undo each other's.
   */
  #runOnce(task: PeriodicTask): void {
    if (this.#stopped) return;
    if (this.#running.has(task)) {
      this.services.log.debug({ task: task.name }, 'worker task still running: this run skipped');
      return;
    }
    const p = task
      .run()
      .catch((err: unknown) => this.services.log.error({ err, task: task.name }, 'worker task failed'))
      .finally(() => this.#running.delete(task));
    this.#running.set(task, p);
  }

  /** Stops scheduling and waits for tasks in flight, so a SIGTERM never cuts a sweep in half. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) clearTimeout(t);
    await Promise.allSettled(this.#stoppers.map((stop) => stop()));
    await Promise.allSettled([...this.#running.values()]);
  }
}
