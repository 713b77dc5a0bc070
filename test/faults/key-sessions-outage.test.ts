// Prevents agent keys from failing (503, no identity) when the control database is down and Redis holds no session for them (a revocation marker older than the key's check, or Redis restarted empty): key sessions serve from memory, and never past a revocation or with Redis down.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { KEY_SESSION_MEMO_MS, KEY_SESSION_REVOKED_CHANNEL } from '../../src/identity/key-sessions.js';
import { sleep, waitFor } from '../support/wait.js';
import { startFaultWorld, type FaultWorld } from './support.js';

let fw: FaultWorld;
beforeAll(async () => {
  fw = await startFaultWorld({ privateRedis: true });
}, 60_000);
afterAll(async () => fw?.stop());

/** Both coordination connections are back: commands answer (key sessions are read) and subscriptions carry revocations. */
const coordHealthy = () => {
  const status = fw.world.svc.running.services.coord.status();
  return status.connected && status.subscriptionsHealthy;
};

it('serves a checked key from memory while the database is down, through a Redis restart, and stops at a revocation', async () => {
  const w = fw.world;
  // Granted just now: the grant's revocation marker is in Redis, so this key's check is not stored there.
  const fresh = await w.agent('standby-fresh', [{ source_id: 'up', role_key: 'reader' }]);
  const other = await w.agent('standby-other', [{ source_id: 'up', role_key: 'reader' }]);
  expect((await w.proxy(fresh.key, 'GET', '/proxy/up/a')).status).toBe(200);
  expect((await w.proxy(other.key, 'GET', '/proxy/up/a')).status).toBe(200);
  const hitsBefore = fw.upstream.hits.length;

  await fw.cluster.kill();
  await sleep(KEY_SESSION_MEMO_MS + 100);
  // The database is down and Redis holds only the marker, older than the key's check: served from memory.
  const marked = await w.proxy(fresh.key, 'GET', '/proxy/up/b');
  expect(marked.status, marked.text).toBe(200);

  // Redis restarts empty: no session, no marker. The keys checked before are still served.
  await fw.redis!.restart();
  await waitFor(coordHealthy, 10_000, 'coordination reconnected');
  for (const agent of [fresh, other]) {
    const r = await w.proxy(agent.key, 'GET', '/proxy/up/c');
    expect(r.status, r.text).toBe(200);
  }
  // A key never checked by this process cannot be served without the database.
  expect((await w.proxy('gh_never_seen_key_0123456789abcdefABCDEF', 'GET', '/proxy/up/d')).status).toBe(503);
  expect(fw.upstream.hits.length).toBe(hitsBefore + 3);

  // A revocation heard over pub/sub (one that cannot be read revokes everything) ends the copies at once.
  const publisher = new Redis(fw.redis!.url, { lazyConnect: true });
  await publisher.connect();
  await publisher.publish(`${w.svc.env.SERVICE_REDIS__KEY_PREFIX}${KEY_SESSION_REVOKED_CHANNEL}`, 'unreadable');
  await publisher.quit();
  await sleep(KEY_SESSION_MEMO_MS + 100);
  const revoked = await w.proxy(other.key, 'GET', '/proxy/up/e');
  expect(revoked.status, revoked.text).toBe(503);
  expect(fw.upstream.hits.length).toBe(hitsBefore + 3);
}, 60_000);

it('with Redis down too, nothing is served from memory (a revocation could not reach this process)', async () => {
  const w = fw.world;
  if (!fw.cluster.running) await fw.cluster.start();
  const agent = await w.agent('standby-no-redis', [{ source_id: 'up', role_key: 'reader' }]);
  await waitFor(async () => (await w.proxy(agent.key, 'GET', '/proxy/up/a')).status === 200, 15_000, 'database back');
  await fw.cluster.kill();
  await fw.redis!.stop();
  await waitFor(() => !fw.world.svc.running.services.coord.status().subscriptionsHealthy, 5_000, 'coordination down');
  await sleep(KEY_SESSION_MEMO_MS + 100);
  const r = await w.proxy(agent.key, 'GET', '/proxy/up/b');
  expect(r.status, r.text).toBe(503);
}, 60_000);
