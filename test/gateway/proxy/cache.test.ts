// The governed cache through the real route: hits are scoped (identity, grant, policy, source generation), the redacted form is what is stored, a write invalidates, and a second replica sharing Redis learns of writes made elsewhere.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../../support/service.js';
import { answer, startWorld, type World } from '../../support/world.js';
import { oneAuditEntry, sendJson, startRecordingUpstream, type RecordingUpstream } from './support.js';

let world: World;
let up: RecordingUpstream;
let alice: { id: number; key: string };
let bob: { id: number; key: string };
let writer: { id: number; key: string };

const hits = (p: string) => up.received.filter((r) => r.path === p).length;
const cacheOf = (a: { headers: Headers }) => a.headers.get('x-gatehouse-cache');

beforeAll(async () => {
  up = await startRecordingUpstream({
    '/api/people': (_q, res) => sendJson(res, 200, { people: [{ name: 'Jane', email: 'jane@example.com' }] }),
  });
  world = await startWorld({ privateSources: ['up'], env: { SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
  await world.httpSource('up', `${up.base}/api/`);
  alice = await world.agent('alice', [{ source_id: 'up', role_key: 'reader' }]);
  bob = await world.agent('bob', [{ source_id: 'up', role_key: 'reader' }]);
  writer = await world.agent('cache-writer', [{ source_id: 'up', role_key: 'writer' }]);
});

afterAll(async () => {
  await world?.stop();
  await up?.close();
});

describe('governed cache through the route', () => {
  it('a second identical GET is a hit; the upstream is reached once; the redacted form is what is stored', async () => {
    const first = await world.proxy(alice.key, 'GET', '/proxy/up/people');
    const second = await world.proxy(alice.key, 'GET', '/proxy/up/people');
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(cacheOf(first)).toBe('miss');
    expect(cacheOf(second)).toBe('hit');
    expect(hits('/api/people')).toBe(1);
    expect(second.text).toBe(first.text);
    expect(second.json.people[0].email).toBe('[REDACTED:email]');
    expect(second.text).not.toContain('jane@example.com');
    const entry = await oneAuditEntry(world, second.headers.get('x-request-id'));
    expect(entry).toMatchObject({ cache: 'hit', status: 200, upstream_status: null });
    expect((await oneAuditEntry(world, first.headers.get('x-request-id'))).cache).toBe('miss');
  });

  it('a second identity misses', async () => {
    const before = hits('/api/people');
    const res = await world.proxy(bob.key, 'GET', '/proxy/up/people');
    expect(cacheOf(res)).toBe('miss');
    expect(hits('/api/people')).toBe(before + 1);
  });

  it('a changed policy misses (and the new obligations apply)', async () => {
    await world.proxy(alice.key, 'GET', '/proxy/up/people');
    const before = hits('/api/people');
    await world.policy({ name: 'deep pii for up', conditions: { source_ids: ['up'] }, actions: { effect: 'allow', pii_mode: 'deep' } });
    const res = await world.proxy(alice.key, 'GET', '/proxy/up/people');
    expect(res.status).toBe(200);
    expect(cacheOf(res)).toBe('miss');
    expect(hits('/api/people')).toBe(before + 1);
  });

  it('a write on the source makes the next GET miss', async () => {
    await world.proxy(alice.key, 'GET', '/proxy/up/people');
    expect(cacheOf(await world.proxy(alice.key, 'GET', '/proxy/up/people'))).toBe('hit');
    const write = await world.proxy(writer.key, 'POST', '/proxy/up/people', { body: '{"name":"x"}', headers: { 'content-type': 'application/json' } });
    expect(write.status).toBe(200);
    const before = hits('/api/people');
    const after = await world.proxy(alice.key, 'GET', '/proxy/up/people');
    expect(cacheOf(after)).toBe('miss');
    expect(hits('/api/people')).toBe(before + 1);
  });

  it('a revoked grant is refused, never served from the cache', async () => {
    await world.proxy(bob.key, 'GET', '/proxy/up/people');
    expect(cacheOf(await world.proxy(bob.key, 'GET', '/proxy/up/people'))).toBe('hit');
    const grants = await world.admin('GET', `/api/identities/${bob.id}/grants`);
    const list = (Array.isArray(grants.json) ? grants.json : (grants.json.items ?? grants.json.grants)) as { id: number; source_id: string }[];
    const grant = list.find((g) => g.source_id === 'up')!;
    const revoked = await world.admin('DELETE', `/api/identities/${bob.id}/grants/${grant.id}`);
    expect(revoked.status, revoked.text).toBeLessThan(300);
    const before = hits('/api/people');
    let res = await world.proxy(bob.key, 'GET', '/proxy/up/people');
    const deadline = Date.now() + 5_000;
    while (res.status === 200 && Date.now() < deadline) {
      // A hit here would be a stale, less restrictive answer: fail immediately rather than wait it out.
      expect(cacheOf(res)).not.toBe('hit');
      await new Promise((r) => setTimeout(r, 50));
      res = await world.proxy(bob.key, 'GET', '/proxy/up/people');
    }
    expect(res.status).toBe(403);
    expect(cacheOf(res)).toBeNull();
    expect(hits('/api/people')).toBe(before);
  });
});

describe('two gateway processes sharing Redis', () => {
  let second: TestService;

  beforeAll(async () => {
    second = await startTestService({ database: world.svc.database!, env: world.svc.env });
    const deadline = Date.now() + 5_000;
    while (!second.running.services.registry.get('up') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  });

  afterAll(async () => {
    await second?.stop();
  });

  const viaB = async (key: string, method: string, p: string, body?: string) =>
    answer(await fetch(`${second.gatewayUrl}${p}`, { method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ?? null }));

  it('a GET cached on A, a write through B, the next GET on A misses and reaches the upstream', async () => {
    const p = '/proxy/up/people?replica=1';
    await world.proxy(alice.key, 'GET', p);
    expect(cacheOf(await world.proxy(alice.key, 'GET', p))).toBe('hit');
    const write = await viaB(writer.key, 'PUT', '/proxy/up/people/1', '{"n":1}');
    expect(write.status, write.text).toBe(200);
    const before = hits('/api/people');
    const after = await world.proxy(alice.key, 'GET', p);
    expect(after.status).toBe(200);
    expect(cacheOf(after)).toBe('miss');
    expect(hits('/api/people')).toBe(before + 1);
  });

  it('B serves a hit from the shared L2 for an entry A stored', async () => {
    const p = '/proxy/up/people?replica=2';
    await world.proxy(alice.key, 'GET', p);
    const before = hits('/api/people');
    const res = await viaB(alice.key, 'GET', p);
    expect(res.status).toBe(200);
    expect(cacheOf({ headers: res.headers })).toBe('hit');
    expect(hits('/api/people')).toBe(before);
  });
});
