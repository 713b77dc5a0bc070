// The governed response cache (spec §4 rule 9, step 7/9/10): L1 in-process LRU + L2 in the coordination store, keyed by the full scope and the source generation, with write barriers.
import type { LRUCache } from 'lru-cache';
import { ttlCache } from '../util/ttl-cache.js';
import type { Config } from '../config/index.js';
import type { Coordination } from '../coord/index.js';
import { GatehouseError } from '../errors/registry.js';
import { canonicalScope, scopeDigest } from '../governance/cache-scope.js';
import type { CacheScope } from '../governance/cache-scope.js';
import type { Logger } from '../observability/logger.js';
import { errCode, type SourceGenerations } from './generations.js';
import type { InvalidationBus } from './invalidation.js';

export type CacheConfig = Pick<Config['cache'], 'enabled' | 'l1_ttl_seconds' | 'l1_max_entries' | 'l1_max_bytes' | 'l2_ttl_seconds' | 'strict_write_barriers'>;

/** The scope without the generation: the cache reads the current generation itself, so a caller cannot forget it. */
export type CacheScopeInput = Omit<CacheScope, 'source_generation'>;

/**
 * A resolved cache key: the scope hashed with the generation that was current at lookup time.
 * Store under this same key after the upstream answers: if a write advanced the generation
 * meanwhile, the entry lands under the old generation and can never be hit.
 */
export interface CacheKey {
  readonly source_id: string;
  readonly generation: number;
  /** The canonical scope (src/governance/cache-scope.ts), generation included: the L1 key. */
  readonly canonical: string;
  /** SHA-256 hex of the canonical scope (cacheScopeKey): the L2 key, computed when first read. */
  readonly scope_key: string;
}

/**
 * A key as lookup resolves it. L1 is keyed by the canonical text itself, which is what the digest stands for: an L1
 * hit pays no SHA-256 (≈ 1 µs per lookup on a 2-core guest: docs/decisions/0028-proxy-hot-path.md, addendum "the L1
 * key"). The digest, a fixed-length key for the coordination store, is made only when L2 is asked or written.
 */
class ResolvedKey implements CacheKey {
  #scopeKey: string | null = null;

  constructor(
    readonly source_id: string,
    readonly generation: number,
    readonly canonical: string,
  ) {}

  get scope_key(): string {
    return (this.#scopeKey ??= scopeDigest(this.canonical));
  }
}

export interface CachedResponse {
  readonly status: number;
  /** Response headers after the response allowlist (names lower case). */
  readonly headers: Readonly<Record<string, string>>;
  /** The redacted body. Shared between hits: callers must not modify it. */
  readonly body: Buffer;
}

export interface CacheEntry extends CachedResponse {
  /** Epoch ms when the origin answer was stored. */
  readonly stored_at: number;
}

export type MissReason =
  /** cache.enabled is false. */
  | 'disabled'
  /** The policy decision opted this request out (obligations.cache false). */
  | 'policy_opt_out'
  /** The coordination store is unreachable: the current generation is unknown, so nothing is served and nothing stored. */
  | 'l2_unavailable'
  | 'not_found';

export type CacheLookup =
  | { readonly hit: true; readonly tier: 'l1' | 'l2'; readonly key: CacheKey; readonly entry: CacheEntry }
  /** `key` is null when nothing may be stored for this request (store() then skips it). */
  | { readonly hit: false; readonly reason: MissReason; readonly key: CacheKey | null };

export type StoreResult = { readonly stored: true } | { readonly stored: false; readonly reason: 'no_key' | 'disabled' | 'too_large' | 'stale_generation' | 'invalid' };

export interface CacheStats {
  hits: number;
  l1_hits: number;
  l2_hits: number;
  misses: number;
  /** Lookups answered "not from cache" for lack of the generation or the store (`l2_unavailable`). */
  bypasses: number;
  stores: number;
  /** Stores that reached L1 but not L2 (store error). */
  l2_store_failures: number;
  /** L1 entries removed for capacity or age. */
  evictions: number;
  /** Generation advances made by this instance (write barriers). */
  invalidations: number;
  /** Advances announced by other instances on the bus. */
  remote_invalidations: number;
  /** L1 entries dropped because their source's generation advanced. */
  invalidated_entries: number;
  /** Write barriers that could not advance the generation (503 when strict). */
  barrier_failures: number;
  l1_entries: number;
  l1_bytes: number;
}

export interface GovernedCacheOptions {
  coord: Coordination;
  generations: SourceGenerations;
  bus: InvalidationBus;
  config: CacheConfig;
  log: Logger;
  /** Largest body stored (bytes); default 1 MiB. Bounds L2 values (base64 in JSON: about 4/3 of it). */
  maxEntryBytes?: number;
  now?: () => number;
}

export const DEFAULT_MAX_ENTRY_BYTES = 1024 * 1024;
const L2_PREFIX = 'cache:';
/** Per-entry bookkeeping charged to l1_max_bytes besides the body, the headers and the key (#setL1): the objects' overhead. */
const ENTRY_OVERHEAD_BYTES = 256;
const MAX_HEADERS = 32;
const MAX_HEADER_BYTES = 16 * 1024;

interface L1Value {
  readonly source_id: string;
  readonly generation: number;
  readonly entry: CacheEntry;
  readonly size: number;
}

interface L2Value {
  v: 1;
  source_id: string;
  generation: number;
  status: number;
  headers: Record<string, string>;
  body: string;
  stored_at: number;
  /** Epoch ms when the L2 copy expires, so a promotion to L1 never outlives it. */
  expires_at: number;
}

export class GovernedCache {
  readonly #coord: Coordination;
  readonly #generations: SourceGenerations;
  readonly #config: CacheConfig;
  readonly #log: Logger;
  readonly #maxEntryBytes: number;
  readonly #now: () => number;
  readonly #l1: LRUCache<string, L1Value> | null;
  /** source_id → L1 keys of that source, so an invalidation drops them without a scan. */
  readonly #bySource = new Map<string, Set<string>>();
  readonly #offBus: () => void;
  readonly #stats: Omit<CacheStats, 'l1_entries' | 'l1_bytes'> = {
    hits: 0, l1_hits: 0, l2_hits: 0, misses: 0, bypasses: 0, stores: 0, l2_store_failures: 0,
    evictions: 0, invalidations: 0, remote_invalidations: 0, invalidated_entries: 0, barrier_failures: 0,
  };

