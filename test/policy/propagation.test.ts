// The compiled policy set across instances: a write on one instance is in the other's set within moments (pub/sub), and the service's reload rules.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { PolicyService } from '../../src/admin/policies/service.js';
import { startTestService, type TestService } from '../support/service.js';
import { OWNER_PASSWORD, startPolicyService, type PolicyApi } from './support.js';

let first: TestService;
let second: TestService;
let api: PolicyApi;

beforeAll(async () => {
  ({ svc: first, api } = await startPolicyService());
  second = await startTestService({
    database: first.database!,
    env: { SERVICE_REDIS__KEY_PREFIX: first.env.SERVICE_REDIS__KEY_PREFIX!, SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD },
  });
}, 90_000);
afterAll(async () => {
  await second?.stop();
  await first?.stop();
});

async function waitFor(check: () => boolean, ms: number): Promise<number> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > ms) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - start;
}

describe('propagation between instances', () => {
  it('a policy created on one instance is in the other compiled set within two seconds', async () => {
    const remote = second.running.services.policies;
    const before = remote.version()!;
    const res = await api.send('POST', '/api/policies', { name: 'propagated', conditions: { source_ids: ['crm'] }, actions: { effect: 'deny' } });
    expect(res.status).toBe(201);
    // The periodic safety reload runs every 30 s, so arriving within 2 s means the announcement did it.
    const took = await waitFor(() => remote.version() === before + 1, 2_000);
    expect(remote.current().policies.map((p) => p.name)).toContain('propagated');
    expect(remote.version()).toBe(first.running.services.policies.version());
    expect(took).toBeLessThan(2_000);
    console.info(`policy propagation to the second instance: ${took} ms`);

    // An import (many rows, one version step) and a delete travel the same way.
    await api.send('POST', '/api/policies/import/apply', [{ name: 'i1', conditions: {}, actions: {} }, { name: 'i2', conditions: {}, actions: {} }]);
    await waitFor(() => remote.version() === before + 2, 2_000);
    expect(remote.current().policies.map((p) => p.name)).toEqual(expect.arrayContaining(['i1', 'i2', 'propagated']));
    await api.send('DELETE', `/api/policies/${res.json.id}`);
    await waitFor(() => remote.version() === before + 3, 2_000);
    expect(remote.current().policies.map((p) => p.name)).not.toContain('propagated');
  });
});

describe('policy service reload rules', () => {
  const log = createLogger({ level: 'silent', service: 'policy-test', role: 'all' });

  it('refuses to hand out a set before the first load (never an empty allow-all set)', () => {
    const s = new PolicyService(first.running.services.db, first.running.services.coord, log);
    expect(s.tryCurrent()).toBeNull();
    expect(() => s.current()).toThrow(/not loaded/);
    expect(s.health().ok).toBe(false);
  });

  it('keeps the previous set when the stored policies do not compile, and recovers when fixed', async () => {
    const { db, coord } = first.running.services;
    const s = new PolicyService(db, coord, log, { reloadIntervalMs: 60_000 });
    await s.start();
    try {
      const good = s.version()!;
      const goodCount = s.current().policies.length;
      // Written behind the API's back (the API would refuse it): the trigger advances the version.
      const row = await db.insertInto('policies').values({ name: 'corrupt', conditions: JSON.stringify({ bogus: [1] }), actions: JSON.stringify({}) }).returning('id').executeTakeFirstOrThrow();
      await s.reload();
      expect(s.version()).toBe(good);
      expect(s.current().policies.length).toBe(goodCount);
      expect(s.health()).toMatchObject({ ok: true });
      expect(s.health().detail).toMatch(/not in force/);

      await db.updateTable('policies').set({ conditions: JSON.stringify({ teams: ['x'] }), updated_at: sql`now()` }).where('id', '=', row.id).execute();
      await s.reload();
      expect(s.version()).toBeGreaterThan(good);
      expect(s.current().policies.map((p) => p.name)).toContain('corrupt');
      expect(s.health().detail).not.toMatch(/not in force/);
      await db.deleteFrom('policies').where('id', '=', row.id).execute();
    } finally {
      await s.stop();
    }
  });

  it('the periodic reload catches a change nobody announced', async () => {
    const { db, coord } = first.running.services;
    const s = new PolicyService(db, coord, log, { reloadIntervalMs: 150 });
    await s.start();
    try {
      const v = s.version()!;
      await db.insertInto('policies').values({ name: 'silent-change', conditions: JSON.stringify({}), actions: JSON.stringify({ effect: 'deny' }) }).execute();
      await waitFor(() => (s.version() ?? 0) > v, 2_000);
      expect(s.current().policies.map((p) => p.name)).toContain('silent-change');
    } finally {
      await s.stop();
    }
  });
});
