// Start-up while the control store is unreachable: the service starts not ready, retries with backoff, and finishes the store's start-up work (migrations, first loads) when it answers.
import type { ControlStore } from '../store/db.js';
import { StoreUnavailableError } from '../store/errors.js';
import { migrateToLatest } from '../store/migrate.js';
import type { Logger } from '../observability/logger.js';

export const STORE_RETRY_MS = { initial: 500, max: 15_000 };

export interface StoreStartupOptions {
  store: ControlStore;
  log: Logger;
  /** Apply pending migrations once the store answers (database.migrate_on_start). */
  migrate: boolean;
  /** Where migrations run: `store`, or a direct connection when `store` goes through a transaction pooler. */
  migrationStore?: ControlStore;
  /** Run once the store answered and migrations (if asked) are applied: first loads that would otherwise wait for their next refresh. */
  onReachable: () => Promise<void> | void;
}

/**
 * The store's start-up work. When the store answers at start, it runs now (a failing migration fails the start, as
 * before). When it does not, start-up goes on without it: /ready reports the database check failing with the reason,
 * and a retry loop (backoff from STORE_RETRY_MS.initial doubling to .max) runs the work as soon as the store answers.
 * A container platform then sees a live, unready instance instead of a crash loop.
 */
export class StoreStartup {
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  #done = false;
  #delay = STORE_RETRY_MS.initial;

  constructor(private readonly opts: StoreStartupOptions) {}

  /** Whether the store's start-up work has run. */
  get done(): boolean {
    return this.#done;
  }

  async start(): Promise<void> {
    try {
      await this.#attempt();
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) throw err;
      this.opts.log.warn({ reason: err.reason, retry_in_ms: this.#delay }, 'control store unreachable at start; serving as not ready and retrying');
      this.#schedule();
    }
  }

  async #attempt(): Promise<void> {
    await this.opts.store.ping();
    if (this.opts.migrate) {
      const { applied } = await migrateToLatest((this.opts.migrationStore ?? this.opts.store).db);
      if (applied.length > 0) this.opts.log.info({ applied }, 'migrations applied');
    }
    this.#done = true;
    await this.opts.onReachable();
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#attempt().then(
        () => this.opts.log.info('control store reachable; start-up completed'),
        (err: unknown) => {
          if (this.#done) {
            this.opts.log.error({ err }, 'start-up work after the control store returned failed');
            return;
          }
          this.#delay = Math.min(this.#delay * 2, STORE_RETRY_MS.max);
          const reason = err instanceof StoreUnavailableError ? err.reason : 'error';
          if (!(err instanceof StoreUnavailableError)) this.opts.log.error({ err }, 'control store start-up work failed; retrying');
          else this.opts.log.debug({ reason, retry_in_ms: this.#delay }, 'control store still unreachable');
          this.#schedule();
        },
      );
    }, this.#delay);
    this.#timer.unref();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
