// POST /mcp: the Streamable HTTP transport of the MCP specification, stateless (one server and transport per HTTP request, nothing kept between requests), with the caller fixed by the endpoint's authentication.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { McpDeps, ToolCaller } from './context.js';
import type { Toolset } from './tools.js';

export const SERVER_INFO = { name: 'gatehouse', title: 'Gatehouse governed data sources', version: '1.0.0' } as const;

const INSTRUCTIONS =
  'Gatehouse governs access to data sources. Call list_sources to see what you may use, describe_source for one source, query for SQL on PostgreSQL sources and http_request for HTTP sources. A write that needs human approval answers with an approval_id; follow it with get_approval.';

/** A server bound to one caller: tool calls cannot run as anyone but the identity this request authenticated. */
export function mcpServerFor(deps: McpDeps, toolset: Toolset, caller: ToolCaller): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolset.list() }));
  server.setRequestHandler(CallToolRequestSchema, (request) => toolset.call(deps, caller, request.params.name, request.params.arguments));
  return server;
}

/**
 * Stateless mode (`sessionIdGenerator: undefined`): no Mcp-Session-Id is issued, so any gateway replica serves
 * any request and there is no session state to share. Responses are plain JSON (no SSE stream per request):
 * every tool answers once, with nothing to stream.
 */
export async function handleStreamableRequest(deps: McpDeps, toolset: Toolset, caller: ToolCaller, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const server = mcpServerFor(deps, toolset, caller);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  reply.hijack();
  reply.raw.setHeader('x-request-id', req.id);
  reply.raw.on('close', () => {
    void transport.close().catch(() => undefined);
    void server.close().catch(() => undefined);
  });
  try {
    await server.connect(transport);
    await transport.handleRequest(req.raw, reply.raw, req.body);
  } catch (err) {
    deps.log.error({ err }, 'MCP request failed');
    if (!reply.raw.headersSent) {
      reply.raw.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
      reply.raw.end(JSON.stringify({ error: 'internal', message: 'Internal error.', request_id: req.id }));
    } else reply.raw.end();
  }
}
