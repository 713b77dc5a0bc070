// The worker's catalog task: decides which sources are due (saved, requested, or past the refresh interval) and scans them one at a time (docs/catalog.md "When a source is scanned").
import type { Config } from '../config/index.js';
import type { Coordination } from '../coord/index.js';
import type { Logger } from '../observability/logger.js';
import { SOURCES_CHANGED_CHANNEL } from '../registry/sources.js';
import { scanStates, type DueSource } from '../store/repos/catalog.js';
import type { Db } from '../store/repos/util.js';
import { CATALOG_SCAN_REQUESTED_CHANNEL } from './events.js';
import type { CatalogScanner, ScanOutcome, ScanTrigger } from './scanner.js';

/** How often the worker looks for due sources without a wake-up message (a missed announcement costs at most this). */
export const CATALOG_POLL_MS = 5_000;

/** Which trigger makes this source due now, or null. Pure: the test of the scheduling rules. */
export function dueTrigger(s: DueSource, config: Readonly<Config['catalog']>, now: Date): ScanTrigger | null {
  if (!s.enabled) return null;
  const type = s.connector_key ?? s.source_type;
  if (type !== 'postgres' && !(type === 'http' && typeof s.connection_config.openapi_path === 'string')) return null;
  if (s.scan_requested_at !== null && (s.last_started_at === null || s.scan_requested_at > s.last_started_at)) return 'demand';
  if (config.scan_on_save && (s.last_source_updated_at === null || s.updated_at > s.last_source_updated_at)) return 'save';
  if (s.last_started_at === null || now.getTime() - s.last_started_at.getTime() >= config.refresh_interval_seconds * 1000) return 'schedule';
  return null;
}

export class CatalogScheduler {
  #running: Promise<void> | null = null;
  #again = false;
  #unsubscribes: Array<() => Promise<void>> = [];

  constructor(
    private readonly deps: { db: Db; coord: Coordination; config: Readonly<Config['catalog']>; scanner: CatalogScanner; log: Logger; onScanned?: (sourceId: string, outcome: ScanOutcome) => void },
  ) {}

  /** Wakes the scheduler on source saves and on-demand requests, from any process. */
  async listen(): Promise<void> {
    const wake = () => void this.tick();
    this.#unsubscribes.push(await this.deps.coord.subscribe(CATALOG_SCAN_REQUESTED_CHANNEL, wake));
    this.#unsubscribes.push(await this.deps.coord.subscribe(SOURCES_CHANGED_CHANNEL, wake));
  }

  /** One pass over the sources; a tick asked for while one runs runs once more after it. */
  tick(): Promise<void> {
    if (this.#running !== null) {
      this.#again = true;
      return this.#running;
    }
    this.#running = (async () => {
      try {
        do {
          this.#again = false;
          await this.#pass();
        } while (this.#again);
      } finally {
        this.#running = null;
      }
    })();
    return this.#running;
  }

  async #pass(): Promise<void> {
    const { config } = this.deps;
    if (!config.enabled) return;
    const now = new Date();
    for (const s of await scanStates(this.deps.db)) {
      const trigger = dueTrigger(s, config, now);
      if (trigger === null) continue;
      try {
        const outcome = await this.deps.scanner.scan(s.source_id, trigger);
        this.deps.onScanned?.(s.source_id, outcome);
      } catch (err) {
        this.deps.log.error({ err: { message: (err as Error)?.message }, source_id: s.source_id }, 'catalog scan errored');
      }
    }
  }

  async stop(): Promise<void> {
    for (const u of this.#unsubscribes.splice(0)) await u().catch(() => undefined);
    await this.#running?.catch(() => undefined);
  }
}
