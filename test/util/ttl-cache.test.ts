// ttlCache: the clock is read on every lookup, so an entry is gone the moment its time is up, with no timer to wait for.
import { describe, expect, it } from 'vitest';
import { LRUCache } from 'lru-cache';
import { ttlCache } from '../../src/util/ttl-cache.js';

describe('ttlCache', () => {
  it('expires an entry at its time in the same turn of the event loop, where lru-cache by default still answers it', () => {
    let now = 1_000;
    const perf = { now: () => now };
    const ours = ttlCache<string, number>({ max: 10, ttl: 100, perf });
    const stock = new LRUCache<string, number>({ max: 10, ttl: 100, perf });
    ours.set('k', 1);
    stock.set('k', 1);
    expect([ours.get('k'), stock.get('k')]).toEqual([1, 1]);
    now += 101;
    // lru-cache's default keeps the clock it read last until its timer fires: the expired entry is still answered.
    expect(stock.get('k')).toBe(1);
    expect(ours.get('k')).toBeUndefined();
  });
});
