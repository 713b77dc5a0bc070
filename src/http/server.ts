// The fastify instance factory shared by the gateway and admin listeners: request ids, body and header bounds, logger, no framework banners.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Logger } from '../observability/logger.js';
import { uuidv7 } from '../util/uuidv7.js';
import { SpanStatusCode, type Span, type Tracing } from '../observability/tracing.js';
import type { Server as TlsServer, TLSSocket } from 'node:tls';
import type { IncomingMessage, ServerResponse } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';
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
  closeConnectionsAsTheyIdle(app);
  // Callback style: an async hook costs a promise per response on every listener.
  app.addHook('onSend', (req, reply, payload, done) => {
    reply.header('x-request-id', req.id);
    done(null, payload);
  });
  if (opts.tracing) traceRequests(app, opts.tracing, opts.listener ?? 'http');
  return app;
}

/**
 * While the app closes, every keep-alive connection is closed as soon as its answer has been written. node's
 * `server.close()` closes the connections idle at that moment only: one whose request was in flight then stays open
 * after its answer until `keepAliveTimeout` (72 s), which outlasts `shutdown_grace_ms` and turned a rolling restart's
 * drain into a forced exit (docs/deployment.md "Rolling restart"). node arms a connection's keep-alive timeout from
 * `server.keepAliveTimeout` when a response has finished (been handed to the socket whole), so shortening it at close
 * ends each such connection a millisecond after its answer, never before. (`closeIdleConnections()` polled instead
 * could destroy a socket between `res.end()` and the write's completion and lose the answer.) A request that still
 * arrives on an open connection gets Fastify's 503 with `Connection: close` (`return503OnClosing`).
 */
function closeConnectionsAsTheyIdle(app: FastifyInstance): void {
  app.addHook('preClose', (done) => {
    app.server.keepAliveTimeout = 1;
    done();
  });
}

/** The server span's attributes and name of one request, the same on every handler of a listener (docs/observability.md "Traces"). */
export interface ServerSpanRequest {
  readonly method: string;
  /** The route template, never the raw URL: paths and queries may carry data. */
  readonly route: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly requestId: string;
  readonly protocol: string;
}

/**
 * The request's server span, or undefined when its trace is not sampled: a new trace's sampling is decided before
 * anything is built, and a client's unsampled `traceparent` gives a span that records nothing.
 */
export function startServerSpan(tracing: Tracing, listener: string, r: ServerSpanRequest): Span | undefined {
  if (r.headers.traceparent === undefined && !tracing.sampleNewTrace()) return undefined;
  const span = tracing.startServer(`${r.method} ${r.route}`, r.headers, {
    'http.request.method': r.method,
    'http.route': r.route,
    'gatehouse.listener': listener,
    'gatehouse.request_id': r.requestId,
    'url.scheme': r.protocol,
  });
  return span.isRecording() ? span : undefined;
}

/** Ends a server span with the answer's status, or as `client_closed` (null) when the client went away first. */
export function endServerSpan(span: Span, status: number | null): void {
  if (status === null) span.setStatus({ code: SpanStatusCode.ERROR, message: 'client_closed' });
  else {
    span.setAttribute('http.response.status_code', status);
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

function traceRequests(app: FastifyInstance, tracing: Tracing, listener: string): void {
  app.decorateRequest('span', undefined);
  // One hook only: an unsampled request pays one random number; a sampled one ends its span on the response's
  // 'close' (as the proxy's node:http front door does) rather than through onResponse and onRequestAbort hooks that
  // every request would run (docs/decisions/0030-telemetry-overhead.md).
  app.addHook('onRequest', (req, reply, done) => {
    const span = startServerSpan(tracing, listener, { method: req.method, route: req.routeOptions.url ?? 'unmatched', headers: req.headers, requestId: req.id, protocol: req.protocol });
    if (span !== undefined) {
      req.span = span;
      const res = reply.raw;
      res.once('close', () => {
        req.span = undefined;
        endServerSpan(span, res.writableFinished ? res.statusCode : null);
      });
    }
    done();
  });
}

/** A handler that runs before the framework on a listener: true when it took the request (and will answer it). */
export type FrontDoor = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * Serves some requests ahead of Fastify on the app's own listener, so they share its socket, TLS, header bound,
 * connection limit and timeouts: `door` answers true when it took the request. Everything else goes to Fastify's
 * routes, and so does every request once the app is closing (Fastify answers those 503, `return503OnClosing`).
 * docs/decisions/0028-proxy-hot-path.md says why the proxy has one.
 */
export function installFrontDoor(app: FastifyInstance, door: FrontDoor): void {
  const server = app.server;
  const listeners = server.listeners('request');
  if (listeners.length !== 1) throw new Error(`a front door needs the framework's one request listener (found ${listeners.length})`);
  const framework = listeners[0] as (req: IncomingMessage, res: ServerResponse) => void;
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  server.removeListener('request', framework);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (closing || !door(req, res)) framework(req, res);
  });
}

/** Trusts every proxy (`trust_proxy: true`), as Fastify's `trustProxy: true` does. */
const trustAll = (): boolean => true;

/**
 * The client address and scheme of a request as Fastify reads them for the same `trustProxy` (a front door must
 * see what a route would): the left-most X-Forwarded-For address and the last X-Forwarded-Proto entry when the
 * proxy is trusted, else the socket's.
 */
export function clientOf(raw: IncomingMessage, trustProxy: boolean): { ip: string | null; protocol: string } {
  const socket = raw.socket as TLSSocket | undefined;
  const scheme = socket?.encrypted === true ? 'https' : 'http';
  if (!trustProxy) return { ip: socket?.remoteAddress ?? null, protocol: scheme };
  const all = proxyAddr.all(raw, trustAll);
  const forwardedProto = raw.headers['x-forwarded-proto'];
  const proto = typeof forwardedProto === 'string' && forwardedProto !== '' ? forwardedProto.slice(forwardedProto.lastIndexOf(',') + 1).trim() : scheme;
  return { ip: all[all.length - 1] ?? null, protocol: proto };
}
