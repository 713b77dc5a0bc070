// Rate limiter against the real Redis: shared budget across instances, Retry-After, memory mode, fail-closed on store failure.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { deleteKeysByPrefix } from '../support/redis.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const prefix = `test:ratelimit:${randomUUID()}:`;
let redis: Redis;

beforeAll(async () => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  await redis.ping();
});

afterAll(async () => {
  await deleteKeysByPrefix(redis, prefix);
  await redis.quit();
});

const key = { identity_id: 1, source_id: 'crm', policy_id: 10 };

describe('RateLimiter on Redis', () => {
  it('two instances sharing Redis share one budget', async () => {
    const a = new RateLimiter({ redis, keyPrefix: prefix });
    const b = new RateLimiter({ redis, keyPrefix: prefix });
    const limit = { points: 3, durationSec: 60 };
    expect(await a.consume(key, limit)).toEqual({ allowed: true });
    expect(await b.consume(key, limit)).toEqual({ allowed: true });
    expect(await a.consume(key, limit)).toEqual({ allowed: true });
    const refused = await b.consume(key, limit);
    expect(refused.allowed).toBe(false);
    if (refused.allowed) return;
    expect(refused.reason).toBe('rate_limited');
    expect(refused.policy_id).toBe(10);
    expect(refused.retryAfterSeconds).toBeGreaterThan(0);
    expect(refused.retryAfterSeconds).toBeLessThanOrEqual(60);
    expect(await redis.exists(`${prefix}rl:3/60:1:crm:10`)).toBe(1);
  });

  it('keeps budgets apart per identity, source and policy', async () => {
    const l = new RateLimiter({ redis, keyPrefix: prefix });
    const limit = { points: 1, durationSec: 60 };
    const base = { identity_id: 2, source_id: 'crm', policy_id: 1 };
    expect((await l.consume(base, limit)).allowed).toBe(true);
    expect((await l.consume(base, limit)).allowed).toBe(false);
    expect((await l.consume({ ...base, identity_id: 3 }, limit)).allowed).toBe(true);
    expect((await l.consume({ ...base, source_id: 'billing' }, limit)).allowed).toBe(true);
    expect((await l.consume({ ...base, policy_id: 2 }, limit)).allowed).toBe(true);
  });

  it('the budget comes back after the window', async () => {
    const l = new RateLimiter({ redis, keyPrefix: prefix });
    const limit = { points: 1, durationSec: 1 };
    const k = { identity_id: 4, source_id: 'crm', policy_id: 1 };
    expect((await l.consume(k, limit)).allowed).toBe(true);
    const refused = await l.consume(k, limit);
    expect(refused).toMatchObject({ allowed: false, reason: 'rate_limited', retryAfterSeconds: 1 });
    await new Promise((r) => setTimeout(r, 1100));
    expect((await l.consume(k, limit)).allowed).toBe(true);
  });

  it('reuses one limiter per distinct budget', async () => {
    const l = new RateLimiter({ redis, keyPrefix: prefix });
    for (let i = 0; i < 5; i += 1) await l.consume({ identity_id: 5, source_id: 'crm', policy_id: i }, { points: 100, durationSec: 60 });
    await l.consume({ identity_id: 5, source_id: 'crm', policy_id: 1 }, { points: 10, durationSec: 1 });
    expect(l.limiterCount).toBe(2);
  });

  it('consumeAll charges every limit and reports the one that refused', async () => {
    const l = new RateLimiter({ redis, keyPrefix: prefix });
    const req = { identity_id: 6, source_id: 'crm' };
    const limits = [
      { policy_id: 2, points: 100, durationSec: 60 },
      { policy_id: 1, points: 2, durationSec: 3600 },
    ];
    expect(await l.consumeAll(req, limits)).toEqual({ allowed: true });
    expect(await l.consumeAll(req, limits)).toEqual({ allowed: true });
    const refused = await l.consumeAll(req, limits);
    expect(refused).toMatchObject({ allowed: false, reason: 'rate_limited', policy_id: 1, limit: { points: 2, durationSec: 3600 } });
    if (!refused.allowed) expect(refused.retryAfterSeconds).toBeGreaterThan(3500);
    // The generous limit was charged on all three requests.
    expect(await redis.get(`${prefix}rl:100/60:6:crm:2`)).toBe('3');
    expect(await l.consumeAll(req, [])).toEqual({ allowed: true });
  });
});

