// /ready follows its dependencies: a stopped Redis turns it 503 naming redis, a pending migration names migrations, and both recover.
import { afterEach, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';
import { startTestService } from '../support/service.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { migrateToLatest } from '../../src/store/migrate.js';

interface ReadyBody {
  status: 'ok' | 'fail';
  checks: Record<string, { ok: boolean; detail: string }>;
}

async function ready(baseUrl: string): Promise<{ status: number; body: ReadyBody }> {
  const res = await fetch(`${baseUrl}/ready`);
  return { status: res.status, body: (await res.json()) as ReadyBody };
}

async function waitFor(baseUrl: string, want: number, timeoutMs = 15_000): Promise<{ status: number; body: ReadyBody }> {
  const deadline = Date.now() + timeoutMs;
  let last = await ready(baseUrl);
  while (last.status !== want && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    last = await ready(baseUrl);
  }
  return last;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

describe('/ready', () => {
  it('lists every check of DESIGN §8 and answers 200 when all pass, on both listeners', async () => {
    const svc = await startTestService();
    cleanups.push(() => svc.stop());
    for (const url of [svc.gatewayUrl, svc.adminUrl]) {
      const { status, body } = await waitFor(url, 200);
      expect(status).toBe(200);
      expect(body.status).toBe('ok');
      expect(Object.keys(body.checks).sort()).toEqual(['audit_buffer', 'cache_invalidation', 'database', 'migrations', 'redis', 'registry']);
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
    }
  });

  it('turns 503 naming redis when its Redis stops, and 200 again when it returns', async () => {
    const redis: RedisServerHandle = await startRedisServer();
    cleanups.push(() => redis.stop());
    const svc = await startTestService({ env: { SERVICE_REDIS__URL: redis.url } });
    cleanups.push(() => svc.stop());
    expect((await waitFor(svc.gatewayUrl, 200)).status).toBe(200);

    await redis.stop();
    const down = await waitFor(svc.gatewayUrl, 503);
    expect(down.status).toBe(503);
    expect(down.body.status).toBe('fail');
    expect(down.body.checks.redis?.ok).toBe(false);
    expect(down.body.checks.database?.ok).toBe(true);
    const adminDown = await ready(svc.adminUrl);
    expect(adminDown.status).toBe(503);
    expect(adminDown.body.checks.redis?.ok).toBe(false);

    await redis.restart();
    const up = await waitFor(svc.gatewayUrl, 200);
    expect(up.status).toBe(200);
    expect(up.body.checks.redis?.ok).toBe(true);
    expect(up.body.checks.cache_invalidation?.ok).toBe(true);
  });

  it('is 503 naming migrations while a migration is pending, and 200 once migrated', async () => {
    const database: TestDatabase = await createTestDatabase();
    cleanups.push(() => database.drop());
    const svc = await startTestService({ database, env: { SERVICE_DATABASE__MIGRATE_ON_START: 'false' } });
    cleanups.push(() => svc.stop());

    const pending = await ready(svc.gatewayUrl);
    expect(pending.status).toBe(503);
    expect(pending.body.checks.migrations?.ok).toBe(false);
    expect(pending.body.checks.migrations?.detail).toMatch(/pending: 0001_foundation/);
    expect(pending.body.checks.database?.ok).toBe(true);

    await migrateToLatest(svc.running.services.db);
    const migrated = await waitFor(svc.gatewayUrl, 200);
    expect(migrated.status).toBe(200);
    expect(migrated.body.checks.migrations?.ok).toBe(true);
  });

  it('reports draining during shutdown', async () => {
    const svc = await startTestService();
    cleanups.push(() => svc.stop());
    svc.running.services.readiness.startDraining();
    const { status, body } = await ready(svc.gatewayUrl);
    expect(status).toBe(503);
    expect(body.checks.shutdown?.ok).toBe(false);
  });
});
