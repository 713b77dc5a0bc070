// The proxy status contract of spec §7 through the real route, one test per status, against real loopback upstreams; every answer has exactly one audit entry.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type Answer, type World } from '../../support/world.js';
import { oneAuditEntry, sendJson, startRecordingUpstream, type RecordingUpstream } from './support.js';
import { freePort } from '../../support/ports.js';

const TOKEN = 'upstream-secret-token-7f3a';
let world: World;
let up: RecordingUpstream;
let deadPort: number;
let reader: { id: number; key: string };
let writer: { id: number; key: string };
let admin: { id: number; key: string };

const errorShape = (a: Answer, code: string) => {
  expect(a.json, a.text).toMatchObject({ error: code, message: expect.any(String), request_id: a.headers.get('x-request-id') });
};

beforeAll(async () => {
  up = await startRecordingUpstream({
    '/api/created': (_q, res) => sendJson(res, 201, { id: 42 }),
    '/api/empty': (_q, res) => res.writeHead(204).end(),
    '/api/big': (_q, res) => sendJson(res, 200, { blob: 'x'.repeat(4096) }),
    '/api/boom': (_q, res) => sendJson(res, 500, { trace: 'internal stack at db-7.corp:5432' }),
  });
  deadPort = await freePort();
  world = await startWorld({
    privateSources: ['up', 'dead', 'flaky'],
    env: {
      UPSTREAM_TOKEN: TOKEN,
      SERVICE_GATEWAY__LIMITS__REQUEST_BODY_BYTES: '1024',
      SERVICE_GATEWAY__LIMITS__RESPONSE_BODY_BYTES: '2048',
      SERVICE_GATEWAY__CIRCUIT__FAILURE_THRESHOLD: '2',
      SERVICE_GATEWAY__CIRCUIT__HALF_OPEN_AFTER_MS: '600000',
      SERVICE_AUDIT__DURABILITY_MODE: 'buffered',
    },
  });
  await world.httpSource('up', `${up.base}/api/`, { token_ref: 'env:UPSTREAM_TOKEN' });
  await world.httpSource('dead', `http://127.0.0.1:${deadPort}/api/`, { token_ref: 'env:UPSTREAM_TOKEN' });
  await world.httpSource('flaky', `${up.base}/api/`);
  // Loopback like the others, but not named in allow_private_sources.
  await world.httpSource('unlisted', `${up.base}/api/`);
  const grants = (role: string) => ['up', 'dead', 'flaky', 'unlisted'].map((source_id) => ({ source_id, role_key: role }));
  reader = await world.agent('reader', grants('reader'));
  writer = await world.agent('writer', grants('writer'));
  admin = await world.agent('admin', grants('admin'));
  await world.policy({ name: 'queue writes to /queued', conditions: { source_ids: ['up'], paths: ['/queued/**'], operations: ['write'] }, actions: { effect: 'require_approval' } });
  await world.policy({ name: 'deny /secret', conditions: { source_ids: ['up'], paths: ['/secret/**'] }, actions: { effect: 'deny' } });
  await world.policy({ name: 'throttle /limited', conditions: { source_ids: ['up'], paths: ['/limited/**'] }, actions: { effect: 'allow', rate_limit: '2/minute' } });
});

afterAll(async () => {
  await world?.stop();
  await up?.close();
});

describe('2xx: upstream success passes through unchanged', () => {
  it('200 for a governed GET', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/items');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true, path: '/api/items' });
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry).toMatchObject({ decision: 'allow', status: 200, upstream_status: 200, source_id: 'up', identity_id: reader.id });
  });

  it('request ids are the gateway\'s own UUIDv7s, in the order the requests arrived (the audit index stays append-only)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await world.proxy(reader.key, 'GET', '/proxy/up/items', { headers: { 'x-request-id': 'client-chosen' } });
      ids.push(res.headers.get('x-request-id')!);
      await new Promise((r) => setTimeout(r, 2));
    }
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(3);
  });

  it('201 from the upstream for a writer POST', async () => {
    const res = await world.proxy(writer.key, 'POST', '/proxy/up/created', { body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ id: 42 });
    expect(up.received.at(-1)).toMatchObject({ method: 'POST', path: '/api/created', body: '{"a":1}' });
  });

  it('204 with an empty body', async () => {
    const res = await world.proxy(writer.key, 'PUT', '/proxy/up/empty', { body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
  });
});

