// The proxy end to end: an agent's GET reaches a real upstream through every stage, and the basic refusals answer the status contract of spec §7.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../../support/world.js';
import { startUpstream, type TestUpstream } from '../../egress/upstream-server.js';

let world: World;
let upstream: TestUpstream;
let reader: { id: number; key: string };

beforeAll(async () => {
  upstream = await startUpstream({
    '/base/items': (_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': 'a=b', 'x-internal': 'secret-host' }).end(JSON.stringify({ items: [{ id: 1, email: 'jane@example.com' }] })),
  });
  world = await startWorld({ privateSources: ['up'] });
  await world.httpSource('up', `http://127.0.0.1:${upstream.port}/base/`);
  reader = await world.agent('reader-agent', [{ source_id: 'up', role_key: 'reader' }]);
});

afterAll(async () => {
  await world?.stop();
  await upstream?.close();
});

describe('proxy smoke', () => {
  it('serves a governed GET: upstream reached, personal data redacted, response headers allowlisted', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/items');
    expect(res.status, res.text).toBe(200);
    expect(res.json.items[0].email).toBe('[REDACTED:email]');
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(res.headers.get('x-internal')).toBeNull();
    expect(upstream.hits.at(-1)).toMatchObject({ method: 'GET', path: '/base/items' });
  });

  it('answers 401 without a key, 404 for an unknown source, 403 for a write the reader role does not allow, 400 for traversal', async () => {
    expect((await world.proxy(null, 'GET', '/proxy/up/items')).status).toBe(401);
    expect((await world.proxy(reader.key, 'GET', '/proxy/nope/items')).status).toBe(404);
    const before = upstream.hits.length;
    const write = await world.proxy(reader.key, 'POST', '/proxy/up/items', { body: '{}', headers: { 'content-type': 'application/json' } });
    expect(write.status).toBe(403);
    expect(write.json).toMatchObject({ error: 'forbidden', request_id: expect.any(String) });
    expect((await world.rawProxy(reader.key, 'GET', '/proxy/up/%2e%2e/secret')).status).toBe(400);
    expect((await world.rawProxy(reader.key, 'GET', '/proxy/up/../secret')).status).toBe(400);
    expect(upstream.hits.length).toBe(before);
  });
});
