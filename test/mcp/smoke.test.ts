// First light: the SDK client initializes over Streamable HTTP, lists the tools and lists the sources it is granted.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startMcpWorld, HTTP_SOURCE, PG_SOURCE, type McpWorld } from './fixture.js';

let mw: McpWorld;
let reader: { id: number; key: string };

beforeAll(async () => {
  mw = await startMcpWorld();
  reader = await mw.world.agent('mcp-smoke-reader', [
    { source_id: HTTP_SOURCE, role_key: 'reader' },
    { source_id: PG_SOURCE, role_key: 'reader' },
  ]);
}, 60_000);
afterAll(async () => mw?.stop());

test('initialize, list tools, list_sources', async () => {
  const client = await mw.connect(reader.key);
  expect(client.getServerVersion()).toMatchObject({ name: 'gatehouse' });
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name).sort()).toEqual(['describe_source', 'get_approval', 'http_request', 'list_sources', 'query', 'read_document', 'search_documents']);
  const r = await client.callTool({ name: 'list_sources', arguments: {} });
  expect(r.isError ?? false).toBe(false);
  const sources = (r.structuredContent as { sources: Array<{ source_id: string; type: string }> }).sources;
  expect(sources.map((s) => [s.source_id, s.type])).toEqual([
    [HTTP_SOURCE, 'http'],
    [PG_SOURCE, 'postgres'],
  ]);
});
