// The fastify instance factory shared by the gateway and admin listeners: request ids, body and header bounds, logger, no framework banners.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Logger } from '../observability/logger.js';
import { uuidv7 } from '../util/uuidv7.js';

export interface HttpServerOptions {
  log: Logger;
  bodyLimit: number;
  headerBytes: number;
  trustProxy: boolean;
  idleTimeoutMs: number;
  maxConnections?: number;
  /** Answers requests the router refuses before any route runs (undecodable URL); fastify's default body echoes the URL. */
  frameworkErrors?: FastifyServerOptions['frameworkErrors'];
  /** The gateway's per-request record is its audit entry; two access-log lines per request would only double the cost. */
  requestLogging?: boolean;
}

export function createHttpServer(opts: HttpServerOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: opts.log as FastifyBaseLogger,
    ...(opts.requestLogging === false ? { logController: new LogController({ disableRequestLogging: true }) } : {}),
    bodyLimit: opts.bodyLimit,
    trustProxy: opts.trustProxy,
    // Request ids are ours: a client-chosen id would let one request impersonate another in the audit log. Time-ordered,
    // so the audit log's request_id index takes each insert at its right edge (random ids cost PostgreSQL ≈ 25% more
    // per entry, and more as the index outgrows memory; docs/decisions/0001).
    requestIdHeader: false,
    genReqId: () => uuidv7(),
    http: { maxHeaderSize: opts.headerBytes },
    keepAliveTimeout: 72_000,
    connectionTimeout: opts.idleTimeoutMs,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: false, caseSensitive: true, maxParamLength: 2048 },
    ...(opts.frameworkErrors ? { frameworkErrors: opts.frameworkErrors } : {}),
  });
  if (opts.maxConnections !== undefined) app.server.maxConnections = opts.maxConnections;
  // Callback style: an async hook costs a promise per response on every listener.
  app.addHook('onSend', (req, reply, payload, done) => {
    reply.header('x-request-id', req.id);
    done(null, payload);
  });
  return app;
}
