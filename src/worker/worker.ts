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
/** The least time between two runs for a task's named moments (PeriodicTask.alsoAt): a moment named again at once is not a loop. */
const MIN_MOMENT_GAP_MS = 1_000;

/**
 * What a timer set for the moment `due` does when it fires at `now`. Early (a timer may fire a millisecond before the
 * wall clock reaches its moment, or a moment beyond one timer's reach was approached in steps): no run, the same moment
 * again. Otherwise a run, and the next moment: the one `at` names after `now` (≥ `due` here), and at least
 * MIN_MOMENT_GAP_MS after `now`.
 */
export function momentStep(due: number, now: number, at: (now: Date) => Date): { run: boolean; next: number } {
  if (now < due) return { run: false, next: due };
  return { run: true, next: Math.max(at(new Date(now)).getTime(), now + MIN_MOMENT_GAP_MS) };
}

export class Worker {
  readonly workerId: string;
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #running = new Map<PeriodicTask, Promise<void>>();
  /** Tasks whose named moment came while they were running: each runs once more when its run in flight ends. */
  readonly #owed = new Set<PeriodicTask>();
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
    // stop() may have come while the heartbeat was written: nothing may be scheduled after it.
    if (this.#stopped) return;
    for (const task of this.#tasks) {
      if (task.runAtStart) this.#runOnce(task);
      const timer = setInterval(() => this.#runOnce(task), task.intervalMs);
      this.#timers.push(timer);
      if (task.alsoAt) {
        const at = task.alsoAt;
        this.#armMoment(task, at, at(new Date()).getTime());
      }
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

  /** Runs the task at the moment `due`, then at the next one `at` names (momentStep); moments too far for one timer are approached in steps. */
  #armMoment(task: PeriodicTask, at: (now: Date) => Date, due: number): void {
    const timer = setTimeout(() => {
      const armed = this.#timers.indexOf(timer);
      if (armed >= 0) this.#timers.splice(armed, 1);
      if (this.#stopped) return;
      const step = momentStep(due, Date.now(), at);
      if (step.run) this.#runOnce(task, true);
      this.#armMoment(task, at, step.next);
    }, Math.min(Math.max(0, due - Date.now()), MAX_TIMER_MS));
    this.#timers.push(timer);
  }

  /**
   * Starts a run unless the task's last one is still going: a run may outlast the interval (a large day's index builds),
   * and two at once would do the same work twice, or undo each other's. A run for a moment the task named (`owed`) is
   * not dropped: it starts as soon as the run in flight ends.
   */
  #runOnce(task: PeriodicTask, owed = false): void {
    if (this.#stopped) return;
    if (this.#running.has(task)) {
      if (owed) this.#owed.add(task);
      else this.services.log.debug({ task: task.name }, 'worker task still running: this run skipped');
      return;
    }
    const p = task
      .run()
      .catch((err: unknown) => this.services.log.error({ err, task: task.name }, 'worker task failed'))
      .finally(() => {
        this.#running.delete(task);
        if (this.#owed.delete(task)) this.#runOnce(task);
      });
    this.#running.set(task, p);
  }

  /** Stops scheduling and waits for tasks in flight, so a SIGTERM never cuts a sweep in half. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.length = 0;
    await Promise.allSettled(this.#stoppers.map((stop) => stop()));
    // A run owed when its predecessor ends starts from that predecessor's settlement: wait until none is left.
    while (this.#running.size > 0) await Promise.allSettled([...this.#running.values()]);
  }
}
