// The Redis adapter against the coordination contract on the real Redis at 127.0.0.1:6379, plus Redis-only behaviour.
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisCoordination, createCoordination, describeRedisTarget } from '../../src/coord/index.js';
import type { CoordinationLogger } from '../../src/coord/index.js';
import { coordinationContract, uniquePrefixBase, waitFor } from './contract.js';
import { deleteKeysByPrefix } from '../support/redis.js';
import { freePort } from '../support/ports.js';

const REDIS_URL = 'redis://127.0.0.1:6379';

/** A plain client to look behind the adapter and to clean up. */
const raw = new Redis(REDIS_URL, { lazyConnect: true });

const deleteByPrefix = (prefixBase: string): Promise<void> => deleteKeysByPrefix(raw, prefixBase);

const filePrefix = uniquePrefixBase();
afterAll(async () => {
  await deleteByPrefix(filePrefix);
  raw.disconnect();
});

coordinationContract('redis', (keyPrefix) => new RedisCoordination({ url: REDIS_URL, keyPrefix }), {
  cleanup: deleteByPrefix,
});

function recordingLogger(): CoordinationLogger & { lines: string[] } {
  const lines: string[] = [];
  const record = (level: string) => (obj: object, msg?: string) => {
    lines.push(JSON.stringify({ level, msg, ...obj }, (_k, v: unknown) => (v instanceof Error ? { ...v, message: v.message } : v)));
  };
  return { lines, info: record('info'), warn: record('warn'), error: record('error'), debug: record('debug') };
}

describe('redis coordination specifics', () => {
  it('the factory picks Redis when a URL is set and exposes the ioredis client', async () => {
    const coord = createCoordination({ redisUrl: REDIS_URL, keyPrefix: `${filePrefix}factory:` });
    try {
      expect(coord.kind).toBe('redis');
      expect(coord.redisClient()).toBeInstanceOf(Redis);
      await coord.ping();
    } finally {
      await coord.close();
    }
  });

  it('default prefix is "gh:"', async () => {
    const coord = new RedisCoordination({ url: REDIS_URL });
    try {
      expect(coord.keyPrefix).toBe('gh:');
    } finally {
      await coord.close();
    }
  });

  it('writes keys, counters and locks under the prefix in Redis itself, with the requested TTLs', async () => {
    const prefix = `${filePrefix}layout:`;
    const coord = new RedisCoordination({ url: REDIS_URL, keyPrefix: prefix });
    try {
      await raw.connect().catch(() => {});
      await coord.set('k', 'v', { ttlMs: 60_000 });
      await coord.incr('n', 3, { ttlMs: 30_000 });
      const lock = await coord.acquireLock('job', 45_000);
      expect(await raw.get(`${prefix}k`)).toBe('v');
      expect(await raw.get(`${prefix}n`)).toBe('3');
      expect(await raw.get(`${prefix}lock:job`)).toBe(lock!.token);
      const ttl = await raw.pttl(`${prefix}k`);
      expect(ttl).toBeGreaterThan(55_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      expect(await raw.pttl(`${prefix}n`)).toBeGreaterThan(25_000);
      expect(await raw.get('k')).not.toBe('v');
    } finally {
      await coord.close();
    }
  });

  it('commands issued right after construction wait for the first connect instead of failing', async () => {
    const coord = new RedisCoordination({ url: REDIS_URL, keyPrefix: `${filePrefix}early:` });
    try {
      await coord.set('k', 'v');
      expect(await coord.get('k')).toBe('v');
    } finally {
      await coord.close();
    }
  });

  it('rate-limiter-flexible works on redisClient() under the coordination prefix', async () => {
    const prefix = `${filePrefix}rl:`;
    const coord = new RedisCoordination({ url: REDIS_URL, keyPrefix: prefix });
    try {
      await coord.ping();
      const limiter = new RateLimiterRedis({
        storeClient: coord.redisClient(),
        keyPrefix: `${coord.keyPrefix}rate`,
        points: 3,
        duration: 10,
      });
      for (let i = 0; i < 3; i++) await limiter.consume('identity-1');
      await expect(limiter.consume('identity-1')).rejects.toMatchObject({ remainingPoints: 0 });
      await limiter.consume('identity-2');
      await raw.connect().catch(() => {});
      expect(await raw.keys(`${prefix}rate*`)).toHaveLength(2);
    } finally {
      await coord.close();
    }
  });

  it('an unreachable Redis fails fast with COORD_UNAVAILABLE and never logs the password', async () => {
    const port = await freePort();
    const logger = recordingLogger();
    const coord = new RedisCoordination({ url: `redis://user:hunter2-secret@127.0.0.1:${port}/2`, keyPrefix: `${filePrefix}down:`, logger });
    try {
      const started = performance.now();
      const failure = await coord.ping().then(
        () => null,
        (error: unknown) => error,
      );
      const elapsed = performance.now() - started;
      expect(failure).toMatchObject({ name: 'CoordinationError', code: 'COORD_UNAVAILABLE' });
      expect(elapsed).toBeLessThan(2000);
      await expect(coord.set('k', 'v')).rejects.toMatchObject({ code: 'COORD_UNAVAILABLE' });
      expect(coord.status()).toEqual({ connected: false, subscriptionsHealthy: false });
      const unsubscribe = await coord.subscribe('ch', () => {});
      await unsubscribe();
      await waitFor(() => logger.lines.some((l) => l.includes('"warn"')), 2000, 'a warning');
      const everything = [...logger.lines, String(failure), String((failure as Error).cause), (failure as Error).stack].join('\n');
      expect(everything).not.toContain('hunter2-secret');
      expect(everything).toContain(`redis://127.0.0.1:${port}/2`);
    } finally {
      await coord.close();
    }
  });

  it('describeRedisTarget drops credentials', () => {
    expect(describeRedisTarget('rediss://u:p4ss@cache.internal:6380/3')).toBe('rediss://cache.internal:6380/3');
    expect(describeRedisTarget('redis://:p4ss@localhost')).toBe('redis://localhost:6379/0');
    expect(describeRedisTarget('redis://%%%:p4ss@')).not.toContain('p4ss');
  });

  it('rejects a URL that is not redis:// without echoing it', () => {
    expect(() => new RedisCoordination({ url: 'http://user:pw@host' })).toThrow(/^url must be a redis/);
  });
});