describe('202: queued for approval, the upstream not reached', () => {
  it('a writer POST under a require_approval policy', async () => {
    const before = up.hitsUnder('/api/queued').length;
    const res = await world.proxy(writer.key, 'POST', '/proxy/up/queued/x', { body: '{"x":1}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(202);
    expect(res.json).toMatchObject({ error: expect.any(String), approval_id: expect.any(Number), approval_state: 'pending' });
    expect(Number.isInteger(res.json.approval_id)).toBe(true);
    expect(up.hitsUnder('/api/queued').length).toBe(before);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry).toMatchObject({ decision: 'require_approval', status: 202, approval_id: res.json.approval_id });
  });

  it('an admin DELETE (high risk under a by_risk role rule)', async () => {
    const before = up.received.length;
    const res = await world.proxy(admin.key, 'DELETE', '/proxy/up/items/7');
    expect(res.status).toBe(202);
    expect(res.json).toMatchObject({ approval_state: 'pending', approval_id: expect.any(Number) });
    expect(up.received.length).toBe(before);
    const approval = await world.admin('GET', `/api/approvals/${res.json.approval_id}`);
    expect(approval.status, approval.text).toBe(200);
    expect(approval.json).toMatchObject({ id: res.json.approval_id, status: 'pending', source_id: 'up' });
  });
});

describe('4xx refusals', () => {
  it('400 for an invalid path, upstream not reached', async () => {
    const before = up.received.length;
    const res = await world.rawProxy(reader.key, 'GET', '/proxy/up/a/%2e%2e/%2e%2e/etc');
    expect(res.status).toBe(400);
    errorShape(res, 'invalid_path');
    expect(up.received.length).toBe(before);
  });

  it('400 for a method the proxy does not offer (HEAD, OPTIONS)', async () => {
    for (const method of ['OPTIONS', 'HEAD']) {
      const res = await world.rawProxy(reader.key, method, '/proxy/up/items');
      expect([400, 404, 405], method).toContain(res.status);
    }
    expect(up.received.filter((r) => r.method === 'OPTIONS' || r.method === 'HEAD')).toEqual([]);
  });

  it('401 without a key and with a wrong key', async () => {
    const none = await world.proxy(null, 'GET', '/proxy/up/items');
    expect(none.status).toBe(401);
    errorShape(none, 'unauthenticated');
    const wrong = await world.proxy('gh_not-a-real-key', 'GET', '/proxy/up/items');
    expect(wrong.status).toBe(401);
    const entry = await oneAuditEntry(world, none.headers.get('x-request-id'));
    expect(entry).toMatchObject({ decision: 'deny', status: 401, error_code: 'unauthenticated' });
  });

  it('403 when no source role allows the request (reader POST), upstream not reached', async () => {
    const before = up.received.length;
    const res = await world.proxy(reader.key, 'POST', '/proxy/up/items', { body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(403);
    errorShape(res, 'forbidden');
    expect(up.received.length).toBe(before);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry.reasons.some((r) => r.startsWith('source_role'))).toBe(true);
  });

  it('403 when a policy denies, upstream not reached', async () => {
    const before = up.received.length;
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/secret/x');
    expect(res.status).toBe(403);
    errorShape(res, 'forbidden');
    expect(up.received.length).toBe(before);
  });

  it('403 egress_denied for a loopback source not named in allow_private_sources', async () => {
    const before = up.received.length;
    const res = await world.proxy(reader.key, 'GET', '/proxy/unlisted/items');
    expect(res.status).toBe(403);
    errorShape(res, 'egress_denied');
    expect(res.text).not.toContain('127.0.0.1');
    expect(up.received.length).toBe(before);
  });

  it('404 for an unknown source and for a disabled one', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/nope/items');
    expect(res.status).toBe(404);
    errorShape(res, 'unknown_source');
    await world.httpSource('off', `${up.base}/api/`);
    const patched = await world.admin('PATCH', '/api/data-sources/off', { enabled: false });
    expect(patched.status, patched.text).toBeLessThan(300);
    const deadline = Date.now() + 5_000;
    while (world.svc.running.services.registry.get('off')?.enabled !== false && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const off = await world.proxy(reader.key, 'GET', '/proxy/off/items');
    expect(off.status).toBe(404);
  });

  it('413 for a request body over gateway.limits.request_body_bytes, upstream not reached', async () => {
    const before = up.received.length;
    const res = await world.proxy(writer.key, 'POST', '/proxy/up/items', { body: 'x'.repeat(4096), headers: { 'content-type': 'application/octet-stream' } });
    expect(res.status).toBe(413);
    errorShape(res, 'payload_too_large');
    expect(up.received.length).toBe(before);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry.status).toBe(413);
  });

  it('413 for an upstream response over gateway.limits.response_body_bytes', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/big');
    expect(res.status).toBe(413);
    errorShape(res, 'payload_too_large');
    expect(res.text).not.toContain('xxxx');
  });

  it('429 with Retry-After once the policy rate limit (2/minute) is spent', async () => {
    const statuses: number[] = [];
    let last: Answer | undefined;
    for (let i = 0; i < 3; i++) {
      last = await world.proxy(reader.key, 'GET', `/proxy/up/limited/x?i=${i}`);
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 429]);
    errorShape(last!, 'rate_limited');
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(up.hitsUnder('/api/limited').length).toBe(2);
  });
});

describe('5xx: sanitized upstream failure and circuit', () => {
  it('502 for a refused connection, with nothing of the address, port or token', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/dead/items');
    expect(res.status).toBe(502);
    errorShape(res, 'upstream_failed');
    for (const secret of ['127.0.0.1', String(deadPort), TOKEN, 'ECONNREFUSED']) expect(res.text).not.toContain(secret);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry).toMatchObject({ status: 502, error_code: 'upstream_failed' });
  });

  it('503 once the circuit opens (threshold 2), and the upstream is no longer called', async () => {
    const first = await world.proxy(reader.key, 'GET', '/proxy/flaky/boom');
    // An upstream 500 is the upstream's answer; it is not sanitized away into a success.
    expect(first.status).toBeGreaterThanOrEqual(500);
    await world.proxy(reader.key, 'GET', '/proxy/flaky/boom');
    const hits = up.hitsUnder('/api/boom').length;
    const open = await world.proxy(reader.key, 'GET', '/proxy/flaky/other');
    expect(open.status).toBe(503);
    errorShape(open, 'unavailable');
    expect(up.hitsUnder('/api/boom').length).toBe(hits);
    expect(up.hitsUnder('/api/other').length).toBe(0);
    // Circuits are per source: 'up' on the same upstream still answers.
    expect((await world.proxy(reader.key, 'GET', '/proxy/up/items')).status).toBe(200);
  });
});
