// The MCP tool endpoint on the gateway (spec §4, docs/mcp.md): authentication of every request before anything else, POST /mcp, and the deprecated legacy endpoints.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Services } from '../../runtime/services.js';
import type { GovernanceRuntime } from '../../runtime/governance.js';
import { postgresRuntimeFor } from '../../connectors/postgres-runtime.js';
import { GatehouseError, isGatehouseError } from '../../errors/registry.js';
import type { AgentIdentity } from '../../identity/index.js';
import { auditFailure } from '../../pipeline/run.js';
import type { McpDeps, ToolCaller } from './context.js';
import { buildToolset } from './tools.js';
import { handleStreamableRequest } from './streamable.js';
import { registerLegacyRoutes } from './legacy.js';
import { MAX_JSON_DEPTH, jsonDeeperThan } from '../../util/json-depth.js';
import { challenge, jwtAgentsEnabled, registerProtectedResourceMetadata } from './protected-resource.js';

export { buildToolset, TOOL_NAMES, type Toolset } from './tools.js';
export type { McpDeps, ToolCaller } from './context.js';

export async function registerMcpRoutes(app: FastifyInstance, services: Services, governance: GovernanceRuntime): Promise<void> {
  const { config } = services;
  const deps: McpDeps = {
    pipeline: governance.deps,
    auditor: services.auditor,
    db: services.db,
    postgres: async () => (await postgresRuntimeFor(services)).executor,
    log: services.log.child({ component: 'mcp' }),
    legacyPrefix: config.gateway.mcp.legacy_tool_prefix,
  };
  const toolset = buildToolset(config);
  const identities = new WeakMap<FastifyRequest, AgentIdentity>();
  const callerOf = (req: FastifyRequest): ToolCaller => {
    const identity = identities.get(req);
    if (!identity) throw new GatehouseError('unauthenticated');
    return { identity, requestId: req.id, clientIp: req.ip, span: req.span };
  };

  registerProtectedResourceMetadata(app, config);
  const announceOAuth = jwtAgentsEnabled(config);

  void app.register(async (scope) => {
    // Every request proves its key before its body is even read: a refused caller reaches no tool, no parser, no MCP handshake.
    scope.addHook('onRequest', async (req, reply) => {
      try {
        identities.set(req, await governance.deps.authenticate(req.headers.authorization));
      } catch (err) {
        if (isGatehouseError(err) && err.code === 'unauthenticated') {
          // A refused credential is recorded as on the proxy: one entry, no identity.
          const audit = services.auditor.begin({ channel: 'mcp', request_id: req.id, client_ip: req.ip, method: req.method, path: req.url.split('?')[0]!.slice(0, 64), action: 'mcp.authenticate' });
          await audit.end(auditFailure(err));
          // An MCP client that speaks the protocol's authorization learns from here where to sign in (RFC 9728 §5.1).
          if (announceOAuth) challenge(reply, req);
        }
        throw err;
      }
    });

    // Bodies nested deeper than the bound are refused before JSON.parse, and so before the MCP SDK, zod or any other
    // recursive walk could exhaust the stack (docs/mcp.md "Limits").
    const parseJson = app.getDefaultJsonParser('error', 'error');
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
      if (jsonDeeperThan(body as string, MAX_JSON_DEPTH)) return done(new GatehouseError('invalid_request', `The JSON body is nested deeper than ${MAX_JSON_DEPTH} levels.`), undefined);
      parseJson(req, body as string, done);
    });

    scope.post('/mcp', (req, reply) => handleStreamableRequest(deps, toolset, callerOf(req), req, reply));
    // Stateless: no server-initiated stream to GET and no session to DELETE (the transport specification's 405).
    for (const method of ['GET', 'DELETE'] as const) {
      scope.route({
        method,
        url: '/mcp',
        exposeHeadRoute: false,
        handler: async (req, reply) => reply.code(405).header('allow', 'POST').send({ error: 'invalid_request', message: 'Use POST: this endpoint is stateless and offers no stream or session.', request_id: req.id }),
      });
    }
    registerLegacyRoutes(scope, { deps, toolset, callerOf });
  });
}
