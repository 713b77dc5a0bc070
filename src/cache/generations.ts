// Source generations: the per-source counter in the coordination store that is part of every cache scope key, floored by the durable data_sources.generation.
import { sql } from 'kysely';
import type { Coordination } from '../coord/index.js';
import type { Logger } from '../observability/logger.js';
import type { Db } from '../store/repos/util.js';
import type { InvalidationBus } from './invalidation.js';

/**
 * The durable floor (data_sources.generation). `raise` only ever moves it up (GREATEST), so replicas
 * racing to record their advances cannot move it backwards.
 */
export interface DurableGenerations {
  read(sourceId: string): Promise<number | undefined>;
  raise(sourceId: string, atLeast: number): Promise<void>;
}

export function storeDurableGenerations(db: Db): DurableGenerations {
  return {
    async read(sourceId) {
      const row = await db.selectFrom('data_sources').select('generation').where('source_id', '=', sourceId).executeTakeFirst();
      return row === undefined ? undefined : Number(row.generation);
    },
    async raise(sourceId, atLeast) {
      await db
        .updateTable('data_sources')
        .set({ generation: sql<number>`greatest(generation, ${atLeast})` })
        .where('source_id', '=', sourceId)
        .execute();
    },
  };
}

export interface SourceGenerationsOptions {
  coord: Coordination;
  durable: DurableGenerations;
  bus: InvalidationBus;
  /** cache.generation_namespace: keys are `<namespace>:<source_id>` (under the coordination prefix). */
  namespace: string;
  log: Logger;
  /**
   * How long a generation read from the store is reused locally (default 100 ms; 0 = read every time).
   * Only trusted while the coordination store is connected and its subscriptions are healthy, because
   * the bus is what cuts the memo short when another replica advances.
   */
  memoMs?: number;
  /** How often advances that failed during an outage are retried (default 250 ms). */
  retryMs?: number;
  now?: () => number;
}

/**
 * The counter lives this long after it is seeded; re-seeding jumps past every value used before
 * (see `#seed`), so expiry costs one miss wave per source per week and bounds abandoned keys.
 */
export const GENERATION_KEY_TTL_MS = 7 * 24 * 3600 * 1000;

interface Memo {
  value: number;
  at: number;
}

/**
 * Why the floor: the generation is part of every scope key, so a generation that goes *back* to a
 * value used before could make an entry stored under that value current again, although a write has
 * happened since. A Redis flush, an eviction or an expiry of the counter key, or a failover to a replica
 * that lags behind, would all do that. Three guards prevent it:
 *  1. every advance records its value durably (`data_sources.generation = GREATEST(…)`), and a missing
 *     counter is re-seeded at max(durable + 1, now in ms): strictly above anything used before, even if
 *     the last durable record was lost (the clock term), even if the clock stepped back (the durable term);
 *  2. the first read of a source in each process compares the counter with the durable value, and each
 *     process remembers the highest value it has seen (its high-water mark); a counter found below either
 *     is raised past it (a lagging failover is repaired by the first replica that notices);
 *  3. an advance whose INCR creates the key (answer 1) is raised the same way.
 */
export class SourceGenerations {
  readonly #coord: Coordination;
  readonly #durable: DurableGenerations;
  readonly #bus: InvalidationBus;
  readonly #namespace: string;
  readonly #log: Logger;
  readonly #memoMs: number;
  readonly #now: () => number;
  readonly #memo = new Map<string, Memo>();
  readonly #highWater = new Map<string, number>();
  readonly #durableChecked = new Set<string>();
  readonly #inflight = new Map<string, Promise<number>>();
  /** Sources whose advance failed while the store was unreachable; advanced before their next read. */
  readonly #pending = new Set<string>();
  readonly #retryTimer: NodeJS.Timeout;
  readonly #offBus: () => void;

