// The worker's scheduling: a task never runs twice at once (a run may outlast its interval), a task may also run at moments it names (just after midnight for the audit partitions), and stop ends both.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Worker, momentStep, type PeriodicTask } from '../../src/worker/worker.js';
import { justAfterMidnight, MAINTAIN_AFTER_MIDNIGHT_MS } from '../../src/audit/partitions.js';
import type { Services } from '../../src/runtime/services.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Worker', () => {
  let migrated: MigratedStore;
  let services: Services;

  beforeAll(async () => {
    migrated = await withMigratedStore();
    const closers: Array<() => Promise<void>> = [];
    services = {
      config: { worker: { id: 'worker-test', heartbeat_interval_seconds: 3600, concurrency: 1 } },
      db: migrated.store.db,
      log: pino({ level: 'silent' }),
      onClose: (fn: () => Promise<void>) => closers.push(fn),
    } as unknown as Services;
  });
  afterAll(async () => {
    await migrated?.cleanup();
  });

  it('does not start a run while the last one of the same task is still going', async () => {
    let running = 0;
    let most = 0;
    let runs = 0;
    const slow: PeriodicTask = {
      name: 'slow', intervalMs: 40, runAtStart: true,
      run: async () => {
        runs += 1;
        running += 1;
        most = Math.max(most, running);
        await sleep(250);
        running -= 1;
      },
    };
    const worker = new Worker(services);
    worker.addTask(slow);
    const started = Date.now();
    await worker.start();
    while (runs < 3 && Date.now() - started < 10_000) await sleep(20);
    await worker.stop();
    const elapsed = Date.now() - started;
    expect(most).toBe(1);
    // A run starts at the first tick after the last ended, at most one per 250 ms; without the guard, one per 40 ms.
    expect(runs).toBeGreaterThanOrEqual(3);
    expect(runs).toBeLessThanOrEqual(Math.ceil(elapsed / 250));
    expect(running).toBe(0);
  });

  it('runs a task at the moments it names, asking for the next after each, and stops doing so on stop', async () => {
    const at: number[] = [];
    const moments: PeriodicTask = {
      name: 'moments', intervalMs: 3_600_000,
      alsoAt: (now) => new Date(now.getTime() + 1_200),
      run: async () => {
        at.push(Date.now());
      },
    };
    const worker = new Worker(services);
    worker.addTask(moments);
    const started = Date.now();
    await worker.start();
    while (at.length < 2 && Date.now() - started < 10_000) await sleep(20);
    await worker.stop();
    const stopped = at.length;
    expect(stopped).toBe(2);
    // Each run at the moment named after the one before (timers may fire late, never early).
    expect(at[0]! - started).toBeGreaterThanOrEqual(1_195);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(1_195);
    await sleep(1_500);
    expect(at).toHaveLength(stopped);
  });

  it('waits at least a second for a moment that is (nearly) now or past: no loop of runs', async () => {
    const at: number[] = [];
    const worker = new Worker(services);
    worker.addTask({ name: 'past', intervalMs: 3_600_000, alsoAt: (now) => new Date(now.getTime() - 60_000), run: async () => void at.push(Date.now()) });
    const started = Date.now();
    await worker.start();
    await sleep(2_500);
    await worker.stop();
    expect(at.length).toBeGreaterThanOrEqual(1);
    expect(at.length).toBeLessThanOrEqual(Math.floor((Date.now() - started) / 1_000) + 1);
  });

  it('runs a moment that came during a run as soon as that run ends, instead of dropping it', async () => {
    const runs: Array<{ start: number; end: number }> = [];
    const worker = new Worker(services);
    worker.addTask({
      name: 'owed', intervalMs: 3_600_000, runAtStart: true,
      alsoAt: (now) => new Date(now.getTime() + 200),
      run: async () => {
        const start = Date.now();
        await sleep(1_500);
        runs.push({ start, end: Date.now() });
      },
    });
    await worker.start();
    const t0 = Date.now();
    while (runs.length < 2 && Date.now() - t0 < 10_000) await sleep(20);
    await worker.stop();
    expect(runs.length).toBeGreaterThanOrEqual(2);
    // The moment at +200 ms came during the first run; without the debt the next run would wait for a moment that finds
    // the task idle (+2.2 s), ≈ 700 ms after the first run's end.
    expect(runs[1]!.start - runs[0]!.end).toBeLessThan(300);
  });

  it('schedules nothing when stopped while starting (during its first heartbeat)', async () => {
    const warm = new Worker(services);
    await warm.heartbeat();
    const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timeouts();
    let runs = 0;
    const worker = new Worker(services);
    worker.addTask({ name: 'late', intervalMs: 3_600_000, runAtStart: true, alsoAt: (now) => new Date(now.getTime() + 3_600_000), run: async () => void (runs += 1) });
    // stop() comes while the start's first heartbeat is being written (its metadata is read as it begins).
    let stopping: Promise<void> | undefined;
    worker.addHeartbeatMetadata(() => {
      stopping ??= worker.stop();
      return {};
    });
    await worker.start();
    await stopping;
    await sleep(100);
    expect(runs).toBe(0);
    expect(timeouts()).toBeLessThanOrEqual(before);
  });

  it('takes a timer that fires early for the same moment, and names the next after a run', () => {
    const due = Date.parse('2026-12-08T00:00:05.000Z');
    // Fired a millisecond early by the wall clock: no run, the same moment again (not tomorrow's).
    expect(momentStep(due, due - 1, justAfterMidnight)).toEqual({ run: false, next: due });
    expect(momentStep(due, due, justAfterMidnight)).toEqual({ run: true, next: Date.parse('2026-12-09T00:00:05.000Z') });
    // Late (a busy event loop): run now, the next is still tomorrow's.
    expect(momentStep(due, due + 180_000, justAfterMidnight)).toEqual({ run: true, next: Date.parse('2026-12-09T00:00:05.000Z') });
    // A moment named in the past or at once: a second later, never a loop.
    expect(momentStep(due, due, () => new Date(due - 60_000))).toEqual({ run: true, next: due + 1_000 });
  });

  it('maintains the audit partitions seconds after each UTC midnight', () => {
    expect(justAfterMidnight(new Date('2026-12-06T23:59:59.999Z')).toISOString()).toBe('2026-12-07T00:00:05.000Z');
    expect(justAfterMidnight(new Date('2026-12-07T00:00:05.000Z')).toISOString()).toBe('2026-12-08T00:00:05.000Z');
    expect(justAfterMidnight(new Date('2026-12-31T12:00:00.000Z')).toISOString()).toBe('2027-01-01T00:00:05.000Z');
    expect(MAINTAIN_AFTER_MIDNIGHT_MS).toBeLessThan(60_000);
  });
});
