// The gateway's HTTP listener (spec §4 Gateway): health and readiness now; the proxy, MCP and stats routes register here as they land.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { createHttpServer, installFrontDoor } from '../http/server.js';
import { registerHealthRoutes } from '../health/routes.js';
import { errorRegistry, GatehouseError, isGatehouseError } from '../errors/registry.js';
import type { Services } from '../runtime/services.js';
import { StoreUnavailableError } from '../store/errors.js';
import { buildGovernanceRuntime } from '../runtime/governance.js';
import { proxyFrontDoor, refuseProxyRequest, registerProxyRoutes } from './proxy/route.js';
import { registerStatsRoute } from './stats.js';
import { registerGatewayMetrics } from '../observability/routes.js';
import { registerAgentApprovalRoute } from '../approvals/agent-route.js';
import { registerMcpRoutes } from './mcp/index.js';

export async function buildGatewayApp(services: Services): Promise<FastifyInstance> {
  const { config } = services;
  const app = createHttpServer({
    log: services.log.child({ listener: 'gateway' }),
    bodyLimit: config.gateway.limits.request_body_bytes,
    headerBytes: config.gateway.limits.header_bytes,
    trustProxy: config.gateway.trust_proxy,
    idleTimeoutMs: config.gateway.timeouts.client_idle_ms,
    maxConnections: config.gateway.limits.max_connections,
    frameworkErrors: (_err, req, reply) => void answerUndecodableUrl(services, req, reply),
    requestLogging: false,
    tracing: services.tracing,
    listener: 'gateway',
    tls: { key: 'gateway.tls', config: config.gateway.tls },
  });
  setGatewayErrorHandler(app);
  registerHealthRoutes(app, services.readiness, { details: config.observability.readiness_details });
  const governance = await buildGovernanceRuntime(services);
  const connections = registerStatsRoute(app, services, governance);
  registerGatewayMetrics(app, services, governance, connections);
  const proxy = { pipeline: governance.deps, auditor: services.auditor, requestBodyBytes: config.gateway.limits.request_body_bytes };
  registerProxyRoutes(app, proxy);
  // Ordinary proxy requests skip the framework (docs/decisions/0028-proxy-hot-path.md); the route keeps the rest.
  installFrontDoor(app, proxyFrontDoor({ ...proxy, log: app.log, trustProxy: config.gateway.trust_proxy, tracing: services.tracing }));
  registerAgentApprovalRoute(app, { db: services.db, auditor: services.auditor, authenticate: governance.deps.authenticate });
  await registerMcpRoutes(app, services, governance);
  return app;
}

/** A target the router cannot decode (bad percent-encoding) never reaches a route: it still gets the DESIGN §6 body and, on the proxy, its one audit entry. */
async function answerUndecodableUrl(services: Services, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  void reply.header('x-request-id', req.id);
  if (req.url.startsWith('/proxy/')) return void (await refuseProxyRequest(services.auditor, req, reply, new GatehouseError('invalid_path')));
  const error = new GatehouseError('invalid_request');
  void reply.code(error.spec.http).send({ error: error.code, message: error.message, request_id: req.id });
}

/** The gateway error body of DESIGN §6, the one place where gateway errors become HTTP. */
export function setGatewayErrorHandler(app: FastifyInstance): void {
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send({ error: 'not_found', message: 'Not found.', request_id: req.id });
  });
  app.setErrorHandler((err, req, reply) => {
    if (isGatehouseError(err)) {
      if (err.retryAfterSeconds !== undefined) void reply.header('retry-after', String(err.retryAfterSeconds));
      return reply.code(err.spec.http).send({ error: err.code, message: err.message, request_id: req.id });
    }
    const status = (err as { statusCode?: number }).statusCode;
    if (status === 413 || (err as { code?: string }).code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).send({ error: 'payload_too_large', message: errorRegistry.payload_too_large.message, request_id: req.id });
    }
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.code(400).send({ error: 'invalid_request', message: errorRegistry.invalid_request.message, request_id: req.id });
    }
    if (err instanceof StoreUnavailableError) {
      return reply.code(503).send({ error: 'unavailable', message: errorRegistry.unavailable.message, request_id: req.id });
    }
    req.log.error({ err }, 'unhandled gateway error');
    return reply.code(500).send({ error: 'internal', message: errorRegistry.internal.message, request_id: req.id });
  });
}
