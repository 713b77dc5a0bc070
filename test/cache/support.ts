// Test fixtures for the governed cache: replicas (cache + generations + bus) on a shared coordination store, a scope builder, an in-memory durable floor.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { InvalidationBus } from '../../src/cache/invalidation.js';
import { SourceGenerations } from '../../src/cache/generations.js';
import type { DurableGenerations } from '../../src/cache/generations.js';
import { GovernedCache } from '../../src/cache/governed-cache.js';
import type { CacheConfig, CacheScopeInput, GovernedCacheOptions } from '../../src/cache/governed-cache.js';
import { MemoryCoordination, MemoryCoordinationStore, RedisCoordination } from '../../src/coord/index.js';
import type { Coordination } from '../../src/coord/index.js';
import { deleteKeysByPrefix } from '../support/redis.js';

export const REDIS_URL = 'redis://127.0.0.1:6379';
export const silentLog = pino({ level: 'silent' });

export const baseConfig: CacheConfig = {
  enabled: true,
  l1_ttl_seconds: 30,
  l1_max_entries: 1000,
  l1_max_bytes: 1024 * 1024,
  l2_ttl_seconds: 300,
  strict_write_barriers: true,
};

/** A durable floor held in a Map (the real one is data_sources.generation, tested in durable.test.ts). */
export class MapDurable implements DurableGenerations {
  readonly values = new Map<string, number>();
  failing = false;
  async read(sourceId: string): Promise<number | undefined> {
    if (this.failing) throw Object.assign(new Error('store down'), { code: 'store_unavailable' });
    return this.values.get(sourceId);
  }
  async raise(sourceId: string, atLeast: number): Promise<void> {
    if (this.failing) throw Object.assign(new Error('store down'), { code: 'store_unavailable' });
    this.values.set(sourceId, Math.max(this.values.get(sourceId) ?? 0, atLeast));
  }
}

export function scope(patch: Partial<CacheScopeInput> = {}): CacheScopeInput {
  return {
    source_id: 'crm',
    identity_id: 1,
    team: 'sales',
    grant_version: 1,
    mapped_pg_role: null,
    role_decision: { grant_id: 10, role_key: 'reader', rule_index: 0 },
    policy: { version: 1, deciding_policy_id: null, matched_policy_ids: [], obligations: { redact_columns: [], pii_mode: null, cache: true } },
    method: 'GET',
    path: '/customers',
    query: '',
    accept: null,
    accept_language: null,
    ...patch,
  };
}

export function response(text: string, status = 200): { status: number; headers: Record<string, string>; body: Buffer } {
  return { status, headers: { 'content-type': 'application/json' }, body: Buffer.from(text) };
}

export interface Replica {
  coord: Coordination;
  bus: InvalidationBus;
  generations: SourceGenerations;
  cache: GovernedCache;
  close(): Promise<void>;
}

export interface ReplicaOptions {
  config?: Partial<CacheConfig>;
  durable?: DurableGenerations;
  memoMs?: number;
  now?: () => number;
  maxEntryBytes?: GovernedCacheOptions['maxEntryBytes'];
}

export async function startReplica(coord: Coordination, opts: ReplicaOptions = {}): Promise<Replica> {
  const bus = new InvalidationBus(coord, 'cache-invalidation', `replica-${randomBytes(3).toString('hex')}`, silentLog);
  await bus.start();
  const generations = new SourceGenerations({
    coord, bus, durable: opts.durable ?? new MapDurable(), namespace: 'gen', log: silentLog,
    memoMs: opts.memoMs ?? 100, retryMs: 50, ...(opts.now ? { now: opts.now } : {}),
  });
  const cache = new GovernedCache({
    coord, bus, generations, log: silentLog, config: { ...baseConfig, ...opts.config },
    ...(opts.now ? { now: opts.now } : {}), ...(opts.maxEntryBytes !== undefined ? { maxEntryBytes: opts.maxEntryBytes } : {}),
  });
  return {
    coord, bus, generations, cache,
    async close() {
      cache.close();
      generations.close();
      await bus.stop();
      await coord.close();
    },
  };
}

export interface Backend {
  name: 'memory' | 'redis';
  /** A coordination client on the test's shared namespace (a new "replica" connection each call). */
  connect(): Coordination;
  /** Deletes a key behind the adapters' backs (a flush or eviction of that key). */
  rawDelete(key: string): Promise<void>;
  rawSet(key: string, value: string): Promise<void>;
  cleanup(): Promise<void>;
}

export function uniquePrefix(): string {
  return `gh:test:cache:${process.pid}:${randomBytes(4).toString('hex')}:`;
}

export function memoryBackend(now?: () => number): Backend {
  const store = new MemoryCoordinationStore(now ? { now } : {});
  const keyPrefix = uniquePrefix();
  return {
    name: 'memory',
    connect: () => new MemoryCoordination({ keyPrefix, store }),
    rawDelete: async (key) => {
      store.delete(keyPrefix + key);
    },
    rawSet: async (key, value) => store.write(keyPrefix + key, value, undefined),
    cleanup: async () => store.close(),
  };
}

export function redisBackend(url = REDIS_URL): Backend {
  const keyPrefix = uniquePrefix();
  const raw = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  return {
    name: 'redis',
    connect: () => new RedisCoordination({ url, keyPrefix }),
    rawDelete: async (key) => {
      await raw.del(keyPrefix + key);
    },
    rawSet: async (key, value) => {
      await raw.set(keyPrefix + key, value);
    },
    cleanup: async () => {
      await deleteKeysByPrefix(raw, keyPrefix);
      raw.disconnect();
    },
  };
}

export { sleep, waitFor } from '../support/wait.js';
