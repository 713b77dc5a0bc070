// The stale sweep (spec §3, docs/ingestion.md "Stale workers"): one holder across replicas marks silent workers stale and takes back jobs whose lease lapsed, per the retry policy.
import { sql } from 'kysely';
import { whileHolding } from '../coord/index.js';
import type { Services } from '../runtime/services.js';
import { sweepStaleJobs, type SweepResult } from '../store/repos/ingestion-jobs.js';
import type { Db } from '../store/repos/util.js';
import type { PeriodicTask } from './worker.js';

export const SWEEP_LOCK = 'ingestion:stale-sweep';

export interface SweepOptions {
  staleAfterSeconds: number;
  maxRetries: number;
  backoffBaseSeconds: number;
  backoffMaxSeconds: number;
}

/** One pass: workers silent for staleAfterSeconds get stale_since; their and every lease-expired job is requeued or failed. */
export async function sweepOnce(db: Db, opts: SweepOptions): Promise<SweepResult & { markedStale: number }> {
  const marked = await sql`update workers set stale_since = now()
    where stale_since is null and last_heartbeat < now() - make_interval(secs => ${opts.staleAfterSeconds})`.execute(db);
  const result = await sweepStaleJobs(db, opts);
  return { ...result, markedStale: Number(marked.numAffectedRows ?? 0n) };
}

export function staleSweepTask(services: Services): PeriodicTask {
  const { config, coord, db } = services;
  const log = services.log.child({ component: 'ingestion-sweep' });
  const intervalMs = config.worker.sweep_interval_seconds * 1000;
  return {
    name: 'ingestion-stale-sweep',
    intervalMs,
    runAtStart: true,
    run: async () => {
      // One holder across replicas: a worker that cannot take the lock skips this round.
      const held = await whileHolding(coord, SWEEP_LOCK, Math.max(intervalMs * 2, 10_000), () =>
        sweepOnce(db, {
          staleAfterSeconds: config.worker.stale_after_seconds,
          maxRetries: config.ingestion.max_retries,
          backoffBaseSeconds: config.ingestion.retry_backoff_seconds,
          backoffMaxSeconds: config.ingestion.retry_backoff_max_seconds,
        }),
      );
      if (held.busy) return;
      const r = held.value;
      if (r.requeued + r.failed + r.markedStale > 0) {
        log.warn({ requeued: r.requeued, failed: r.failed, workers_marked_stale: r.markedStale, by_worker: Object.fromEntries(r.byWorker) }, 'stale ingestion work taken back');
      }
    },
  };
}
