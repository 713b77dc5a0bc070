// In-process coordination adapter for embedded development mode: the Redis adapter's semantics inside one process.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  CoordinationError,
  assertIncrement,
  assertKey,
  assertPrefix,
  assertTtl,
  assertValue,
  keyList,
  LOCK_NAMESPACE,
} from './errors.js';
import type {
  Coordination,
  CoordinationLogger,
  CoordinationStatus,
  Lock,
  MessageHandler,
  TtlOptions,
  Unsubscribe,
} from './port.js';

interface Entry {
  value: string;
  /** Epoch milliseconds, or null for no expiry. */
  expiresAt: number | null;
}

interface Subscription {
  readonly handler: MessageHandler;
}

/** Expired entries are dropped on access; the sweep only bounds memory held by keys nobody reads again. */
const SWEEP_INTERVAL_MS = 10_000;

/**
 * The shared state behind one or more memory adapters. Several adapters on one store behave like
 * replicas on one Redis (useful for tests of cross-replica behaviour such as cache invalidation).
 */
export class MemoryCoordinationStore {
  readonly #entries = new Map<string, Entry>();
  readonly #channels = new Map<string, Set<Subscription>>();
  readonly #sweep: NodeJS.Timeout;
  readonly #now: () => number;

  constructor(options: { now?: () => number } = {}) {
    this.#now = options.now ?? Date.now;
    this.#sweep = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.#sweep.unref();
  }

  now(): number {
    return this.#now();
  }