describe('RateLimiter fails closed when Redis fails', () => {
  it('refuses with limiter_unavailable when Redis is not reachable', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    dead.on('error', () => undefined);
    const l = new RateLimiter({ redis: dead, keyPrefix: prefix });
    const out = await l.consume(key, { points: 100, durationSec: 60 });
    expect(out).toEqual({ allowed: false, reason: 'limiter_unavailable', retryAfterSeconds: 1, policy_id: 10, limit: { points: 100, durationSec: 60 } });
    dead.disconnect();
  });

  it('refuses with limiter_unavailable when Redis does not answer in time', async () => {
    const sockets: Socket[] = [];
    const silent: Server = createServer((s) => { sockets.push(s); });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as AddressInfo;
    const hung = new Redis({ host: '127.0.0.1', port, enableReadyCheck: false, disableClientInfo: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    hung.on('error', () => undefined);
    await new Promise<void>((r) => hung.once('ready', () => r()));
    const l = new RateLimiter({ redis: hung, keyPrefix: prefix, timeoutMs: 200 });
    const started = Date.now();
    const out = await l.consume(key, { points: 100, durationSec: 60 });
    expect(out).toMatchObject({ allowed: false, reason: 'limiter_unavailable' });
    expect(Date.now() - started).toBeLessThan(2000);
    hung.disconnect();
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => silent.close(() => r()));
  });

  it('a store failure outranks a spent budget in consumeAll', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    dead.on('error', () => undefined);
    const l = new RateLimiter({ redis: dead, keyPrefix: prefix });
    const out = await l.consumeAll({ identity_id: 1, source_id: 'crm' }, [{ policy_id: 1, points: 1, durationSec: 1 }]);
    expect(out).toMatchObject({ allowed: false, reason: 'limiter_unavailable', policy_id: 1 });
    dead.disconnect();
  });
});

describe('RateLimiter in memory mode', () => {
  it('enforces the budget in process', async () => {
    const l = new RateLimiter({ redis: null, keyPrefix: 'mem:' });
    expect(l.mode).toBe('memory');
    const limit = { points: 2, durationSec: 30 };
    expect((await l.consume(key, limit)).allowed).toBe(true);
    expect((await l.consume(key, limit)).allowed).toBe(true);
    const refused = await l.consume(key, limit);
    expect(refused).toMatchObject({ allowed: false, reason: 'rate_limited', policy_id: 10 });
    if (!refused.allowed) expect(refused.retryAfterSeconds).toBeGreaterThan(0);
  });

  it('separate memory instances do not share (embedded mode is one process)', async () => {
    const a = new RateLimiter({ redis: null, keyPrefix: 'mem:' });
    const b = new RateLimiter({ redis: null, keyPrefix: 'mem:' });
    const limit = { points: 1, durationSec: 30 };
    expect((await a.consume(key, limit)).allowed).toBe(true);
    expect((await b.consume(key, limit)).allowed).toBe(true);
  });

  it('rejects misuse with TypeError', async () => {
    expect(() => new RateLimiter({ redis: null, keyPrefix: '' })).toThrow(TypeError);
    const l = new RateLimiter({ redis: null, keyPrefix: 'mem:' });
    await expect(l.consume(key, { points: 0, durationSec: 1 })).rejects.toThrow(TypeError);
    await expect(l.consume({ ...key, source_id: '' }, { points: 1, durationSec: 1 })).rejects.toThrow(TypeError);
  });
});
