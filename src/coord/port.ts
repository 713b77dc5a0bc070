// The coordination port: shared short-lived state (keys with TTL, counters, pub/sub, locks) behind one interface.
import type { Cluster, Redis } from 'ioredis';

/** Removes one subscription handler; resolves once the channel is no longer listened to (if it was the last). */
export type Unsubscribe = () => Promise<void>;

/** Called for every message published on a subscribed channel; delivery is always asynchronous to `publish`. */
export type MessageHandler = (message: string) => void;

export interface TtlOptions {
  /** Lifetime in milliseconds; a positive integer. */
  ttlMs?: number;
}

/**
 * A lease on a named mutual-exclusion lock. Ownership is proven by a random token,
 * so a holder whose lease already expired can never release or extend someone else's lock.
 */
export interface Lock {
  readonly name: string;
  readonly token: string;
  /** Releases the lock if this lease still owns it; false when it had expired or was taken over. */
  release(): Promise<boolean>;
  /** Resets the lease to `ttlMs` from now if still owned; false otherwise. */
  extend(ttlMs: number): Promise<boolean>;
}

export interface CoordinationStatus {
  /** The command connection is up (commands are expected to succeed). */
  connected: boolean;
  /** The pub/sub connection is up and every channel with a handler is subscribed (cache invalidation relies on it). */
  subscriptionsHealthy: boolean;
}

/** A pino-compatible logger subset; the adapters log connection state changes, never credentials. */
export interface CoordinationLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

/**
 * All keys, lock names and channels are namespaced by the adapter's `keyPrefix`
 * (default "gh:") so several deployments can share one Redis. Values are strings;
 * callers encode structured values themselves.
 *
 * Every operation rejects with a `CoordinationError` when the store is unreachable,
 * and does so quickly (about 2 s at most) rather than queueing: callers and /ready never hang.
 */
export interface Coordination {
  readonly kind: 'redis' | 'memory';
  readonly keyPrefix: string;

  get(key: string): Promise<string | null>;
  /** Stores the value; without `ttlMs` any previous expiry is cleared (Redis SET semantics). */
  set(key: string, value: string, options?: TtlOptions): Promise<void>;
  /** Stores only when the key does not exist; true when this call stored it. Atomic across replicas. */
  setIfAbsent(key: string, value: string, options: Required<TtlOptions>): Promise<boolean>;
  /** Atomically reads and deletes: of many concurrent callers, exactly one gets the value (one-time tokens). */
  getDel(key: string): Promise<string | null>;
  /** Deletes keys; resolves to the number that existed. */
  del(keys: string | readonly string[]): Promise<number>;
  /** Sets a new lifetime on an existing key; false when the key does not exist. */
  expire(key: string, ttlMs: number): Promise<boolean>;
  /**
   * Atomically adds `by` (default 1) and resolves to the new value. `ttlMs` is applied when the
   * counter has no expiry yet (that is, when this call created it), so a window is not extended by later hits.
   */
  incr(key: string, by?: number, options?: TtlOptions): Promise<number>;

  /** Sends a message to every subscriber of the channel in every replica sharing the prefix. */
  publish(channel: string, message: string): Promise<void>;
  /**
   * Registers a handler. The subscription survives reconnects: the adapter re-subscribes by itself.
   * If the store is down when called, the handler is kept and subscribed on reconnect
   * (`status().subscriptionsHealthy` is false meanwhile).
   */
  subscribe(channel: string, handler: MessageHandler): Promise<Unsubscribe>;

  /** Tries once to take the named lock for `ttlMs`; null when another holder owns it. */
  acquireLock(name: string, ttlMs: number): Promise<Lock | null>;

  /** Resolves when the store answers; rejects with a `CoordinationError` otherwise (used by /ready). */
  ping(): Promise<void>;
  status(): CoordinationStatus;
  /** The ioredis command connection (one Redis or a Cluster) for rate-limiter-flexible's RateLimiterRedis; null for the memory adapter. */
  redisClient(): Redis | Cluster | null;
  /** Closes connections and timers; further calls reject. */
  close(): Promise<void>;
}
