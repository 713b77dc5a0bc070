// Scheduled source sync on the workers (docs/ingestion.md "Scheduled sync", decision record 0025): every worker looks for due periods; the claim in PostgreSQL gives each period to exactly one of them.
import type { Logger } from '../observability/logger.js';
import type { Services } from '../runtime/services.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { abandonExpiredRuns, claimDueSync, finishRun } from '../store/repos/sync-runs.js';
import { runSync, SyncFailure } from '../ingestion/sync-run.js';

/** Periods one look claims at most before yielding to the next look (a backlog of due sources is worked through, not all at once). */
const CLAIMS_PER_LOOK = 16;

export class SyncScheduler {
  readonly #services: Services;
  readonly #workerId: string;
  readonly #log: Logger;
  readonly #stop = new AbortController();
  #timer: NodeJS.Timeout | null = null;
  #looking: Promise<void> | null = null;

  constructor(services: Services, workerId: string) {
    this.#services = services;
    this.#workerId = workerId;
    this.#log = services.log.child({ component: 'ingestion-sync', worker_id: workerId });
  }

  start(): void {
    this.#schedule(0);
  }

  #schedule(ms: number): void {
    if (this.#stop.signal.aborted) return;
    this.#timer = setTimeout(() => {
      this.#looking = this.look()
        .catch((err: unknown) => this.#log.warn({ err }, 'scheduled sync look failed; trying again after the poll interval'))
        .finally(() => {
          this.#looking = null;
          this.#schedule(this.#services.config.ingestion.poll_interval_ms);
        });
    }, ms);
  }

  /** Gives up runs whose holder died, then claims and runs due periods one after another. */
  async look(): Promise<void> {
    const { db, config } = this.#services;
    const abandoned = await abandonExpiredRuns(db);
    if (abandoned > 0) this.#log.warn({ abandoned }, 'sync runs whose holder stopped renewing were recorded failed');
    for (let i = 0; i < CLAIMS_PER_LOOK && !this.#stop.signal.aborted; i++) {
      const run = await claimDueSync(db, this.#workerId, config.ingestion.sync.timeout_seconds);
      if (!run) return;
      const source = await getDataSourceBySourceId(db, run.source_id);
      if (!source) {
        // Deleted between the claim and now: the run row went with it (on delete cascade).
        await finishRun(db, run, { status: 'failed', error: 'source_unusable: the source no longer exists' });
        continue;
      }
      try {
        const result = await runSync(this.#services, source, run, this.#stop.signal);
        this.#log.info({ run_id: run.id, period: run.scheduled_for, ...result }, 'scheduled sync completed');
      } catch (err) {
        if (!(err instanceof SyncFailure)) throw err;
        this.#log.warn({ source_id: run.source_id, run_id: run.id, period: run.scheduled_for, error: err.recorded }, 'scheduled sync failed; the next period runs as planned');
      }
    }
  }

  /** Stops looking; a sync in progress is stopped and recorded as interrupted. */
  async stop(): Promise<void> {
    this.#stop.abort();
    if (this.#timer) clearTimeout(this.#timer);
    await this.#looking;
  }
}
