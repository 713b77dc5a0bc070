// The fastify instance factory shared by the gateway and admin listeners: request ids, body and header bounds, logger, no framework banners.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { Logger } from '../observability/logger.js';
import { uuidv7 } from '../util/uuidv7.js';
import { SpanStatusCode, type Span, type Tracing } from '../observability/tracing.js';
import type { Server as TlsServer } from 'node:tls';
import { httpsServerOptions, readListenerTls, reloadListenerTls, type ListenerTls, type ListenerTlsConfig } from './tls.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span while tracing is on (docs/observability.md "Traces"); undefined otherwise. */
    span: Span | undefined;
  }
}

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
  /** With OTLP export on: one server span per request, named by route template (never the raw URL: paths and queries may carry data). */
  tracing?: Tracing | null;
  /** The listener's name in span attributes: `gateway` or `admin`. */
  listener?: string;
  /** The listener's TLS section (`gateway.tls`, `admin.tls`); plain HTTP when it names no certificate. */
  tls?: { key: string; config: ListenerTlsConfig };
}

/** Reloads of the TLS listeners built here, by app (SIGHUP; docs/tls.md). */
const tlsReloaders = new WeakMap<FastifyInstance, () => void>();

/**
 * Re-reads the app's certificate, key and client CA and swaps them in for new handshakes (open connections keep
 * theirs). False when the app serves plain HTTP; throws TlsConfigError, keeping the old context, when a file cannot be used.
 */
export function reloadHttpTls(app: FastifyInstance): boolean {
  const reload = tlsReloaders.get(app);
  if (reload === undefined) return false;
  reload();
  return true;
}

export function createHttpServer(opts: HttpServerOptions): FastifyInstance {
  let tls: ListenerTls | null = opts.tls ? readListenerTls(opts.tls.key, opts.tls.config) : null;
  // Fastify types an https app apart; both are served and closed the same way here.
  const app = Fastify({
    ...(tls ? { https: httpsServerOptions(tls) } : {}),
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
  }) as unknown as FastifyInstance;
  if (tls && opts.tls) {
    const section = opts.tls;
    tlsReloaders.set(app, () => {
      tls = reloadListenerTls(app.server as unknown as TlsServer, tls!, section.config);
    });
  }
  if (opts.maxConnections !== undefined) app.server.maxConnections = opts.maxConnections;
  // Callback style: an async hook costs a promise per response on every listener.
  app.addHook('onSend', (req, reply, payload, done) => {
    reply.header('x-request-id', req.id);
    done(null, payload);
  });
  if (opts.tracing) traceRequests(app, opts.tracing, opts.listener ?? 'http');
  return app;
}

function traceRequests(app: FastifyInstance, tracing: Tracing, listener: string): void {
  app.decorateRequest('span', undefined);
  app.addHook('onRequest', (req, _reply, done) => {
    // An unsampled new trace is decided before anything is built: the request then costs as without tracing.
    if (req.headers.traceparent === undefined && !tracing.sampleNewTrace()) return done();
    const route = req.routeOptions.url ?? 'unmatched';
    req.span = tracing.startServer(`${req.method} ${route}`, req.headers, {
      'http.request.method': req.method,
      'http.route': route,
      'gatehouse.listener': listener,
      'gatehouse.request_id': req.id,
      'url.scheme': req.protocol,
    });
    done();
  });
  const finish = (req: FastifyRequest, status: number | null): void => {
    const span = req.span;
    if (span === undefined) return;
    req.span = undefined;
    if (status === null) span.setStatus({ code: SpanStatusCode.ERROR, message: 'client_closed' });
    else {
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  };
  app.addHook('onResponse', (req, reply, done) => {
    finish(req, reply.statusCode);
    done();
  });
  app.addHook('onRequestAbort', (req, done) => {
    finish(req, null);
    done();
  });
}