  constructor(opts: SourceGenerationsOptions) {
    this.#coord = opts.coord;
    this.#durable = opts.durable;
    this.#bus = opts.bus;
    this.#namespace = opts.namespace;
    this.#log = opts.log;
    this.#memoMs = opts.memoMs ?? 100;
    this.#now = opts.now ?? Date.now;
    this.#offBus = opts.bus.onInvalidate((msg) => this.observe(msg.source_id, msg.generation));
    this.#retryTimer = setInterval(() => void this.#retryPending(), opts.retryMs ?? 250);
    this.#retryTimer.unref();
  }

  key(sourceId: string): string {
    return `${this.#namespace}:${sourceId}`;
  }

  /** The highest generation this process has seen for the source (0 when none); entries below it are dead. */
  highWater(sourceId: string): number {
    return this.#highWater.get(sourceId) ?? 0;
  }

  /** Sources with an advance still owed to the store after an outage. */
  pending(): readonly string[] {
    return [...this.#pending];
  }

  /** Records a generation learnt elsewhere (the bus): raises the high-water mark and ends a stale memo. */
  observe(sourceId: string, generation: number): void {
    if (!Number.isSafeInteger(generation) || generation < 0) return;
    this.#raiseHighWater(sourceId, generation);
    const memo = this.#memo.get(sourceId);
    if (memo !== undefined && memo.value < generation) this.#memo.delete(sourceId);
  }

  /**
   * The source's current generation. Rejects with a CoordinationError when the store is unreachable
   * (callers then bypass the cache: without the current generation no entry can be trusted).
   */
  async current(sourceId: string): Promise<number> {
    const memo = this.#memo.get(sourceId);
    if (memo !== undefined && this.#now() - memo.at < this.#memoMs && this.#memoTrusted()) return memo.value;
    let running = this.#inflight.get(sourceId);
    if (running === undefined) {
      running = this.#load(sourceId).finally(() => this.#inflight.delete(sourceId));
      this.#inflight.set(sourceId, running);
    }
    return running;
  }

  /**
   * Advances the generation (every entry keyed with an older one is dead from now on), announces it on the
   * bus and records it durably. Rejects with a CoordinationError when the counter cannot be advanced;
   * the publish and the durable record are best effort (logged), see docs/cache.md.
   */
  async advance(sourceId: string): Promise<number> {
    // Forget the memo first: if the INCR fails, this process must not keep serving the old generation.
    this.#memo.delete(sourceId);
    await this.#checkDurable(sourceId);
    const key = this.key(sourceId);
    // The floor is taken before the INCR: bus messages arriving meanwhile (other replicas advancing
    // concurrently) raise the high-water mark but are not a rollback of this counter.
    const floor = this.highWater(sourceId);
    let value = await this.#coord.incr(key, 1, { ttlMs: GENERATION_KEY_TTL_MS });
    if (value <= floor || value === 1) {
      // The key had vanished (INCR created it) or rolled back: jump past everything used before.
      const target = Math.max(floor + 1, this.#now());
      this.#log.warn({ source_id: sourceId, found: value, raised_to: target }, 'cache generation counter was missing or behind; raised past the floor');
      value = await this.#coord.incr(key, target - value);
    }
    this.#pending.delete(sourceId);
    this.#raiseHighWater(sourceId, value);
    this.#memo.set(sourceId, { value, at: this.#now() });
    const [published, recorded] = await Promise.allSettled([this.#bus.publish(sourceId, value), this.#durable.raise(sourceId, value)]);
    if (published.status === 'rejected') this.#log.warn({ source_id: sourceId, err: errCode(published.reason) }, 'cache invalidation could not be published');
    if (recorded.status === 'rejected') this.#log.warn({ source_id: sourceId, err: errCode(recorded.reason) }, 'cache generation could not be recorded durably');
    return value;
  }

  /** Remembers an advance that failed during an outage; it is retried until it succeeds (and before the source is read again). */
  markPending(sourceId: string): void {
    this.#memo.delete(sourceId);
    this.#pending.add(sourceId);
  }

  close(): void {
    clearInterval(this.#retryTimer);
    this.#offBus();
  }

  #memoTrusted(): boolean {
    if (this.#memoMs <= 0) return false;
    const status = this.#coord.status();
    return status.connected && status.subscriptionsHealthy && this.#bus.health().ok;
  }

  #raiseHighWater(sourceId: string, value: number): void {
    if (value > this.highWater(sourceId)) this.#highWater.set(sourceId, value);
  }

  async #load(sourceId: string): Promise<number> {
    if (this.#pending.has(sourceId)) return this.advance(sourceId);
    const key = this.key(sourceId);
    await this.#checkDurable(sourceId);
    const floor = this.highWater(sourceId);
    const raw = await this.#coord.get(key);
    let value = raw === null ? await this.#seed(sourceId) : parseGeneration(raw);
    if (value < floor || value === 0) {
      const target = Math.max(floor + 1, this.#now());
      this.#log.warn({ source_id: sourceId, found: raw === null ? null : value, raised_to: target }, 'cache generation counter went backwards; raised past the floor');
      // A value that is not a counter would make INCR fail for every writer: overwrite it instead.
      if (value === 0) await this.#coord.set(key, String(target), { ttlMs: GENERATION_KEY_TTL_MS });
      value = value === 0 ? target : await this.#coord.incr(key, target - value);
    }
    this.#raiseHighWater(sourceId, value);
    this.#memo.set(sourceId, { value, at: this.#now() });
    return value;
  }

  /** Creates a missing counter strictly above every value this source used before (see the class comment). */
  async #seed(sourceId: string): Promise<number> {
    const key = this.key(sourceId);
    const seed = Math.max(this.highWater(sourceId) + 1, this.#now());
    if (await this.#coord.setIfAbsent(key, String(seed), { ttlMs: GENERATION_KEY_TTL_MS })) {
      this.#log.info({ source_id: sourceId, generation: seed }, 'cache generation counter seeded');
      // Recorded durably so the floor also covers a seed that is lost before any advance.
      this.#durable.raise(sourceId, seed).catch((err: unknown) => this.#log.warn({ source_id: sourceId, err: errCode(err) }, 'cache generation seed could not be recorded durably'));
      return seed;
    }
    const raw = await this.#coord.get(key);
    // Seeded by another replica a moment ago (or gone again: seed through INCR, which the floor check then raises).
    return raw === null ? this.#coord.incr(key, 1, { ttlMs: GENERATION_KEY_TTL_MS }) : parseGeneration(raw);
  }

  /** Once per source and process: the durable value joins the high-water mark. A failure is retried next time. */
  async #checkDurable(sourceId: string): Promise<void> {
    if (this.#durableChecked.has(sourceId)) return;
    try {
      const value = await this.#durable.read(sourceId);
      if (value !== undefined) this.#raiseHighWater(sourceId, value);
      this.#durableChecked.add(sourceId);
    } catch (err) {
      this.#log.debug({ source_id: sourceId, err: errCode(err) }, 'durable cache generation not readable; checked on the next read');
    }
  }

  async #retryPending(): Promise<void> {
    for (const sourceId of this.#pending) {
      try {
        await this.advance(sourceId);
        this.#log.info({ source_id: sourceId }, 'owed cache generation advance completed after an outage');
      } catch {
        return; // still unreachable; next tick
      }
    }
  }
}

function parseGeneration(raw: string): number {
  const value = Number(raw);
  // A value that is not a counter would make INCR fail for every writer: treat it as missing (0 → raised).
  return Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

/** The error's code (or class) for the cache modules' logs: never its message, which may name a host or key. */
export function errCode(err: unknown): string {
  if (err !== null && typeof err === 'object' && 'code' in err) return String((err as { code: unknown }).code);
  return err instanceof Error ? err.name : 'unknown';
}
