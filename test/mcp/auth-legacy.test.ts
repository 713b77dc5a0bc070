// Authentication before anything runs (401 in the gateway error shape), the stateless transport's edges, and the deprecated legacy endpoints on the same tool code.
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startMcpWorld, PG_SOURCE, type McpWorld } from './fixture.js';
import { answer } from '../support/world.js';

let mw: McpWorld;
let reader: { id: number; key: string };
let url: string;

const JSONRPC_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const insertCall = {
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'query', arguments: { source_id: PG_SOURCE, sql: "insert into notes (body) values ('should never exist')" } },
};

async function post(path: string, key: string | null, body: unknown, headers: Record<string, string> = JSONRPC_HEADERS) {
  return answer(await fetch(`${url}${path}`, { method: 'POST', headers: { ...headers, ...(key === null ? {} : { authorization: `Bearer ${key}` }) }, body: JSON.stringify(body) }));
}

beforeAll(async () => {
  mw = await startMcpWorld();
  url = mw.world.svc.gatewayUrl;
  reader = await mw.world.agent('mcp-legacy-reader', [{ source_id: PG_SOURCE, role_key: 'writer' }]);
}, 60_000);
afterAll(async () => mw?.stop());

describe('authentication', () => {
  test('a missing or wrong key is refused with 401 before any tool runs', async () => {
    const notes = async () => Number((await mw.direct<{ n: number }>('select count(*)::int as n from notes'))[0]!.n);
    const before = await notes();
    for (const key of [null, 'wrong-key', `${reader.key}x`]) {
      const r = await post('/mcp', key, insertCall);
      expect(r.status).toBe(401);
      expect(r.json).toEqual({ error: 'unauthenticated', message: expect.any(String), request_id: expect.any(String) });
    }
    // A body that is not even JSON: the key is checked first, so it is still 401 (not 400).
    const garbage = answer(await fetch(`${url}/mcp`, { method: 'POST', headers: { ...JSONRPC_HEADERS, authorization: 'Bearer nope' }, body: '{not json' }));
    expect((await garbage).status).toBe(401);
    expect(await notes()).toBe(before);
    // No tool call was audited: only the refusals, without an identity.
    const entries = await mw.audit("action <> 'mcp.authenticate'");
    expect(entries).toEqual([]);
    const refusals = await mw.audit("action = 'mcp.authenticate'");
    expect(refusals.length).toBe(4);
    expect(refusals.every((e) => e.status === 401 && e.identity_id === null && e.decision === 'deny')).toBe(true);
  });

  test('the SDK client without a key cannot initialize', async () => {
    await expect(mw.connect(null)).rejects.toThrow();
    await expect(mw.connect('wrong')).rejects.toThrow();
  });

  test('the key is checked on every request, not only at initialize', async () => {
    const r = await post('/mcp', reader.key, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    expect(r.status, r.text).toBe(200);
    expect(r.json.result.tools).toHaveLength(7);
    // The same JSON-RPC message without the key: refused, nothing is remembered between requests.
    expect((await post('/mcp', null, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} })).status).toBe(401);
  });

  test('stateless transport: no session id issued, GET and DELETE answer 405', async () => {
    const init = await answer(
      await fetch(`${url}/mcp`, {
        method: 'POST',
        headers: { ...JSONRPC_HEADERS, authorization: `Bearer ${reader.key}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
      }),
    );
    expect(init.status, init.text).toBe(200);
    expect(init.headers.get('mcp-session-id')).toBeNull();
    expect(init.json.result.serverInfo.name).toBe('gatehouse');
    const list = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} });
    const noAccept = await fetch(`${url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${reader.key}` }, body: list });
    expect(noAccept.status).toBe(406);
    const text = await answer(await fetch(`${url}/mcp`, { method: 'POST', headers: { ...JSONRPC_HEADERS, 'content-type': 'text/plain', authorization: `Bearer ${reader.key}` }, body: list }));
    expect(text.status).toBe(415);
    const xml = await answer(await fetch(`${url}/mcp`, { method: 'POST', headers: { ...JSONRPC_HEADERS, 'content-type': 'application/xml', authorization: `Bearer ${reader.key}` }, body: '<x/>' }));
    expect(xml.status).toBe(400);
    expect(xml.json.error).toBe('invalid_request');
    for (const method of ['GET', 'DELETE']) {
      const r = await fetch(`${url}/mcp`, { method, headers: { authorization: `Bearer ${reader.key}` } });
      expect(r.status).toBe(405);
      expect(r.headers.get('allow')).toBe('POST');
    }
  });
});

describe('legacy endpoints', () => {
  test('tools/list names every tool with the legacy prefix and is marked deprecated', async () => {
    const r = await post('/mcp/tools/list', reader.key, {}, { 'content-type': 'application/json' });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('deprecation')).toBe('true');
    expect(r.headers.get('link')).toContain('successor-version');
    expect(r.json.tools.map((t: { name: string }) => t.name).sort()).toEqual([
      'gatehouse_describe_source', 'gatehouse_get_approval', 'gatehouse_http_request', 'gatehouse_list_sources', 'gatehouse_query',
      'gatehouse_read_document', 'gatehouse_search_documents',
    ]);
    expect((await post('/mcp/tools/list', null, {}, { 'content-type': 'application/json' })).status).toBe(401);
  });

  test('tools/call runs the same tool code with the prefixed name', async () => {
    const r = await post('/mcp/tools/call', reader.key, { name: 'gatehouse_query', arguments: { source_id: PG_SOURCE, sql: 'select name from customers where id = 2' } }, { 'content-type': 'application/json' });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('deprecation')).toBe('true');
    expect(r.json.structuredContent).toMatchObject({ columns: ['name'], rows: [['Bob']] });
    const sources = await post('/mcp/tools/call', reader.key, { name: 'gatehouse_list_sources', arguments: {} }, { 'content-type': 'application/json' });
    expect(sources.json.structuredContent.sources.map((s: { source_id: string }) => s.source_id)).toEqual([PG_SOURCE]);
    // A tool error is still a 200 with isError, as on POST /mcp.
    const denied = await post('/mcp/tools/call', reader.key, { name: 'gatehouse_query', arguments: { source_id: PG_SOURCE, sql: 'drop table notes' } }, { 'content-type': 'application/json' });
    expect(denied.status).toBe(200);
    expect(denied.json).toMatchObject({ isError: true, structuredContent: { error: 'forbidden' } });
    // Unprefixed (current) names and bad bodies are refused in the gateway error shape.
    const current = await post('/mcp/tools/call', reader.key, { name: 'query', arguments: {} }, { 'content-type': 'application/json' });
    expect(current.status).toBe(400);
    expect(current.json).toMatchObject({ error: 'invalid_request', message: 'Unknown tool: query' });
    const bad = await post('/mcp/tools/call', reader.key, { tool: 'gatehouse_query' }, { 'content-type': 'application/json' });
    expect(bad.status).toBe(400);
    expect(bad.json.message).toContain('name');
    const entries = await mw.audit("identity_id = $1 and action = 'mcp.query'", [reader.id]);
    expect(entries.length).toBeGreaterThanOrEqual(2);
  });

  test('GET /mcp/sse streams an endpoint event pointing at /mcp/tools/call', async () => {
    const target = new URL(`${url}/mcp/sse`);
    const first = await new Promise<{ status: number; deprecation: string | undefined; chunk: string }>((resolve, reject) => {
      const req = httpRequest({ host: target.hostname, port: target.port, path: target.pathname, headers: { authorization: `Bearer ${reader.key}` } }, (res) => {
        res.once('data', (c: Buffer) => {
          resolve({ status: res.statusCode ?? 0, deprecation: res.headers.deprecation as string | undefined, chunk: c.toString('utf8') });
          req.destroy();
        });
      });
      req.on('error', reject);
      req.end();
    });
    expect(first.status).toBe(200);
    expect(first.deprecation).toBe('true');
    expect(first.chunk).toContain('event: endpoint\ndata: /mcp/tools/call\n\n');
    expect((await fetch(`${url}/mcp/sse`)).status).toBe(401);
  });

  test('an open SSE stream does not hold the gateway open at shutdown', async () => {
    const target = new URL(`${url}/mcp/sse`);
    const ended = new Promise<void>((resolve, reject) => {
      const req = httpRequest({ host: target.hostname, port: target.port, path: target.pathname, headers: { authorization: `Bearer ${reader.key}` } }, (res) => {
        res.on('data', () => undefined);
        res.on('end', () => resolve());
        res.on('error', () => resolve());
      });
      req.on('error', reject);
      req.end();
    });
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    await mw.world.stop();
    await ended;
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
