// Redis down: lookups bypass (L1 included), strict write barriers refuse the write (503), lenient ones continue and owe the advance; after a restart nothing stale is served.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisCoordination } from '../../src/coord/index.js';
import { GatehouseError } from '../../src/errors/registry.js';
import { startRedisServer } from '../support/redis-server.js';
import type { RedisServerHandle } from '../support/redis-server.js';
import { MapDurable, response, scope, startReplica, uniquePrefix, waitFor } from './support.js';
import type { Replica } from './support.js';

describe('governed cache while Redis is down', () => {
  let server: RedisServerHandle;
  const open: Replica[] = [];
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    for (const r of open) await r.close();
    await server?.stop();
  });

  it('bypasses, refuses strict writes, lets lenient writes run, and serves nothing stale after the restart', async () => {
    const prefix = uniquePrefix();
    const durable = new MapDurable();
    const strict = await startReplica(new RedisCoordination({ url: server.url, keyPrefix: prefix }), { durable });
    const lenient = await startReplica(new RedisCoordination({ url: server.url, keyPrefix: prefix }), { durable, config: { strict_write_barriers: false } });
    open.push(strict, lenient);

    const look = await strict.cache.lookup(scope());
    await strict.cache.store(look.key, response('{"before":true}'));
    expect(await strict.cache.lookup(scope())).toMatchObject({ hit: true, tier: 'l1' });
    const generationBefore = look.key!.generation;

    await server.stop();
    await waitFor(() => !strict.coord.status().connected && !lenient.coord.status().connected, 3000, 'disconnect');

    // The entry is still in L1, but without the current generation it cannot be trusted.
    const started = performance.now();
    expect(await strict.cache.lookup(scope())).toEqual({ hit: false, reason: 'l2_unavailable', key: null });
    expect(performance.now() - started).toBeLessThan(2500);
    expect(strict.cache.stats()).toMatchObject({ bypasses: 1, l1_entries: 1 });

    const refused = await strict.cache.beforeWrite('crm').then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(GatehouseError);
    expect(refused).toMatchObject({ code: 'unavailable' });
    expect((refused as GatehouseError).spec.http).toBe(503);
    expect(strict.cache.stats().barrier_failures).toBe(1);
    // Its own L1 copies of the source are dropped anyway.
    expect(strict.cache.stats().l1_entries).toBe(0);

    await expect(lenient.cache.beforeWrite('crm')).resolves.toBeUndefined();
    await expect(lenient.cache.afterWrite('crm')).resolves.toBeUndefined();
    expect(lenient.generations.pending()).toEqual(['crm']);
    // afterWrite never throws, strict or not: the write has already happened.
    await expect(strict.cache.afterWrite('crm')).resolves.toBeUndefined();

    // Redis comes back empty (no persistence): every counter and L2 entry is gone.
    await server.restart();
    await waitFor(() => strict.coord.status().connected && lenient.coord.status().connected, 5000, 'reconnect');
    await waitFor(() => lenient.generations.pending().length === 0 && strict.generations.pending().length === 0, 3000, 'owed advances');

    const after = await strict.cache.lookup(scope());
    expect(after).toMatchObject({ hit: false, reason: 'not_found' });
    expect(after.key!.generation).toBeGreaterThan(generationBefore);
    expect(durable.values.get('crm')).toBeGreaterThan(generationBefore);
    await strict.cache.store(after.key, response('{"after":true}'));
    // Replicas converge on the generation within their memo window: an entry stored under a generation the
    // other replica has already left behind is unreachable (safe). Until they agree, the store is redone from
    // a fresh lookup; at no point may the entry from before the outage be served.
    const deadline = Date.now() + 5000;
    let served: string | null = null;
    while (served === null && Date.now() < deadline) {
      const hit = await lenient.cache.lookup(scope());
      if (hit.hit) {
        served = hit.entry.body.toString();
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
      const again = await strict.cache.lookup(scope());
      if (!again.hit) await strict.cache.store(again.key, response('{"after":true}'));
    }
    expect(served).toBe('{"after":true}');
  });
});