  read(key: string): Entry | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt !== null && entry.expiresAt <= this.#now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry;
  }

  write(key: string, value: string, ttlMs: number | undefined): void {
    this.#entries.set(key, { value, expiresAt: ttlMs === undefined ? null : this.#now() + ttlMs });
  }

  delete(key: string): boolean {
    const existed = this.read(key) !== undefined;
    this.#entries.delete(key);
    return existed;
  }

  sweep(): void {
    const now = this.#now();
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAt !== null && entry.expiresAt <= now) this.#entries.delete(key);
    }
  }

  size(): number {
    return this.#entries.size;
  }

  addSubscription(channel: string, subscription: Subscription): void {
    let set = this.#channels.get(channel);
    if (set === undefined) {
      set = new Set();
      this.#channels.set(channel, set);
    }
    set.add(subscription);
  }

  removeSubscription(channel: string, subscription: Subscription): void {
    const set = this.#channels.get(channel);
    if (set === undefined) return;
    set.delete(subscription);
    if (set.size === 0) this.#channels.delete(channel);
  }

  /** Snapshot of the subscribers at publish time, as Redis does; delivery happens on a later tick. */
  subscribers(channel: string): Subscription[] {
    return [...(this.#channels.get(channel) ?? [])];
  }

  isSubscribed(channel: string, subscription: Subscription): boolean {
    return this.#channels.get(channel)?.has(subscription) ?? false;
  }

  close(): void {
    clearInterval(this.#sweep);
    this.#entries.clear();
    this.#channels.clear();
  }
}

export interface MemoryCoordinationOptions {
  keyPrefix?: string;
  logger?: CoordinationLogger;
  /** Share state with other adapters; the caller then owns (and closes) the store. */
  store?: MemoryCoordinationStore;
}

export class MemoryCoordination implements Coordination {
  readonly kind = 'memory' as const;
  readonly keyPrefix: string;
  readonly #store: MemoryCoordinationStore;
  readonly #ownsStore: boolean;
  readonly #logger: CoordinationLogger | undefined;
  readonly #mine = new Set<{ channel: string; subscription: Subscription }>();
  #closed = false;

  constructor(options: MemoryCoordinationOptions = {}) {
    const keyPrefix = options.keyPrefix ?? 'gh:';
    assertPrefix(keyPrefix);
    this.keyPrefix = keyPrefix;
    this.#ownsStore = options.store === undefined;
    this.#store = options.store ?? new MemoryCoordinationStore();
    this.#logger = options.logger;
  }

  async get(key: string): Promise<string | null> {
    const k = this.#key(key);
    return this.#store.read(k)?.value ?? null;
  }

  async set(key: string, value: string, options: TtlOptions = {}): Promise<void> {
    const k = this.#key(key);
    assertValue(value);
    if (options.ttlMs !== undefined) assertTtl(options.ttlMs);
    this.#store.write(k, value, options.ttlMs);
  }

  async setIfAbsent(key: string, value: string, options: Required<TtlOptions>): Promise<boolean> {
    const k = this.#key(key);
    assertValue(value);
    assertTtl(options?.ttlMs);
    if (this.#store.read(k) !== undefined) return false;
    this.#store.write(k, value, options.ttlMs);
    return true;
  }

  async getDel(key: string): Promise<string | null> {
    const k = this.#key(key);
    const entry = this.#store.read(k);
    if (entry === undefined) return null;
    this.#store.delete(k);
    return entry.value;
  }

  async del(keys: string | readonly string[]): Promise<number> {
    this.#open();
    let removed = 0;
    for (const key of keyList(keys)) if (this.#store.delete(this.keyPrefix + key)) removed += 1;
    return removed;
  }

  async expire(key: string, ttlMs: number): Promise<boolean> {
    const k = this.#key(key);
    assertTtl(ttlMs);
    const entry = this.#store.read(k);
    if (entry === undefined) return false;
    entry.expiresAt = this.#store.now() + ttlMs;
    return true;
  }

  async incr(key: string, by = 1, options: TtlOptions = {}): Promise<number> {
    const k = this.#key(key);
    assertIncrement(by);
    if (options.ttlMs !== undefined) assertTtl(options.ttlMs);
    const entry = this.#store.read(k);
    const current = entry === undefined ? 0 : parseCounter(entry.value);
    const next = current + by;
    if (!Number.isSafeInteger(next)) {
      throw new CoordinationError('COORD_COMMAND_FAILED', 'counter would overflow');
    }
    if (entry === undefined) {
      this.#store.write(k, String(next), options.ttlMs);
    } else {
      entry.value = String(next);
      if (entry.expiresAt === null && options.ttlMs !== undefined) entry.expiresAt = this.#store.now() + options.ttlMs;
    }
    return next;
  }

  async publish(channel: string, message: string): Promise<void> {
    const c = this.#key(channel, 'channel');
    assertValue(message);
    for (const subscription of this.#store.subscribers(c)) {
      // Asynchronous like Redis: a publisher never runs subscriber code on its own stack.
      setImmediate(() => {
        if (!this.#store.isSubscribed(c, subscription)) return;
        try {
          subscription.handler(message);
        } catch (error) {
          this.#logger?.error({ err: error, channel }, 'coordination message handler threw');
        }
      });
    }
  }

  async subscribe(channel: string, handler: MessageHandler): Promise<Unsubscribe> {
    const c = this.#key(channel, 'channel');
    if (typeof handler !== 'function') throw new TypeError('handler must be a function');
    const subscription: Subscription = { handler };
    const record = { channel: c, subscription };
    this.#store.addSubscription(c, subscription);
    this.#mine.add(record);
    return async () => {
      this.#store.removeSubscription(c, subscription);
      this.#mine.delete(record);
    };
  }

  async acquireLock(name: string, ttlMs: number): Promise<Lock | null> {
    this.#open();
    assertKey(name, 'lock name');
    const k = this.keyPrefix + LOCK_NAMESPACE + name;
    assertTtl(ttlMs);
    if (this.#store.read(k) !== undefined) return null;
    const token = randomBytes(16).toString('hex');
    this.#store.write(k, token, ttlMs);
    const owned = (): boolean => !this.#closed && this.#store.read(k)?.value === token;
    return {
      name,
      token,
      release: async () => {
        if (!owned()) return false;
        this.#store.delete(k);
        return true;
      },
      extend: async (nextTtlMs: number) => {
        assertTtl(nextTtlMs);
        if (!owned()) return false;
        this.#store.write(k, token, nextTtlMs);
        return true;
      },
    };
  }

  async ping(): Promise<void> {
    this.#open();
  }

  status(): CoordinationStatus {
    return { connected: !this.#closed, subscriptionsHealthy: !this.#closed };
  }

  redisClient(): Redis | null {
    return null;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const { channel, subscription } of this.#mine) this.#store.removeSubscription(channel, subscription);
    this.#mine.clear();
    if (this.#ownsStore) this.#store.close();
  }

  #open(): void {
    if (this.#closed) throw new CoordinationError('COORD_CLOSED', 'coordination adapter is closed');
  }

  #key(key: string, what = 'key'): string {
    this.#open();
    assertKey(key, what);
    return this.keyPrefix + key;
  }
}


function parseCounter(value: string): number {
  if (!/^-?\d+$/.test(value)) throw new CoordinationError('COORD_COMMAND_FAILED', 'value is not an integer');
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new CoordinationError('COORD_COMMAND_FAILED', 'value is out of range');
  return n;
}
