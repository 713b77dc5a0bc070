// One value per PostgreSQL source read from the source itself (its structure, its call trust), cached per source with a bounded TTL and dropped on DDL.
import type { RegisteredSource } from '../registry/sources.js';

interface Entry<T> {
  value: T;
  source: RegisteredSource;
  loadedAt: number;
}

interface Loading<T> {
  promise: Promise<T>;
  source: RegisteredSource;
}

/**
 * One value per source, loaded from the source itself and cached with a bounded TTL: one load per source at a time,
 * a reconfigured source (a new registry record) loaded again, and invalidate() dropping the value and any load
 * already under way (it answers its callers but is not kept).
 */
export class PerSourceCache<T> {
  readonly #entries = new Map<string, Entry<T>>();
  readonly #loading = new Map<string, Loading<T>>();
  /** Advanced by invalidate(): a load that started before it answers its callers but is not kept. */
  readonly #generation = new Map<string, number>();
  readonly #load: (source: RegisteredSource) => Promise<T>;
  readonly #ttlMs: number;
  /** Loads done (tests read it to see the cache work). */
  loads = 0;

  constructor(opts: { load: (source: RegisteredSource) => Promise<T>; ttlMs: number }) {
    this.#load = opts.load;
    this.#ttlMs = opts.ttlMs;
    if (!Number.isInteger(this.#ttlMs) || this.#ttlMs < 0) throw new RangeError('ttlMs must be a non-negative integer');
  }

  peek(sourceId: string): T | null {
    const e = this.#entries.get(sourceId);
    if (!e || Date.now() - e.loadedAt >= this.#ttlMs) return null;
    return e.value;
  }

  current(source: RegisteredSource): T | null {
    const e = this.#entries.get(source.source_id);
    return e && e.source === source && Date.now() - e.loadedAt < this.#ttlMs ? e.value : null;
  }

  get(source: RegisteredSource): Promise<T> {
    // A reconfigured source (a new registry record) may point at another database: its value is loaded again.
    const cached = this.current(source);
    if (cached !== null) return Promise.resolve(cached);
    const running = this.#loading.get(source.source_id);
    if (running && running.source === source) return running.promise;
    const generation = this.#generation.get(source.source_id) ?? 0;
    const startedAt = Date.now();
    const promise = this.#load(source).then(
      (value) => {
        this.loads++;
        if (this.#loading.get(source.source_id)?.promise === promise) this.#loading.delete(source.source_id);
        if ((this.#generation.get(source.source_id) ?? 0) === generation) this.#entries.set(source.source_id, { value, source, loadedAt: startedAt });
        return value;
      },
      (err: unknown) => {
        if (this.#loading.get(source.source_id)?.promise === promise) this.#loading.delete(source.source_id);
        throw err;
      },
    );
    this.#loading.set(source.source_id, { promise, source });
    return promise;
  }

  /** Loads again when the cached value is older than `minAgeMs` (or absent); otherwise answers it. */
  refresh(source: RegisteredSource, minAgeMs: number): Promise<T> {
    const e = this.#entries.get(source.source_id);
    if (e && e.source === source && Date.now() - e.loadedAt < Math.min(minAgeMs, this.#ttlMs)) return Promise.resolve(e.value);
    this.invalidate(source.source_id);
    return this.get(source);
  }

  invalidate(sourceId: string): void {
    this.#generation.set(sourceId, (this.#generation.get(sourceId) ?? 0) + 1);
    this.#entries.delete(sourceId);
    this.#loading.delete(sourceId);
  }
}

