// The in-process adapter against the coordination contract, plus what only it has (shared stores, sweeping).
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryCoordination, MemoryCoordinationStore, createCoordination } from '../../src/coord/index.js';
import { coordinationContract, sleep } from './contract.js';

// One store for the whole file: adapters built on it behave like replicas sharing one Redis.
const store = new MemoryCoordinationStore();
afterAll(() => store.close());

coordinationContract('memory', (keyPrefix) => new MemoryCoordination({ keyPrefix, store }));

describe('memory coordination specifics', () => {
  it('the factory picks the memory adapter without a Redis URL, with the default prefix', async () => {
    const coord = createCoordination({ redisUrl: undefined });
    try {
      expect(coord.kind).toBe('memory');
      expect(coord.keyPrefix).toBe('gh:');
      expect(coord.redisClient()).toBeNull();
    } finally {
      await coord.close();
    }
  });

  it('separate stores do not share state', async () => {
    const a = new MemoryCoordination();
    const b = new MemoryCoordination();
    try {
      await a.set('k', 'v');
      expect(await b.get('k')).toBeNull();
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('the sweep drops expired entries nobody reads again', async () => {
    const own = new MemoryCoordinationStore();
    const coord = new MemoryCoordination({ store: own });
    try {
      for (let i = 0; i < 50; i++) await coord.set(`k${i}`, 'v', { ttlMs: 20 });
      await coord.set('kept', 'v');
      expect(own.size()).toBe(51);
      await sleep(60);
      own.sweep();
      expect(own.size()).toBe(1);
    } finally {
      await coord.close();
      own.close();
    }
  });

  it('expiry follows the injected clock', async () => {
    let now = 1_000_000;
    const own = new MemoryCoordinationStore({ now: () => now });
    const coord = new MemoryCoordination({ store: own });
    try {
      await coord.set('k', 'v', { ttlMs: 1000 });
      now += 999;
      expect(await coord.get('k')).toBe('v');
      now += 1;
      expect(await coord.get('k')).toBeNull();
    } finally {
      await coord.close();
      own.close();
    }
  });

  it('closing one adapter removes its subscriptions from a shared store but not the others', async () => {
    const own = new MemoryCoordinationStore();
    const a = new MemoryCoordination({ store: own });
    const b = new MemoryCoordination({ store: own });
    const heardByA: string[] = [];
    const heardByB: string[] = [];
    await a.subscribe('ch', (m) => heardByA.push(m));
    await b.subscribe('ch', (m) => heardByB.push(m));
    await a.close();
    await b.publish('ch', 'after-close');
    await sleep(20);
    expect(heardByA).toEqual([]);
    expect(heardByB).toEqual(['after-close']);
    await b.close();
    own.close();
  });
});
