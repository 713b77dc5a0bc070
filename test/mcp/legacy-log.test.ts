// The legacy endpoints log one deprecation line per use, naming the identity, and hand the unprefixed tool name to the shared dispatcher.
import Fastify from 'fastify';
import { expect, test } from 'vitest';
import type { McpDeps, ToolCaller } from '../../src/gateway/mcp/context.js';
import type { Toolset } from '../../src/gateway/mcp/tools.js';
import { registerLegacyRoutes } from '../../src/gateway/mcp/legacy.js';
import type { AgentIdentity } from '../../src/identity/index.js';

test('one warning line per legacy use with the identity id; calls reach the dispatcher without the prefix', async () => {
  const lines: Array<{ obj: Record<string, unknown>; msg: string | undefined }> = [];
  const log = { warn: (obj: Record<string, unknown>, msg?: string) => lines.push({ obj, msg }), error: () => undefined, info: () => undefined };
  const calls: string[] = [];
  const toolset: Toolset = {
    list: (prefix) => [{ name: `${prefix}_list_sources`, inputSchema: { type: 'object' } }],
    call: async (_deps, _caller, name) => {
      calls.push(name);
      return { content: [{ type: 'text', text: 'ok' }] };
    },
  };
  const identity = { id: 77, name: 'legacy-agent' } as AgentIdentity;
  const app = Fastify();
  registerLegacyRoutes(app, {
    deps: { log, legacyPrefix: 'acme' } as unknown as McpDeps,
    toolset,
    callerOf: (req): ToolCaller => ({ identity, requestId: req.id, clientIp: null }),
  });
  try {
    const list = await app.inject({ method: 'POST', url: '/mcp/tools/list', payload: {} });
    expect(list.json()).toEqual({ tools: [{ name: 'acme_list_sources', inputSchema: { type: 'object' } }] });
    expect(list.headers.deprecation).toBe('true');
    const call = await app.inject({ method: 'POST', url: '/mcp/tools/call', payload: { name: 'acme_list_sources', arguments: {} } });
    expect(call.statusCode).toBe(200);
    const wrong = await app.inject({ method: 'POST', url: '/mcp/tools/call', payload: { name: 'gatehouse_list_sources' } });
    expect(wrong.statusCode).toBe(400);
    expect(calls).toEqual(['list_sources']);
    expect(lines.map((l) => [l.obj.identity_id, l.obj.endpoint])).toEqual([
      [77, 'tools/list'],
      [77, 'tools/call'],
      [77, 'tools/call'],
    ]);
    expect(lines.every((l) => l.msg?.includes('deprecated'))).toBe(true);
  } finally {
    await app.close();
  }
});
