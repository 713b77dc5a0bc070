// The coordination contract: one suite every adapter must pass, so embedded mode behaves like Redis.
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { CoordinationError } from '../../src/coord/index.js';
import type { Coordination } from '../../src/coord/index.js';
import { sleep, waitFor } from '../support/wait.js';

export { sleep, waitFor };

/** Builds an adapter; adapters built with the same prefix must share state, like replicas on one Redis. */
export type CoordinationFactory = (keyPrefix: string) => Coordination | Promise<Coordination>;

export interface ContractOptions {
  /** Removes whatever the run left behind under `prefixBase` (all prefixes the suite used start with it). */
  cleanup?: (prefixBase: string) => Promise<void>;
}


export function uniquePrefixBase(): string {
  return `gh:test:${process.pid}:${randomBytes(4).toString('hex')}:`;
}

export function coordinationContract(name: string, factory: CoordinationFactory, options: ContractOptions = {}): void {
  describe(`coordination contract: ${name}`, () => {
    const prefixBase = uniquePrefixBase();
    const open: Coordination[] = [];
    let counter = 0;

    /** A fresh namespace per test, so tests never see each other's keys. */
    const namespace = (): string => `${prefixBase}${++counter}:`;
    const adapter = async (keyPrefix: string): Promise<Coordination> => {
      const coord = await factory(keyPrefix);
      open.push(coord);
      return coord;
    };
    const fresh = async (): Promise<Coordination> => adapter(namespace());

    afterEach(async () => {
      await Promise.all(open.splice(0).map((coord) => coord.close()));
    });
    afterAll(async () => {
      await options.cleanup?.(prefixBase);
    });

    describe('keys', () => {
      it('stores, overwrites and reads string values; a missing key reads null', async () => {
        const coord = await fresh();
        expect(await coord.get('absent')).toBeNull();
        await coord.set('k', '{"a":1,"ü":"✓"}');
        expect(await coord.get('k')).toBe('{"a":1,"ü":"✓"}');
        await coord.set('k', '');
        expect(await coord.get('k')).toBe('');
      });

      it('expires a key after its TTL', async () => {
        const coord = await fresh();
        await coord.set('short', 'v', { ttlMs: 1_000 });
        await coord.set('long', 'v', { ttlMs: 10_000 });
        expect(await coord.get('short')).toBe('v');
        await sleep(1_200);
        expect(await coord.get('short')).toBeNull();
        expect(await coord.get('long')).toBe('v');
      });

      it('set without ttlMs clears an earlier expiry', async () => {
        const coord = await fresh();
        await coord.set('k', 'a', { ttlMs: 80 });
        await coord.set('k', 'b');
        await sleep(200);
        expect(await coord.get('k')).toBe('b');
      });

      it('expire sets a new lifetime on existing keys only', async () => {
        const coord = await fresh();
        await coord.set('k', 'v');
        expect(await coord.expire('k', 300)).toBe(true);
        expect(await coord.expire('missing', 300)).toBe(false);
        expect(await coord.get('k')).toBe('v');
        await sleep(450);
        expect(await coord.get('k')).toBeNull();
      });

      it('del removes one or many keys and counts those that existed', async () => {
        const coord = await fresh();
        await coord.set('a', '1');
        await coord.set('b', '2');
        await coord.set('c', '3');
        expect(await coord.del('a')).toBe(1);
        expect(await coord.del('a')).toBe(0);
        expect(await coord.del(['b', 'c', 'nope'])).toBe(2);
        expect(await coord.del([])).toBe(0);
        expect(await coord.get('b')).toBeNull();
      });

      it('setIfAbsent stores only when absent, and again once the key expired', async () => {
        const coord = await fresh();
        expect(await coord.setIfAbsent('k', 'first', { ttlMs: 300 })).toBe(true);
        expect(await coord.setIfAbsent('k', 'second', { ttlMs: 300 })).toBe(false);
        expect(await coord.get('k')).toBe('first');
        await sleep(450);
        expect(await coord.setIfAbsent('k', 'third', { ttlMs: 1000 })).toBe(true);
        expect(await coord.get('k')).toBe('third');
      });

      it('setIfAbsent under a race across replicas: exactly one caller wins', async () => {
        const prefix = namespace();
        const replicas = [await adapter(prefix), await adapter(prefix)];
        const results = await Promise.all(
          Array.from({ length: 60 }, (_, i) => replicas[i % 2]!.setIfAbsent('race', `caller-${i}`, { ttlMs: 5000 })),
        );
        const winners = results.flatMap((won, i) => (won ? [i] : []));
        expect(winners).toHaveLength(1);
        expect(await replicas[1]!.get('race')).toBe(`caller-${winners[0]}`);
      });

      it('getDel returns the value once and deletes it', async () => {
        const coord = await fresh();
        await coord.set('token', 'secret-state', { ttlMs: 5000 });
        expect(await coord.getDel('token')).toBe('secret-state');
        expect(await coord.getDel('token')).toBeNull();
        expect(await coord.get('token')).toBeNull();
        expect(await coord.getDel('never-set')).toBeNull();
      });

      it('getDel under a race across replicas: exactly one caller gets a one-time token', async () => {
        const prefix = namespace();
        const replicas = [await adapter(prefix), await adapter(prefix)];
        for (let round = 0; round < 5; round++) {
          await replicas[0]!.set(`once-${round}`, `state-${round}`, { ttlMs: 5000 });
          const results = await Promise.all(
            Array.from({ length: 40 }, (_, i) => replicas[i % 2]!.getDel(`once-${round}`)),
          );
          expect(results.filter((r) => r !== null)).toEqual([`state-${round}`]);
        }
      });
    });

    describe('counters', () => {
      it('increments atomically by 1 or by a given amount', async () => {
        const coord = await fresh();
        expect(await coord.incr('n')).toBe(1);
        expect(await coord.incr('n')).toBe(2);
        expect(await coord.incr('n', 10)).toBe(12);
        expect(await coord.incr('n', -5)).toBe(7);
        expect(await coord.get('n')).toBe('7');
      });

      it('concurrent increments from replicas lose nothing and each sees a distinct value', async () => {
        const prefix = namespace();
        const replicas = [await adapter(prefix), await adapter(prefix)];
        const results = await Promise.all(Array.from({ length: 100 }, (_, i) => replicas[i % 2]!.incr('hits')));
        expect(new Set(results).size).toBe(100);
        expect(Math.max(...results)).toBe(100);
        expect(await replicas[0]!.get('hits')).toBe('100');
      });

      it('sets the TTL when the counter is created and does not stretch it on later increments', async () => {
        const coord = await fresh();
        // Margins wide enough for a loaded machine: the second increment lands well inside the first TTL, and the
        // counter must be gone long before the second increment's 10 s could have run out.
        const created = Date.now();
        expect(await coord.incr('window', 1, { ttlMs: 1_500 })).toBe(1);
        await sleep(150);
        expect(await coord.incr('window', 1, { ttlMs: 10_000 })).toBe(2);
        while ((await coord.get('window')) !== null && Date.now() - created < 8_000) await sleep(50);
        expect(await coord.get('window')).toBeNull();
        expect(Date.now() - created).toBeLessThan(8_000);
        expect(await coord.incr('window', 1, { ttlMs: 400 })).toBe(1);
      });

      it('a counter without ttlMs does not expire', async () => {
        const coord = await fresh();
        await coord.incr('forever');
        await sleep(50);
        expect(await coord.get('forever')).toBe('1');
      });

      it('rejects incrementing a non-integer value with COORD_COMMAND_FAILED', async () => {
        const coord = await fresh();
        await coord.set('text', 'abc');
        await expect(coord.incr('text')).rejects.toMatchObject({ name: 'CoordinationError', code: 'COORD_COMMAND_FAILED' });
        expect(await coord.get('text')).toBe('abc');
      });
    });

    describe('pub/sub', () => {
      it('delivers messages to subscribers on other replicas, in order, after publish returns', async () => {
        const prefix = namespace();
        const [publisher, subscriber] = [await adapter(prefix), await adapter(prefix)];
        const received: string[] = [];
        await subscriber!.subscribe('invalidate', (message) => received.push(message));
        const publishing = publisher!.publish('invalidate', 'm0');
        const duringPublish = received.length;
        await publishing;
        for (let i = 1; i < 20; i++) await publisher!.publish('invalidate', `m${i}`);
        await waitFor(() => received.length === 20, 2000, 'all messages');
        expect(duringPublish).toBe(0);
        expect(received).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`));
      });

      it('delivers to every handler on a channel, and only to that channel', async () => {
        const coord = await fresh();
        const a: string[] = [];
        const b: string[] = [];
        const other: string[] = [];
        await coord.subscribe('ch', (m) => a.push(m));
        await coord.subscribe('ch', (m) => b.push(m));
        await coord.subscribe('other', (m) => other.push(m));
        await coord.publish('ch', 'hello');
        await waitFor(() => a.length === 1 && b.length === 1, 2000, 'both handlers');
        await sleep(50);
        expect(other).toEqual([]);
        expect(coord.status().subscriptionsHealthy).toBe(true);
      });

      it('unsubscribe stops delivery to that handler only', async () => {
        const coord = await fresh();
        const kept: string[] = [];
        const dropped: string[] = [];
        await coord.subscribe('ch', (m) => kept.push(m));
        const unsubscribe = await coord.subscribe('ch', (m) => dropped.push(m));
        await coord.publish('ch', 'one');
        await waitFor(() => kept.length === 1 && dropped.length === 1, 2000, 'first message');
        await unsubscribe();
        await unsubscribe();
        await coord.publish('ch', 'two');
        await waitFor(() => kept.length === 2, 2000, 'second message');
        await sleep(50);
        expect(dropped).toEqual(['one']);
      });

      it('after the last handler unsubscribes nothing is delivered; subscribing again works', async () => {
        const coord = await fresh();
        const first: string[] = [];
        const unsubscribe = await coord.subscribe('ch', (m) => first.push(m));
        await unsubscribe();
        await coord.publish('ch', 'lost');
        await sleep(100);
        expect(first).toEqual([]);
        const second: string[] = [];
        await coord.subscribe('ch', (m) => second.push(m));
        await coord.publish('ch', 'found');
        await waitFor(() => second.length === 1, 2000, 'message after resubscribe');
        expect(second).toEqual(['found']);
      });

      it('a throwing handler does not stop delivery to the others', async () => {
        const coord = await fresh();
        const got: string[] = [];
        await coord.subscribe('ch', () => {
          throw new Error('handler bug');
        });
        await coord.subscribe('ch', (m) => got.push(m));
        await coord.publish('ch', 'x');
        await coord.publish('ch', 'y');
        await waitFor(() => got.length === 2, 2000, 'messages past a throwing handler');
      });
    });

    describe('locks', () => {
      it('excludes a second holder until released', async () => {
        const prefix = namespace();
        const [a, b] = [await adapter(prefix), await adapter(prefix)];
        const lock = await a!.acquireLock('job', 5000);
        expect(lock).not.toBeNull();
        expect(lock!.name).toBe('job');
        expect(await b!.acquireLock('job', 5000)).toBeNull();
        expect(await a!.acquireLock('job', 5000)).toBeNull();
        expect(await lock!.release()).toBe(true);
        expect(await lock!.release()).toBe(false);
        const next = await b!.acquireLock('job', 5000);
        expect(next).not.toBeNull();
        await next!.release();
      });

      it('of many concurrent contenders exactly one acquires', async () => {
        const prefix = namespace();
        const replicas = [await adapter(prefix), await adapter(prefix)];
        const locks = await Promise.all(Array.from({ length: 30 }, (_, i) => replicas[i % 2]!.acquireLock('leader', 5000)));
        expect(locks.filter((l) => l !== null)).toHaveLength(1);
      });

      it('expires, and an expired holder cannot release or extend the next holder’s lock', async () => {
        const prefix = namespace();
        const [a, b] = [await adapter(prefix), await adapter(prefix)];
        const stale = await a!.acquireLock('job', 80);
        expect(stale).not.toBeNull();
        await sleep(200);
        const current = await b!.acquireLock('job', 5000);
        expect(current).not.toBeNull();
        expect(current!.token).not.toBe(stale!.token);
        expect(await stale!.release()).toBe(false);
        expect(await stale!.extend(5000)).toBe(false);
        expect(await a!.acquireLock('job', 5000)).toBeNull();
        expect(await current!.release()).toBe(true);
      });

      it('extend keeps the lock past its original lifetime', async () => {
        const coord = await fresh();
        const lock = await coord.acquireLock('job', 1_000);
        expect(lock).not.toBeNull();
        await sleep(100);
        expect(await lock!.extend(3000)).toBe(true);
        await sleep(1_200);
        expect(await coord.acquireLock('job', 1000)).toBeNull();
        expect(await lock!.release()).toBe(true);
        expect(await lock!.extend(1000)).toBe(false);
      });

      it('a lock does not collide with a plain key of the same name', async () => {
        const coord = await fresh();
        await coord.set('job', 'plain');
        const lock = await coord.acquireLock('job', 1000);
        expect(lock).not.toBeNull();
        expect(await coord.get('job')).toBe('plain');
        await lock!.release();
      });
    });

    describe('namespaces', () => {
      it('exposes its prefix; keys, counters, channels and locks are isolated between prefixes', async () => {
        const p1 = namespace();
        const p2 = namespace();
        const [one, two, oneAgain] = [await adapter(p1), await adapter(p2), await adapter(p1)];
        expect(one!.keyPrefix).toBe(p1);
        await one!.set('shared-name', 'one');
        expect(await two!.get('shared-name')).toBeNull();
        expect(await oneAgain!.get('shared-name')).toBe('one');
        expect(await two!.setIfAbsent('shared-name', 'two', { ttlMs: 1000 })).toBe(true);
        expect(await one!.get('shared-name')).toBe('one');

        await one!.incr('count');
        expect(await two!.incr('count')).toBe(1);

        const heardByTwo: string[] = [];
        const heardByOneAgain: string[] = [];
        await two!.subscribe('events', (m) => heardByTwo.push(m));
        await oneAgain!.subscribe('events', (m) => heardByOneAgain.push(m));
        await one!.publish('events', 'from-one');
        await waitFor(() => heardByOneAgain.length === 1, 2000, 'same-prefix delivery');
        await sleep(50);
        expect(heardByTwo).toEqual([]);

        const lock = await one!.acquireLock('job', 1000);
        expect(await two!.acquireLock('job', 1000)).not.toBeNull();
        expect(await oneAgain!.acquireLock('job', 1000)).toBeNull();
        await lock!.release();
      });
    });

    describe('health and lifecycle', () => {
      it('pings and reports healthy while connected', async () => {
        const coord = await fresh();
        await coord.ping();
        await coord.subscribe('ch', () => {});
        await waitFor(() => coord.status().connected && coord.status().subscriptionsHealthy, 2000, 'healthy status');
      });

      it('rejects misuse with TypeError before touching the store', async () => {
        const coord = await fresh();
        await expect(coord.get('')).rejects.toBeInstanceOf(TypeError);
        await expect(coord.get('x'.repeat(1025))).rejects.toBeInstanceOf(TypeError);
        await expect(coord.set('k', 42 as unknown as string)).rejects.toBeInstanceOf(TypeError);
        await expect(coord.set('k', 'v', { ttlMs: 0 })).rejects.toBeInstanceOf(TypeError);
        await expect(coord.set('k', 'v', { ttlMs: 1.5 })).rejects.toBeInstanceOf(TypeError);
        await expect(coord.setIfAbsent('k', 'v', {} as { ttlMs: number })).rejects.toBeInstanceOf(TypeError);
        await expect(coord.incr('k', 0.5)).rejects.toBeInstanceOf(TypeError);
        await expect(coord.acquireLock('job', -1)).rejects.toBeInstanceOf(TypeError);
        await expect(coord.del(['ok', ''])).rejects.toBeInstanceOf(TypeError);
        expect(await coord.get('k')).toBeNull();
      });

      it('after close every operation rejects with COORD_CLOSED and status is down', async () => {
        const coord = await fresh();
        await coord.set('k', 'v');
        await coord.close();
        await coord.close();
        const closed = { name: 'CoordinationError', code: 'COORD_CLOSED' };
        await expect(coord.get('k')).rejects.toMatchObject(closed);
        await expect(coord.ping()).rejects.toBeInstanceOf(CoordinationError);
        await expect(coord.publish('ch', 'm')).rejects.toMatchObject(closed);
        await expect(coord.acquireLock('job', 100)).rejects.toMatchObject(closed);
        expect(coord.status()).toEqual({ connected: false, subscriptionsHealthy: false });
      });
    });
  });
}
