// Redis outages: a dedicated redis-server is killed and restarted; the adapter must fail fast, then recover by itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisCoordination } from '../../src/coord/index.js';
import type { CoordinationLogger } from '../../src/coord/index.js';
import { startRedisServer } from '../support/redis-server.js';
import type { RedisServerHandle } from '../support/redis-server.js';
import { waitFor } from './contract.js';

function recordingLogger(): CoordinationLogger & { entries: { level: string; msg: string | undefined }[] } {
  const entries: { level: string; msg: string | undefined }[] = [];
  const record = (level: string) => (_obj: object, msg?: string) => {
    entries.push({ level, msg });
  };
  return { entries, info: record('info'), warn: record('warn'), error: record('error'), debug: record('debug') };
}

async function timeRejection(operation: () => Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const started = performance.now();
  const error = await operation().then(
    () => null,
    (e: unknown) => e,
  );
  return { ms: performance.now() - started, error };
}

describe('redis outage and recovery', () => {
  let server: RedisServerHandle;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('fails fast while Redis is down and recovers by itself, subscriptions included', async () => {
    const logger = recordingLogger();
    const coord = new RedisCoordination({ url: server.url, keyPrefix: 'gh:outage:', logger });
    const publisher = new RedisCoordination({ url: server.url, keyPrefix: 'gh:outage:' });
    try {
      const received: string[] = [];
      await coord.subscribe('invalidate', (m) => received.push(m));
      await publisher.publish('invalidate', 'before');
      await waitFor(() => received.length === 1, 2000, 'message before the outage');
      expect(coord.status()).toEqual({ connected: true, subscriptionsHealthy: true });

      await server.stop();

      const ping = await timeRejection(() => coord.ping());
      expect(ping.error).toMatchObject({ name: 'CoordinationError', code: 'COORD_UNAVAILABLE' });
      expect(ping.ms).toBeLessThan(2000);
      await waitFor(() => !coord.status().connected, 2000, 'connected=false');
      expect(coord.status().subscriptionsHealthy).toBe(false);

      // Every kind of operation rejects promptly during the outage; none queues up to run later.
      const during = await Promise.all([
        timeRejection(() => coord.set('k', 'written-during-outage')),
        timeRejection(() => coord.incr('n')),
        timeRejection(() => coord.acquireLock('job', 1000)),
        timeRejection(() => publisher.publish('invalidate', 'lost')),
        timeRejection(() => coord.ping()),
      ]);
      for (const { ms, error } of during) {
        expect(error).toMatchObject({ code: 'COORD_UNAVAILABLE' });
        expect(ms).toBeLessThan(2000);
      }
      console.log(`outage: first ping rejected in ${ping.ms.toFixed(0)} ms; others in ≤ ${Math.max(...during.map((d) => d.ms)).toFixed(0)} ms`);

      await new Promise((resolve) => setTimeout(resolve, 1500));
      const restartedAt = performance.now();
      await server.restart();
      await waitFor(() => coord.status().connected && coord.status().subscriptionsHealthy, 10_000, 'recovery');
      console.log(`outage: recovered ${(performance.now() - restartedAt).toFixed(0)} ms after redis-server was ready again`);
      await coord.ping();

      await waitFor(() => publisher.status().connected, 10_000, 'publisher recovery');
      await publisher.publish('invalidate', 'after');
      await waitFor(() => received.includes('after'), 2000, 'message after the outage');
      expect(received).toEqual(['before', 'after']);
      // The rejected write was not replayed after reconnecting.
      expect(await coord.get('k')).toBeNull();

      const warnings = logger.entries.filter((e) => e.level === 'warn');
      expect(warnings.length).toBeGreaterThanOrEqual(1);
      expect(warnings.length).toBeLessThanOrEqual(2); // one per connection per outage, not one per retry
      expect(logger.entries.some((e) => e.level === 'info' && e.msg === 'coordination store reconnected')).toBe(true);
    } finally {
      await Promise.all([coord.close(), publisher.close()]);
    }
  });

  it('a subscription made while Redis is down becomes active once it returns', async () => {
    if (!server.running) await server.restart();
    await server.stop();
    const coord = new RedisCoordination({ url: server.url, keyPrefix: 'gh:outage2:' });
    try {
      const connecting = await timeRejection(() => coord.ping());
      expect(connecting.error).toMatchObject({ code: 'COORD_UNAVAILABLE' });
      expect(connecting.ms).toBeLessThan(2000);

      const received: string[] = [];
      await coord.subscribe('events', (m) => received.push(m));
      expect(coord.status()).toEqual({ connected: false, subscriptionsHealthy: false });

      await server.restart();
      await waitFor(() => coord.status().subscriptionsHealthy, 10_000, 'subscription after start');
      await coord.publish('events', 'hello');
      await waitFor(() => received.length === 1, 2000, 'delivery');
      expect(received).toEqual(['hello']);
    } finally {
      await coord.close();
    }
  });

  it('a hung Redis (process frozen, sockets open) still cannot make a command wait more than ~1.5 s', async () => {
    if (!server.running) await server.restart();
    const coord = new RedisCoordination({ url: server.url, keyPrefix: 'gh:outage3:' });
    try {
      await coord.ping();
      server.pause();
      try {
        const results = await Promise.all([timeRejection(() => coord.ping()), timeRejection(() => coord.get('k'))]);
        for (const { ms, error } of results) {
          expect(error).toMatchObject({ code: 'COORD_UNAVAILABLE' });
          expect(ms).toBeGreaterThan(1000);
          expect(ms).toBeLessThan(2000);
        }
        console.log(`hung redis: commands rejected after ${results.map((r) => r.ms.toFixed(0)).join(', ')} ms`);
      } finally {
        server.resume();
      }
      await coord.ping();
    } finally {
      await coord.close();
    }
  });
});
