// The legacy, deprecated MCP endpoints (spec §4): POST /mcp/tools/list, POST /mcp/tools/call and GET /mcp/sse, with `<legacy_prefix>_<tool>` names, on the same tool code as POST /mcp.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { McpDeps, ToolCaller } from './context.js';
import { invalidLegacyBody, legacyHttpError, unknownTool } from './errors.js';
import type { Toolset } from './tools.js';

/** Headers that mark every legacy answer deprecated (RFC 9745 `Deprecation`, RFC 8288 successor link). */
export const DEPRECATION_HEADERS = { deprecation: 'true', link: '</mcp>; rel="successor-version"' } as const;

const KEEPALIVE_MS = 15_000;

const callBody = z.strictObject({
  name: z.string().min(1).max(128),
  arguments: z.record(z.string(), z.unknown()).optional(),
});

export interface LegacyRouteDeps {
  deps: McpDeps;
  toolset: Toolset;
  callerOf(req: FastifyRequest): ToolCaller;
}

function deprecated(d: LegacyRouteDeps, req: FastifyRequest, endpoint: string): ToolCaller {
  const caller = d.callerOf(req);
  d.deps.log.warn({ identity_id: caller.identity.id, endpoint, request_id: req.id }, 'deprecated MCP endpoint used; move to POST /mcp');
  return caller;
}

export function registerLegacyRoutes(scope: FastifyInstance, d: LegacyRouteDeps): void {
  const prefix = `${d.deps.legacyPrefix}_`;
  const sseStreams = new Set<ServerResponse>();

  scope.post('/mcp/tools/list', async (req, reply) => {
    deprecated(d, req, 'tools/list');
    void reply.headers(DEPRECATION_HEADERS);
    return { tools: d.toolset.list(d.deps.legacyPrefix) };
  });

  scope.post('/mcp/tools/call', async (req: FastifyRequest, reply: FastifyReply) => {
    const caller = deprecated(d, req, 'tools/call');
    void reply.headers(DEPRECATION_HEADERS);
    const body = callBody.safeParse(req.body ?? {});
    const { name } = body.data ?? { name: '' };
    try {
      if (!body.success) throw invalidLegacyBody(body.error);
      // Only the legacy names are offered here; the current names belong to POST /mcp.
      const tool = name.startsWith(prefix) ? name.slice(prefix.length) : null;
      if (tool === null) throw unknownTool(name);
      return await d.toolset.call(d.deps, caller, tool, body.data.arguments ?? {});
    } catch (err) {
      if (!(err instanceof McpError)) throw err;
      const http = legacyHttpError(err, req.id);
      return reply.code(http.status).send(http.body);
    }
  });

  // A minimal stand-in for the old HTTP+SSE transport: the stream names the endpoint to POST calls to (whose
  // answers come back in the POST response, not on this stream) and then only keeps the connection alive.
  scope.get('/mcp/sse', (req, reply) => {
    deprecated(d, req, 'sse');
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'x-request-id': req.id, ...DEPRECATION_HEADERS });
    res.write(`event: endpoint\ndata: /mcp/tools/call\n\n`);
    sseStreams.add(res);
    const timer = setInterval(() => res.write(': keep-alive\n\n'), KEEPALIVE_MS);
    timer.unref();
    res.on('close', () => {
      clearInterval(timer);
      sseStreams.delete(res);
    });
  });

  // Open streams would hold the listener's close forever: end them first.
  scope.addHook('preClose', (done) => {
    for (const res of sseStreams) res.end();
    sseStreams.clear();
    done();
  });
}
