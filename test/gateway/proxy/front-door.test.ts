// The proxy's node:http front door (docs/decisions/0028-proxy-hot-path.md): it takes only ordinary bodiless proxy requests, and whatever it
// answers is what the Fastify route answers for the same request: status, headers, body and the one audit entry.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type Answer, type World } from '../../support/world.js';
import { proxyFrontDoor, type ProxyFrontDoorDeps } from '../../../src/gateway/proxy/route.js';
import { auditEntries, sendJson, startRecordingUpstream, type AuditRow, type RecordingUpstream } from './support.js';

let world: World;
let up: RecordingUpstream;
let reader: { id: number; key: string };

beforeAll(async () => {
  up = await startRecordingUpstream({
    '/api/empty': (_q, res) => res.writeHead(204).end(),
    '/api/typed': (_q, res) => sendJson(res, 200, { email: 'jane@example.com', n: 1 }, { etag: '"v1"', 'cache-control': 'no-store', 'x-internal': 'no' }),
    '/api/untyped': (_q, res) => res.writeHead(200).end('plain bytes'),
  });
  world = await startWorld({ privateSources: ['up', 'pass'], env: { SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
  await world.httpSource('up', `${up.base}/api/`);
  await world.httpSource('pass', `${up.base}/api/`, { unscannable_responses: 'pass' });
  reader = await world.agent('reader', [{ source_id: 'up', role_key: 'reader' }, { source_id: 'pass', role_key: 'reader' }]);
  await world.policy({ name: 'deny /secret', conditions: { source_ids: ['up'], paths: ['/secret/**'] }, actions: { effect: 'deny' } });
});

afterAll(async () => {
  await world?.stop();
  await up?.close();
});

/** The headers a client sees, without those that differ per request by nature. */
function stableHeaders(a: Answer): Record<string, string> {
  const out: Record<string, string> = {};
  a.headers.forEach((value, name) => {
    if (name !== 'date' && name !== 'x-request-id' && name !== 'connection' && name !== 'keep-alive') out[name] = value;
  });
  return out;
}

/** The audit entry without what differs per request by nature (ids, times). */
async function entryOf(a: Answer): Promise<Partial<AuditRow>> {
  const rows = await auditEntries(world, a.headers.get('x-request-id')!);
  expect(rows).toHaveLength(1);
  const { request_id: _id, ...rest } = rows[0]!;
  const drop = rest as Record<string, unknown>;
  for (const k of ['id', 'ts', 'duration_ms', 'seal', 'batch_id', 'batch_seq']) delete drop[k];
  return rest;
}

describe('the front door answers as the route does', () => {
  // A chunked request announces a body, so the front door leaves it to the Fastify route: the same request through both handlers.
  const viaRoute = { 'transfer-encoding': 'chunked' };
  const cases: Array<[string, string | null]> = [
    ['/proxy/up/typed?q=1', 'reader'],
    ['/proxy/up/untyped', 'reader'],
    ['/proxy/pass/untyped', 'reader'],
    ['/proxy/up/empty', 'reader'],
    ['/proxy/up/secret/x', 'reader'],
    ['/proxy/up/%2e%2e/x', 'reader'],
    ['/proxy/nope/x', 'reader'],
    ['/proxy/up/typed', null],
    ['/proxy/up', 'reader'],
  ];
  for (const [target, who] of cases) {
    it(`GET ${target} (${who ?? 'no key'})`, async () => {
      const key = who === null ? null : reader.key;
      // Distinct queries: the first answer must not be the second one's cache hit (the query is not in the audited path).
      const sep = target.includes('?') ? '&' : '?';
      const front = await world.rawProxy(key, 'GET', `${target}${sep}via=front`);
      const route = await world.rawProxy(key, 'GET', `${target}${sep}via=route`, { headers: viaRoute });
      expect(front.status, front.text).toBe(route.status);
      expect(front.text).toBe(route.text.replaceAll(route.headers.get('x-request-id')!, front.headers.get('x-request-id')!));
      expect(stableHeaders(front)).toEqual(stableHeaders(route));
      expect(front.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
      expect(await entryOf(front)).toEqual(await entryOf(route));
    });
  }

  it('a 204 carries neither content type nor length, and an untyped body is application/octet-stream', async () => {
    const empty = await world.rawProxy(reader.key, 'GET', '/proxy/up/empty');
    expect(empty.status).toBe(204);
    expect(empty.headers.get('content-type')).toBeNull();
    expect(empty.headers.get('content-length')).toBeNull();
    const untyped = await world.rawProxy(reader.key, 'GET', '/proxy/pass/untyped');
    expect(untyped.status, untyped.text).toBe(200);
    expect(untyped.headers.get('content-type')).toBe('application/octet-stream');
    expect(untyped.headers.get('content-length')).toBe(String(Buffer.byteLength(untyped.text)));
  });
});

describe('what the front door leaves to the Fastify route', () => {
  // Declined requests are handed back before anything is read: deps that throw on any use prove it.
  const untouchable = new Proxy({}, { get: () => { throw new Error('the front door used its deps for a request it should decline'); } }) as ProxyFrontDoorDeps;
  const door = proxyFrontDoor(untouchable);
  const ask = (method: string, url: string, headers: Record<string, string> = {}) => door({ method, url, headers } as unknown as IncomingMessage, {} as ServerResponse);

  it.each([
    ['HEAD', '/proxy/up/x', {}],
    ['OPTIONS', '/proxy/up/x', {}],
    ['GET', '/health', {}],
    ['GET', '/proxy/', {}],
    ['GET', '/proxy//x', {}],
    ['GET', '/proxy/Up/x', {}],
    ['GET', '/proxy/u%70/x', {}],
    ['GET', '/proxy/up;x/y', {}],
    ['POST', '/proxy/up/x', { 'content-length': '2' }],
    ['PUT', '/proxy/up/x', { 'transfer-encoding': 'chunked' }],
    ['GET', '/proxy/up/x', { 'content-length': '1' }],
  ])('%s %s %j', (method, url, headers) => {
    expect(ask(method, url, headers)).toBe(false);
  });
});