  constructor(opts: GovernedCacheOptions) {
    this.#coord = opts.coord;
    this.#generations = opts.generations;
    this.#config = opts.config;
    this.#log = opts.log;
    this.#now = opts.now ?? Date.now;
    this.#maxEntryBytes = opts.maxEntryBytes ?? DEFAULT_MAX_ENTRY_BYTES;
    if (!Number.isSafeInteger(this.#maxEntryBytes) || this.#maxEntryBytes <= 0) throw new TypeError('maxEntryBytes must be a positive integer');
    const { l1_max_entries: max, l1_max_bytes: maxSize, l1_ttl_seconds: ttl } = opts.config;
    this.#l1 =
      max > 0 && ttl > 0
        ? ttlCache<string, L1Value>({
            max,
            maxSize,
            sizeCalculation: (value) => value.size,
            ttl: ttl * 1000,
            ttlAutopurge: false,
            // lru-cache's clock, so tests that move time move L1 expiry with it.
            perf: { now: () => this.#now() },
            dispose: (value, key, reason) => this.#forget(value.source_id, key, reason),
          })
        : null;
    this.#offBus = opts.bus.onInvalidate((msg) => {
      this.#generations.observe(msg.source_id, msg.generation);
      this.#stats.remote_invalidations += 1;
      this.#dropSource(msg.source_id, msg.generation);
    });
  }

  /**
   * Step 7: answers from L1, then L2, for the scope at the source's current generation.
   * A miss carries the key to store the origin answer under (step 9).
   */
  async lookup(scope: CacheScopeInput): Promise<CacheLookup> {
    if (!this.#config.enabled) return this.#miss('disabled', null);
    if (scope.policy.obligations.cache !== true) return this.#miss('policy_opt_out', null);
    let generation: number;
    try {
      generation = await this.#generations.current(scope.source_id);
    } catch (err) {
      // Without the current generation an L1 entry may belong to a generation that a write has since ended: serve nothing.
      this.#log.debug({ source_id: scope.source_id, err: errCode(err) }, 'cache bypassed: generation unavailable');
      return this.#bypass();
    }
    const key: CacheKey = new ResolvedKey(scope.source_id, generation, canonicalScope({ ...scope, source_generation: generation }));

    const local = this.#l1?.get(key.canonical);
    if (local !== undefined) {
      this.#stats.hits += 1;
      this.#stats.l1_hits += 1;
      return { hit: true, tier: 'l1', key, entry: local.entry };
    }
    if (this.#config.l2_ttl_seconds <= 0) return this.#miss('not_found', key);
    let raw: string | null;
    try {
      raw = await this.#coord.get(L2_PREFIX + key.scope_key);
    } catch (err) {
      this.#log.debug({ source_id: scope.source_id, err: errCode(err) }, 'cache bypassed: L2 unavailable');
      return this.#bypass();
    }
    const value = raw === null ? null : decodeL2(raw, key, this.#now());
    if (value === null || value === 'expired') {
      if (raw !== null && value === null) this.#log.warn({ source_id: scope.source_id }, 'dropped an undecodable L2 cache entry');
      return this.#miss('not_found', key);
    }
    this.#stats.hits += 1;
    this.#stats.l2_hits += 1;
    this.#setL1(key, value.entry, Math.min(this.#config.l1_ttl_seconds * 1000, value.remainingMs));
    return { hit: true, tier: 'l2', key, entry: value.entry };
  }

  /**
   * Step 9: stores the redacted origin answer under the key from `lookup`. The caller has already decided
   * eligibility (`isCacheEligible`); `ttlSeconds` (e.g. its `maxTtlSeconds`) can only shorten the configured TTLs.
   * Never throws for store trouble: an entry that is not stored is only a later miss.
   */
  async store(key: CacheKey | null, response: CachedResponse, opts: { ttlSeconds?: number | undefined } = {}): Promise<StoreResult> {
    if (key === null) return { stored: false, reason: 'no_key' };
    if (!this.#config.enabled) return { stored: false, reason: 'disabled' };
    if (!validResponse(response)) return { stored: false, reason: 'invalid' };
    if (response.body.length > this.#maxEntryBytes) return { stored: false, reason: 'too_large' };
    // A write advanced the generation while the origin answered: the entry could never be hit.
    if (key.generation < this.#generations.highWater(key.source_id)) return { stored: false, reason: 'stale_generation' };
    const cap = opts.ttlSeconds !== undefined && opts.ttlSeconds > 0 ? opts.ttlSeconds : Infinity;
    const entry: CacheEntry = { status: response.status, headers: { ...response.headers }, body: response.body, stored_at: this.#now() };
    const l2Ttl = Math.min(this.#config.l2_ttl_seconds, cap);
    if (l2Ttl > 0) {
      const value: L2Value = {
        v: 1, source_id: key.source_id, generation: key.generation, status: entry.status, headers: entry.headers,
        body: entry.body.toString('base64'), stored_at: entry.stored_at, expires_at: entry.stored_at + Math.ceil(l2Ttl * 1000),
      };
      try {
        await this.#coord.set(L2_PREFIX + key.scope_key, JSON.stringify(value), { ttlMs: Math.ceil(l2Ttl * 1000) });
      } catch (err) {
        this.#stats.l2_store_failures += 1;
        this.#log.debug({ source_id: key.source_id, err: errCode(err) }, 'L2 cache store failed');
      }
    }
    this.#setL1(key, entry, Math.min(this.#config.l1_ttl_seconds, cap) * 1000);
    this.#stats.stores += 1;
    return { stored: true };
  }

  /**
   * Step 5→8 barrier for a mutation (POST, PUT, PATCH, DELETE) through the source: advances the generation
   * before the upstream request. When that is impossible and strict_write_barriers is on, throws
   * GatehouseError('unavailable') (503) and the write must not run; otherwise logs and lets it run.
   */
  async beforeWrite(sourceId: string): Promise<void> {
    if (!this.#config.enabled) return;
    const failure = await this.#advance(sourceId);
    if (failure === null) return;
    if (this.#config.strict_write_barriers) {
      this.#log.warn({ source_id: sourceId, err: errCode(failure.err) }, 'write refused: the cache write barrier is unavailable');
      throw new GatehouseError('unavailable', 'The cache write barrier is unavailable; the write was not executed.', { cause: failure.err });
    }
    this.#generations.markPending(sourceId);
    this.#log.warn({ source_id: sourceId, err: errCode(failure.err) }, 'cache write barrier unavailable; write continues (strict_write_barriers is off)');
  }

  /**
   * Step 10, after the upstream accepted a mutation: advances the generation again, so entries stored from
   * reads that ran concurrently with the write (under the generation of `beforeWrite`) are dead too.
   * Never throws: the write has happened. A failed advance is owed and retried (reads bypass meanwhile).
   */
  async afterWrite(sourceId: string): Promise<void> {
    if (!this.#config.enabled) return;
    const failure = await this.#advance(sourceId);
    if (failure === null) return;
    this.#generations.markPending(sourceId);
    this.#log.warn({ source_id: sourceId, err: errCode(failure.err) }, 'cache invalidation after a write failed; retried until the store is back');
  }

  stats(): CacheStats {
    return { ...this.#stats, l1_entries: this.#l1?.size ?? 0, l1_bytes: this.#l1?.calculatedSize ?? 0 };
  }

  /** Detaches from the bus and empties L1 (the generations and the bus belong to the caller). */
  close(): void {
    this.#offBus();
    this.#l1?.clear();
  }

  /** The barrier both sides of a write share: frees the source's L1 entries and advances its generation; null when that worked. */
  async #advance(sourceId: string): Promise<{ err: unknown } | null> {
    this.#dropSource(sourceId, Infinity);
    try {
      await this.#generations.advance(sourceId);
      this.#stats.invalidations += 1;
      return null;
    } catch (err) {
      this.#stats.barrier_failures += 1;
      return { err };
    }
  }

  #miss(reason: MissReason, key: CacheKey | null): CacheLookup {
    this.#stats.misses += 1;
    return { hit: false, reason, key };
  }

  #bypass(): CacheLookup {
    this.#stats.bypasses += 1;
    return { hit: false, reason: 'l2_unavailable', key: null };
  }

  #setL1(key: CacheKey, entry: CacheEntry, ttlMs: number): void {
    if (this.#l1 === null || ttlMs <= 0) return;
    // The key is the canonical text, up to a path and query long: counted at two bytes a character, a bound on V8's strings.
    const size = entry.body.length + headerBytes(entry.headers) + 2 * key.canonical.length + ENTRY_OVERHEAD_BYTES;
    if (size > this.#config.l1_max_bytes) return;
    let keys = this.#bySource.get(key.source_id);
    if (keys === undefined) {
      keys = new Set();
      this.#bySource.set(key.source_id, keys);
    }
    keys.add(key.canonical);
    this.#l1.set(key.canonical, { source_id: key.source_id, generation: key.generation, entry, size }, { ttl: Math.max(1, Math.floor(ttlMs)) });
  }

  #forget(sourceId: string, key: string, reason: LRUCache.DisposeReason): void {
    if (reason === 'evict' || reason === 'expire') this.#stats.evictions += 1;
    if (reason === 'set') return; // replaced under the same key: still indexed
    const keys = this.#bySource.get(sourceId);
    if (keys === undefined) return;
    keys.delete(key);
    if (keys.size === 0) this.#bySource.delete(sourceId);
  }

  /**
   * Frees L1 entries of the source below `generation` (all of them for Infinity). Correctness does not
   * depend on it — the generation is in the key, so such entries can no longer be hit — it frees memory.
   */
  #dropSource(sourceId: string, generation: number): void {
    const keys = this.#bySource.get(sourceId);
    if (keys === undefined || this.#l1 === null) return;
    for (const key of [...keys]) {
      const value = this.#l1.peek(key, { allowStale: true });
      if (value === undefined || value.generation < generation) {
        if (value !== undefined) this.#stats.invalidated_entries += 1;
        this.#l1.delete(key);
        keys.delete(key);
      }
    }
    if (keys.size === 0) this.#bySource.delete(sourceId);
  }
}

function headerBytes(headers: Readonly<Record<string, string>>): number {
  let n = 0;
  for (const [k, v] of Object.entries(headers)) n += k.length + v.length + 4;
  return n;
}

function validResponse(r: CachedResponse): boolean {
  if (!Number.isInteger(r.status) || r.status < 200 || r.status > 299) return false;
  if (!Buffer.isBuffer(r.body)) return false;
  const entries = Object.entries(r.headers);
  if (entries.length > MAX_HEADERS) return false;
  if (entries.some(([k, v]) => typeof k !== 'string' || typeof v !== 'string')) return false;
  return headerBytes(r.headers) <= MAX_HEADER_BYTES;
}

/** Decodes and checks an L2 value; it must name the same source and generation as the key it was read under. */
function decodeL2(raw: string, key: CacheKey, now: number): { entry: CacheEntry; remainingMs: number } | 'expired' | null {
  let v: Partial<L2Value>;
  try {
    v = JSON.parse(raw) as Partial<L2Value>;
  } catch {
    return null;
  }
  if (v === null || typeof v !== 'object' || v.v !== 1 || v.source_id !== key.source_id || v.generation !== key.generation) return null;
  if (typeof v.status !== 'number' || typeof v.body !== 'string' || typeof v.stored_at !== 'number' || typeof v.expires_at !== 'number') return null;
  if (v.expires_at <= now) return 'expired';
  if (v.headers === null || typeof v.headers !== 'object' || Object.values(v.headers).some((h) => typeof h !== 'string')) return null;
  const entry: CacheEntry = { status: v.status, headers: { ...v.headers }, body: Buffer.from(v.body, 'base64'), stored_at: v.stored_at };
  return { entry, remainingMs: v.expires_at - now };
}
