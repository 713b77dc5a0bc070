// whileHolding on the real Redis, between two replicas: work longer than the lease keeps the lock (renewed), the other replica is told busy and runs nothing, and the lock is free again however the work ends.
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisCoordination, whileHolding } from '../../src/coord/index.js';
import { uniquePrefixBase } from './contract.js';
import { deleteKeysByPrefix } from '../support/redis.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const prefix = uniquePrefixBase();
const a = new RedisCoordination({ url: REDIS_URL, keyPrefix: prefix });
const b = new RedisCoordination({ url: REDIS_URL, keyPrefix: prefix });
const raw = new Redis(REDIS_URL, { lazyConnect: true });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

afterAll(async () => {
  await a.close();
  await b.close();
  await deleteKeysByPrefix(raw, prefix);
  raw.disconnect();
});

describe('whileHolding', () => {
  it('holds the lock for work three times longer than its lease; the other replica is busy meanwhile and runs nothing', async () => {
    let ranOnB = 0;
    const busyAnswers: boolean[] = [];
    const work = whileHolding(a, 'maintenance', 300, async () => {
      // Asked four times over 900 ms: each after the first lease (300 ms) would have lapsed without renewal.
      for (let i = 0; i < 4; i += 1) {
        busyAnswers.push((await whileHolding(b, 'maintenance', 300, async () => void (ranOnB += 1))).busy);
        await sleep(300);
      }
      return 'done';
    });
    expect(await work).toEqual({ busy: false, value: 'done' });
    expect(busyAnswers).toEqual([true, true, true, true]);
    expect(ranOnB).toBe(0);
    // Released when the work ended: the other replica takes it at once.
    expect(await whileHolding(b, 'maintenance', 300, async () => 'b')).toEqual({ busy: false, value: 'b' });
  });

  it('releases the lock when the work fails, and passes the failure on', async () => {
    await expect(whileHolding(a, 'failing', 5_000, async () => {
      throw new Error('maintenance failed');
    })).rejects.toThrow('maintenance failed');
    expect((await whileHolding(b, 'failing', 5_000, async () => 1)).busy).toBe(false);
  });
});
