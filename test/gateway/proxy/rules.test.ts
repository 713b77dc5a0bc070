// Spec §4 HTTP proxy rules 1–11 through the real route, one test per rule, inspecting what the loopback upstream actually received.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../../support/world.js';
import { oneAuditEntry, sendJson, startRecordingUpstream, type RecordingUpstream } from './support.js';

const TOKEN = 'rules-upstream-token-91c2';
let world: World;
let up: RecordingUpstream;
let reader: { id: number; key: string };
let writer: { id: number; key: string };
let nobody: { id: number; key: string };

beforeAll(async () => {
  up = await startRecordingUpstream({
    '/api/v1/redirect': (_q, res) => res.writeHead(302, { location: '/api/v1/target', 'content-type': 'text/plain' }).end('moved'),
    '/api/v1/headers': (_q, res) =>
      res
        .writeHead(200, {
          'content-type': 'application/json',
          'cache-control': 'no-store',
          etag: '"v1"',
          vary: 'Accept',
          'last-modified': 'Wed, 21 Oct 2015 07:28:00 GMT',
          expires: 'Thu, 01 Jan 2037 00:00:00 GMT',
          'set-cookie': 'session=upstream; HttpOnly',
          'keep-alive': 'timeout=5',
          'proxy-authenticate': 'Basic realm=x',
          upgrade: 'h2c',
          'x-powered-by': 'internal-host-17',
          'x-upstream-secret': 'leak',
        })
        .end(JSON.stringify({ ok: true })),
    '/api/v1/pii': (_q, res) => sendJson(res, 200, { customer: { email: 'jane@example.com', notes: ['call 555-0100', { ssn: '078-05-1120' }] } }),
    '/api/v1/text': (_q, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('contact jane@example.com today'),
    '/api/v1/fail': (_q, res) => sendJson(res, 404, { error: 'no such item at db-internal-3:5432' }),
  });
  world = await startWorld({ privateSources: ['up', 'hdr'], env: { UPSTREAM_TOKEN: TOKEN, SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
  await world.httpSource('up', `${up.base}/api/v1/`, { token_ref: 'env:UPSTREAM_TOKEN' });
  await world.httpSource('hdr', `${up.base}/api/v1/`, { token_ref: 'env:UPSTREAM_TOKEN', auth_header: 'X-Api-Key', auth_scheme: '' });
  reader = await world.agent('rules-reader', [{ source_id: 'up', role_key: 'reader' }, { source_id: 'hdr', role_key: 'reader' }]);
  writer = await world.agent('rules-writer', [{ source_id: 'up', role_key: 'writer' }]);
  nobody = await world.agent('rules-nobody', [], { roles: ['support'] });
  await world.policy({ name: 'support allow (cannot create access)', conditions: { identity_roles: ['support'] }, actions: { effect: 'allow' } });
  await world.policy({ name: 'no cache for rules', conditions: { source_ids: ['up', 'hdr'] }, actions: { effect: 'allow', cache: false } });
});

afterAll(async () => {
  await world?.stop();
  await up?.close();
});

describe('spec §4 HTTP proxy rules', () => {
  it('rule 1: a policy allow cannot create source access without a role grant', async () => {
    const res = await world.proxy(nobody.key, 'GET', '/proxy/up/items');
    expect(res.status).toBe(403);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry.reasons.join(' ')).toMatch(/source_role/);
  });

  it('rule 2: dot segments, encoded traversal, scheme and authority injection are refused', async () => {
    const before = up.received.length;
    for (const target of ['/proxy/up/a/../../admin', '/proxy/up/%2e%2e/x', '/proxy/up/%252e%252e/x', '/proxy/up/a%2fb', '/proxy/up/a%5cb', '/proxy/up/a\\b', '/proxy/up/http://evil/x', '/proxy/up/@evil.com/x', '/proxy/up/%00']) {
      const res = await world.rawProxy(reader.key, 'GET', target);
      expect(res.status, target).toBe(400);
    }
    expect(up.received.length).toBe(before);
  });

  it('rule 3: the base path is a containment boundary', async () => {
    const before = up.received.length;
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/items/7?x=1');
    expect(res.status).toBe(200);
    expect(up.received.at(-1)).toMatchObject({ path: '/api/v1/items/7', query: 'x=1' });
    for (const target of ['/proxy/up/..', '/proxy/up/%2e%2e%2fv2', '/proxy/up/.%2e/v2/x']) expect((await world.rawProxy(reader.key, 'GET', target)).status, target).toBe(400);
    expect(up.received.length).toBe(before + 1);
    expect(up.received.every((r) => r.path.startsWith('/api/v1/'))).toBe(true);
  });

  it('rule 4: redirects are not followed; the 3xx comes back without its Location', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/redirect');
    expect(res.status).toBe(302);
    // Location is outside the response allowlist of rule 7: the client never learns the upstream's layout.
    expect(res.headers.get('location')).toBeNull();
    expect(up.hitsUnder('/api/v1/target')).toEqual([]);
  });

  it('rule 5: a loopback target without the operator setting is refused (the address table covers every form)', async () => {
    await world.httpSource('notlisted', `${up.base}/api/v1/`);
    const grantee = await world.agent('rules-nl', [{ source_id: 'notlisted', role_key: 'reader' }]);
    const before = up.received.length;
    const res = await world.proxy(grantee.key, 'GET', '/proxy/notlisted/items');
    expect(res.status).toBe(403);
    expect(res.json.error).toBe('egress_denied');
    expect(up.received.length).toBe(before);
  });

  it('rule 6: only allowlisted request headers are forwarded; the credential comes from token_ref', async () => {
    const sent = {
      accept: 'application/json',
      'accept-language': 'fr',
      'if-none-match': '"x"',
      'if-modified-since': 'Wed, 21 Oct 2015 07:28:00 GMT',
      'idempotency-key': 'idem-1',
      cookie: 'sid=client-cookie',
      'proxy-authorization': 'Basic cHJveHk6cHc=',
      'x-forwarded-for': '6.6.6.6',
      'x-forwarded-host': 'evil.example',
      forwarded: 'for=6.6.6.6',
      'x-real-ip': '6.6.6.6',
      'x-custom': 'dropped',
    };
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/echo', { headers: sent });
    expect(res.status).toBe(200);
    const got = up.received.at(-1)!.headers;
    expect(got).toMatchObject({ accept: 'application/json', 'accept-language': 'fr', 'if-none-match': '"x"', 'if-modified-since': sent['if-modified-since'], 'idempotency-key': 'idem-1' });
    expect(got.authorization).toBe(`Bearer ${TOKEN}`);
    expect(JSON.stringify(got)).not.toContain(reader.key);
    for (const name of ['cookie', 'proxy-authorization', 'x-forwarded-for', 'x-forwarded-host', 'forwarded', 'x-real-ip', 'x-custom']) expect(got[name], name).toBeUndefined();
    expect(got.host).toBe(`127.0.0.1:${up.port}`);

    await world.proxy(reader.key, 'GET', '/proxy/hdr/echo');
    const custom = up.received.at(-1)!.headers;
    expect(custom['x-api-key']).toBe(TOKEN);
    expect(custom.authorization).toBeUndefined();
  });

  it('rule 6: a write forwards Content-Type, If-Match and the body, never the client Authorization', async () => {
    const res = await world.proxy(writer.key, 'PATCH', '/proxy/up/items/1', { body: '{"n":2}', headers: { 'content-type': 'application/json', 'if-match': '"v1"', 'if-unmodified-since': 'Wed, 21 Oct 2015 07:28:00 GMT' } });
    expect(res.status).toBe(200);
    const got = up.received.at(-1)!;
    expect(got).toMatchObject({ method: 'PATCH', body: '{"n":2}' });
    expect(got.headers).toMatchObject({ 'content-type': 'application/json', 'if-match': '"v1"', 'if-unmodified-since': 'Wed, 21 Oct 2015 07:28:00 GMT', authorization: `Bearer ${TOKEN}` });
  });

  it('rule 7: only allowlisted response headers come back; Set-Cookie and hop-by-hop headers are dropped', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/headers');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('etag')).toBe('"v1"');
    expect(res.headers.get('vary')).toBe('Accept');
    expect(res.headers.get('last-modified')).toBe('Wed, 21 Oct 2015 07:28:00 GMT');
    expect(res.headers.get('expires')).toBe('Thu, 01 Jan 2037 00:00:00 GMT');
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    for (const name of ['set-cookie', 'proxy-authenticate', 'upgrade', 'x-powered-by', 'x-upstream-secret']) expect(res.headers.get(name), name).toBeNull();
    // The gateway's own connection may say keep-alive; the upstream's hop-by-hop value never comes through.
    expect(res.headers.get('keep-alive')).not.toBe('timeout=5');
  });

  it('rule 8: request bodies pass bounded; JSON is redacted recursively and text bodies by text redaction', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/pii');
    expect(res.status).toBe(200);
    expect(res.text).not.toContain('jane@example.com');
    expect(res.text).not.toContain('078-05-1120');
    expect(res.json.customer.email).toMatch(/REDACTED/);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry.redactions).toBeGreaterThanOrEqual(2);
    const text = await world.proxy(reader.key, 'GET', '/proxy/up/text');
    expect(text.text).not.toContain('jane@example.com');
    expect(text.text).toMatch(/^contact .*REDACTED.* today$/);
  });

  it('rule 9: only successful GETs are cached (a write and an upstream 404 are not)', async () => {
    const a = await world.proxy(reader.key, 'GET', '/proxy/up/fail');
    const b = await world.proxy(reader.key, 'GET', '/proxy/up/fail');
    expect([a.status, b.status]).toEqual([404, 404]);
    expect(b.headers.get('x-gatehouse-cache')).not.toBe('hit');
    expect(up.hitsUnder('/api/v1/fail').length).toBe(2);
  });

  it('rule 10: writes need an explicit role allow (reader PUT 403, writer PUT passes)', async () => {
    expect((await world.proxy(reader.key, 'PUT', '/proxy/up/items/1', { body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(403);
    expect((await world.proxy(writer.key, 'PUT', '/proxy/up/items/1', { body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(200);
    expect((await world.proxy(writer.key, 'DELETE', '/proxy/up/items/1')).status).toBe(403);
  });

  it('rule 11: upstream codes pass through unchanged; error bodies carry nothing of the upstream or its credential', async () => {
    const res = await world.proxy(reader.key, 'GET', '/proxy/up/fail');
    expect(res.status).toBe(404);
    // An upstream's own non-2xx answer is the upstream's body (redacted), not a gateway error body.
    expect(res.text).not.toContain(TOKEN);
    const failure = await world.proxy(reader.key, 'GET', '/proxy/nope/x');
    expect(failure.text).not.toContain(String(up.port));
    expect(Object.keys(failure.json).sort()).toEqual(['error', 'message', 'request_id']);
  });
});
