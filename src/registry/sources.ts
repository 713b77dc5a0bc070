// The source registry: the enabled data sources of the control store held in memory, reloaded when any instance announces a change.
import type { Kysely } from 'kysely';
import type { Coordination } from '../coord/index.js';
import type { Database } from '../store/schema.js';
import type { Logger } from '../observability/logger.js';

export interface RegisteredSource {
  source_id: string;
  name: string;
  source_type: string;
  connector_key: string | null;
  enabled: boolean;
  connection_config: Record<string, unknown>;
  cache_strategy: string;
  generation: number;
}

/** What a source_id may look like (URL-safe; the admin API enforces it at creation), checked the same way by every front door. */
export const SOURCE_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const SOURCE_ID_RULE = 'must be 1-63 lowercase letters, digits, "_" or "-", starting with a letter or digit';

/** Channel on which admin writes announce source changes; every instance reloads its registry. */
export const SOURCES_CHANGED_CHANNEL = 'registry:sources-changed';

export class SourceRegistry {
  #sources = new Map<string, RegisteredSource>();
  #loadedAt: number | null = null;
  #lastError: string | null = null;
  #unsubscribe: (() => Promise<void>) | null = null;
  #reloadTimer: NodeJS.Timeout | null = null;
  #retryTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly coord: Coordination,
    private readonly log: Logger,
    private readonly opts: { refreshIntervalMs: number } = { refreshIntervalMs: 30_000 },
  ) {}

  async start(): Promise<void> {
    this.#unsubscribe = await this.coord.subscribe(SOURCES_CHANGED_CHANNEL, () => {
      void this.reload();
    });
    // A periodic reload bounds staleness if a change announcement was missed during a pub/sub outage.
    this.#reloadTimer = setInterval(() => void this.reload(), this.opts.refreshIntervalMs);
    this.#reloadTimer.unref();
    await this.reload();
  }

  async reload(): Promise<void> {
    try {
      const rows = await this.db
        .selectFrom('data_sources')
        .select(['source_id', 'name', 'source_type', 'connector_key', 'enabled', 'connection_config', 'cache_strategy', 'generation'])
        .execute();
      const next = new Map<string, RegisteredSource>();
      for (const row of rows) {
        next.set(row.source_id, { ...row, connection_config: (row.connection_config ?? {}) as Record<string, unknown>, generation: Number(row.generation) });
      }
      this.#sources = next;
      this.#loadedAt = Date.now();
      this.#lastError = null;
    } catch (err) {
      this.#lastError = (err as { code?: string }).code ?? 'load failed';
      this.log.warn({ err: { code: this.#lastError } }, 'source registry reload failed');
      // Retry soon rather than at the next periodic refresh: the gateway serves nothing useful until it loads.
      if (this.#retryTimer === null && this.#reloadTimer !== null) {
        this.#retryTimer = setTimeout(() => {
          this.#retryTimer = null;
          void this.reload();
        }, 1_000);
        this.#retryTimer.unref();
      }
    }
  }

  /** Announces a change to every instance (including this one). */
  async announceChange(): Promise<void> {
    await this.coord.publish(SOURCES_CHANGED_CHANNEL, String(Date.now()));
  }

  get(sourceId: string): RegisteredSource | undefined {
    return this.#sources.get(sourceId);
  }

  list(): RegisteredSource[] {
    return [...this.#sources.values()];
  }

  health(): { ok: boolean; detail: string } {
    if (this.#loadedAt === null) return { ok: false, detail: this.#lastError ? `not loaded (${this.#lastError})` : 'not loaded yet' };
    if (this.#lastError !== null) return { ok: false, detail: `last reload failed (${this.#lastError}); serving ${this.#sources.size} sources from memory` };
    return { ok: true, detail: `${this.#sources.size} sources` };
  }

  async stop(): Promise<void> {
    if (this.#reloadTimer) clearInterval(this.#reloadTimer);
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    this.#reloadTimer = null;
    await this.#unsubscribe?.();
  }
}
