// COPY through the MCP query tool (a buffered request, with no data stream of its own): COPY FROM STDIN is answered with an error at once instead of hanging its upstream connection, and COPY TO STDOUT returns no data.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startMcpWorld, PG_SOURCE, type McpWorld } from './fixture.js';

let mw: McpWorld;
let writer: { id: number; key: string };

beforeAll(async () => {
  mw = await startMcpWorld();
  writer = await mw.world.agent('mcp-copy-writer', [{ source_id: PG_SOURCE, role_key: 'writer' }]);
}, 60_000);
afterAll(async () => mw?.stop());

test('COPY FROM STDIN through the query tool fails at once, stores nothing, and the tool keeps working', async () => {
  const client = await mw.connect(writer.key);
  try {
    const started = Date.now();
    const call = client.callTool({ name: 'query', arguments: { source_id: PG_SOURCE, sql: 'copy notes (body) from stdin' } });
    const r = await Promise.race([call, new Promise<'hang'>((resolve) => setTimeout(() => resolve('hang'), 5_000))]);
    expect(r, 'the call hung').not.toBe('hang');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((r as { isError?: boolean }).isError).toBe(true);
    expect(JSON.stringify(r)).toMatch(/COPY FROM STDIN needs a client data stream/);
    const after = await client.callTool({ name: 'query', arguments: { source_id: PG_SOURCE, sql: 'select count(*)::int as n from notes' } });
    expect(after.isError).toBeFalsy();
    expect((after.structuredContent as { rows: unknown[][] }).rows).toEqual([['0']]);
  } finally {
    await client.close();
  }
});

test('COPY TO STDOUT through the query tool returns no row data', async () => {
  const client = await mw.connect(writer.key);
  try {
    const r = await client.callTool({ name: 'query', arguments: { source_id: PG_SOURCE, sql: 'copy customers to stdout' } });
    const text = JSON.stringify(r);
    for (const secret of ['ada@example.com', '123-45-6789', 'bob@example.com']) expect(text).not.toContain(secret);
  } finally {
    await client.close();
  }
});
