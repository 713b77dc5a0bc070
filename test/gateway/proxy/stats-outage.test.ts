// GET /stats authentication and counters, and the proxy under a Redis outage: reads bypass the cache, writes answer 503 under strict write barriers without reaching the upstream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServerHandle } from '../../support/redis-server.js';
import { answer, startWorld, type World } from '../../support/world.js';
import { oneAuditEntry, startRecordingUpstream, type RecordingUpstream } from './support.js';

describe('GET /stats', () => {
  let world: World;
  let up: RecordingUpstream;
  let reader: { key: string };

  beforeAll(async () => {
    up = await startRecordingUpstream();
    world = await startWorld({ privateSources: ['up'], env: { SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
    await world.httpSource('up', `${up.base}/api/`);
    reader = await world.agent('stats-reader', [{ source_id: 'up', role_key: 'reader' }]);
  });

  afterAll(async () => {
    await world?.stop();
    await up?.close();
  });

  const stats = async (authorization?: string) => answer(await fetch(`${world.svc.gatewayUrl}/stats`, { headers: authorization ? { authorization } : {} }));

  it('401 without credentials or with a wrong one', async () => {
    expect((await stats()).status).toBe(401);
    expect((await stats('Bearer nope')).status).toBe(401);
  });

  it('200 with an admin API token or an agent key; counts cache hits and misses and registered sources', async () => {
    const before = (await stats(`Bearer ${world.token}`)).json;
    expect(before.sources.registered).toBeGreaterThanOrEqual(1);
    await world.proxy(reader.key, 'GET', '/proxy/up/s');
    await world.proxy(reader.key, 'GET', '/proxy/up/s');
    const after = await stats(`Bearer ${reader.key}`);
    expect(after.status).toBe(200);
    expect(after.json).toMatchObject({ connections: { active: expect.any(Number) }, sources: { registered: expect.any(Number) } });
    const flat = (o: Record<string, unknown>) => JSON.stringify(o);
    expect(flat(after.json.cache)).not.toBe(flat(before.cache));
    const num = (o: Record<string, unknown>, k: string) => Number((o as Record<string, number>)[k] ?? 0);
    expect(num(after.json.cache, 'hits') - num(before.cache, 'hits')).toBeGreaterThanOrEqual(1);
    expect(num(after.json.cache, 'misses') - num(before.cache, 'misses')).toBeGreaterThanOrEqual(1);
  });

  it('public when observability.public_stats_enabled', async () => {
    const open = await startWorld({ env: { SERVICE_OBSERVABILITY__PUBLIC_STATS_ENABLED: 'true' } });
    try {
      const res = await answer(await fetch(`${open.svc.gatewayUrl}/stats`));
      expect(res.status).toBe(200);
      expect(res.json.sources).toBeDefined();
    } finally {
      await open.stop();
    }
  });
});

describe('Redis outage with strict write barriers', () => {
  let redis: RedisServerHandle;
  let world: World;
  let up: RecordingUpstream;
  let writer: { key: string };

  beforeAll(async () => {
    redis = await startRedisServer();
    up = await startRecordingUpstream();
    world = await startWorld({ privateSources: ['up'], env: { SERVICE_REDIS__URL: redis.url, SERVICE_CACHE__STRICT_WRITE_BARRIERS: 'true', SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
    await world.httpSource('up', `${up.base}/api/`);
    writer = await world.agent('outage-writer', [{ source_id: 'up', role_key: 'writer' }]);
  }, 60_000);

  afterAll(async () => {
    await world?.stop();
    await up?.close();
    await redis?.stop();
  });

  it('a write answers 503 without reaching the upstream; a read still answers, bypassing the cache', async () => {
    expect((await world.proxy(writer.key, 'GET', '/proxy/up/r')).status).toBe(200);
    await redis.stop();
    const before = up.received.length;
    const write = await world.proxy(writer.key, 'POST', '/proxy/up/w', { body: '{}', headers: { 'content-type': 'application/json' } });
    expect(write.status, write.text).toBe(503);
    expect(write.json).toMatchObject({ error: expect.stringMatching(/unavailable/), request_id: expect.any(String) });
    expect(up.received.filter((r) => r.method === 'POST')).toEqual([]);
    expect((await oneAuditEntry(world, write.headers.get('x-request-id'))).status).toBe(503);
    const read = await world.proxy(writer.key, 'GET', '/proxy/up/r2');
    expect(read.status, read.text).toBe(200);
    expect(read.headers.get('x-gatehouse-cache')).not.toBe('hit');
    expect(up.received.length).toBe(before + 1);
  });
});
