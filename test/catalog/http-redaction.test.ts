// Classified HTTP JSON fields end to end: a real upstream describes itself with OpenAPI, the worker captures it, an operator classifies response properties, and a redact_classified policy redacts those fields in /proxy responses — under every spelling of the path the upstream serves the same data for.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../support/world.js';

const SOURCE = 'oas-proxy';
let world: World;
let server: Server;
let agent: { id: number; key: string };

const OPENAPI = {
  openapi: '3.0.3',
  paths: {
    '/accounts/{id}': {
      get: { parameters: [{ name: 'id', in: 'path', required: true }], responses: { '200': { content: { 'application/json': { schema: { $ref: '#/components/schemas/Account' } } } } } },
    },
  },
  components: {
    schemas: {
      Account: { type: 'object', properties: { id: { type: 'integer' }, memo: { type: 'string' }, label: { type: 'string' }, profile: { type: 'object', properties: { backup_code: { type: 'string' }, city: { type: 'string' } } } } },
    },
  },
};

// Field names the personal-data detectors do not know: what is redacted here is redacted because it is classified.
const account = (id: string) => ({ id: Number(id), label: 'acct-label', memo: 'qmemotok', profile: { backup_code: 'qcodetok', city: 'Oslo' }, history: [{ memo: 'qmemotok-2' }] });

/** Routes like common frameworks do: percent-decoded, case-insensitive, trailing slash and repeated slashes ignored. */
function lenientPath(raw: string): string {
  let p = raw.split('?')[0]!.split(';')[0]!;
  try {
    p = decodeURIComponent(p);
  } catch {
    /* served as sent */
  }
  return p.replace(/\/{2,}/g, '/').replace(/\/$/, '').toLowerCase();
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = lenientPath(req.url ?? '/');
    if (path === '/base/openapi.json') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(OPENAPI));
    const m = /^\/base\/accounts\/([^/]+)$/.exec(path);
    if (m !== null) return void res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(account(m[1]!)));
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  world = await startWorld({ privateSources: [SOURCE] });
  await world.httpSource(SOURCE, `http://127.0.0.1:${(server.address() as AddressInfo).port}/base/`, { openapi_path: '/openapi.json' });
  agent = await world.agent('oas-agent', [{ source_id: SOURCE, role_key: 'reader' }]);
  const scanned = await world.admin('POST', `/api/data-sources/${SOURCE}/catalog/scan`, { wait_seconds: 30 });
  expect(scanned.json.snapshot, scanned.text).toMatchObject({ status: 'ok' });
}, 120_000);

afterAll(async () => {
  await world?.stop();
  await new Promise((r) => server?.close(r));
});

describe('classified HTTP JSON fields through /proxy', () => {
  it('are returned while unclassified, and redacted once classified and a redact_classified policy applies', async () => {
    const tree = await world.admin('GET', `/api/data-sources/${SOURCE}/catalog`);
    expect(tree.json.tree.operations[0].response_properties.map((p: { name: string }) => p.name)).toEqual(['id', 'label', 'memo', 'profile', 'profile.backup_code', 'profile.city']);
    const before = await world.proxy(agent.key, 'GET', `/proxy/${SOURCE}/accounts/7`);
    expect(before.status, before.text).toBe(200);
    expect(before.json.memo).toBe('qmemotok');

    await world.policy({ name: 'redact contact fields', conditions: { identity_ids: [agent.id] }, actions: { effect: 'allow', redact_classified: ['contact'] } });
    for (const path of ['GET /accounts/{id}#memo', 'GET /accounts/{id}#profile.backup_code']) {
      const a = await world.admin('PUT', `/api/data-sources/${SOURCE}/catalog/annotations`, { path, classification: 'contact' });
      expect(a.status, a.text).toBe(200);
    }
    const after = await world.proxy(agent.key, 'GET', `/proxy/${SOURCE}/accounts/7`);
    expect(after.status, after.text).toBe(200);
    expect(after.json).toMatchObject({ id: 7, label: 'acct-label', profile: { city: 'Oslo' } });
    expect(after.text).not.toContain('qmemotok');
    expect(after.text).not.toContain('qcodetok');
    // Redacted by name wherever it sits in the document (the nested copy under history too).
    expect(after.json.memo).toMatch(/^\[REDACTED/);
    expect(after.json.profile.backup_code).toMatch(/^\[REDACTED/);
  });

  it.each([
    ['trailing slash', '/accounts/7/'],
    ['query string', '/accounts/7?expand=all'],
    ['upper case', '/ACCOUNTS/7'],
    ['mixed case', '/Accounts/7'],
    ['percent-encoded letter', '/%61ccounts/7'],
    ['percent-encoded upper', '/%41CCOUNTS/7'],
    ['matrix parameter', '/accounts/7;v=1'],
    ['encoded id', '/accounts/%37'],
  ])('stay redacted under another spelling of the path the upstream serves alike: %s', async (_name, path) => {
    const r = await world.rawProxy(agent.key, 'GET', `/proxy/${SOURCE}${path}`);
    if (r.status === 200) {
      expect(r.text, path).not.toContain('qmemotok');
      expect(r.text, path).not.toContain('qcodetok');
    } else {
      expect([400, 403, 404]).toContain(r.status);
      expect(r.text).not.toContain('qmemotok');
    }
  });

  it('the policy dry run names the classified fields of the operation', async () => {
    const dry = await world.admin('POST', '/api/policies/dry-run', { identity_id: agent.id, source_id: SOURCE, method: 'GET', path: '/accounts/7' });
    expect(dry.status, dry.text).toBe(200);
    expect(dry.json.obligations.redact_columns).toEqual(expect.arrayContaining(['memo', 'backup_code']));
  });
});
