// JSON nested deeper than the gateway's bound in a tool call is refused as invalid_request before anything recursive walks it: through raw POST /mcp, the legacy endpoint and the MCP SDK client.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startMcpWorld, PG_SOURCE, type McpWorld } from './fixture.js';
import { answer } from '../support/world.js';

let mw: McpWorld;
let reader: { id: number; key: string };
let url: string;

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** `[[[…]]]` nested `depth` levels, built as text: JSON.stringify itself would overflow on it. */
function deepArrays(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

function deepObjects(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

beforeAll(async () => {
  mw = await startMcpWorld();
  url = mw.world.svc.gatewayUrl;
  reader = await mw.world.agent('mcp-deep-reader', [{ source_id: PG_SOURCE, role_key: 'reader' }]);
}, 60_000);
afterAll(async () => mw?.stop());

describe('raw POST /mcp', () => {
  test.each([
    ['arrays', deepArrays(100_000)],
    ['objects', deepObjects(50_000)],
  ])('100k levels of %s in arguments answer invalid_request, and the gateway keeps serving', async (_kind, nested) => {
    const body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"query","arguments":{"source_id":"${PG_SOURCE}","sql":"select 1","params":${nested}}}}`;
    const r = await answer(await fetch(`${url}/mcp`, { method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${reader.key}` }, body }));
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ error: 'invalid_request', request_id: expect.any(String) });
    expect(r.json.message).toMatch(/nest/i);
    const ok = await answer(
      await fetch(`${url}/mcp`, { method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${reader.key}` }, body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/list', params: {} }) }),
    );
    expect(ok.status, ok.text).toBe(200);
  });

  test('the legacy tools/call endpoint refuses it the same way', async () => {
    const body = `{"name":"gatehouse_query","arguments":{"source_id":"${PG_SOURCE}","sql":"select 1","params":${deepArrays(100_000)}}}`;
    const r = await answer(await fetch(`${url}/mcp/tools/call`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${reader.key}` }, body }));
    expect(r.status, r.text).toBe(400);
    expect(r.json).toMatchObject({ error: 'invalid_request' });
  });

  test('nesting within the bound is still accepted', async () => {
    // 32 levels: deeper than any tool's arguments need, well within the bound.
    const body = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"query","arguments":{"source_id":"${PG_SOURCE}","sql":"select 1 as one","params":[],"x":${deepArrays(32)}}}}`;
    const r = await answer(await fetch(`${url}/mcp`, { method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${reader.key}` }, body }));
    expect(r.status, r.text).toBe(200);
    // The tool's own schema refuses the unknown key: the request got as far as the tool.
    expect(JSON.stringify(r.json.result)).toMatch(/invalid_request/);
  });
});

describe('MCP SDK client', () => {
  test('a tool call with deeply nested arguments is refused, not a crash', async () => {
    const client = await mw.connect(reader.key);
    try {
      // Built iteratively; the SDK client serialises it with JSON.stringify, recursively: 2,000 levels fit its stack.
      let nested: unknown = [];
      for (let i = 0; i < 2_000; i++) nested = [nested];
      const call = client.callTool({ name: 'query', arguments: { source_id: PG_SOURCE, sql: 'select 1', params: nested as unknown[] } });
      await expect(call).rejects.toThrow(/nest/i);
      // The same client keeps working.
      const r = await client.callTool({ name: 'query', arguments: { source_id: PG_SOURCE, sql: 'select 1 as one' } });
      expect(r.isError).toBeFalsy();
    } finally {
      await client.close();
    }
  });
});
