// The HTTP proxy front door (spec §4 "HTTP proxy"): translates a request into the governed pipeline and its outcome back into HTTP; it decides nothing itself.
import { SOURCE_ID_PATTERN } from '../../registry/sources.js';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatehouseError, isGatehouseError } from '../../errors/registry.js';
import type { Auditor } from '../../audit/context.js';
import type { HttpHeaders } from '../../pipeline/context.js';
import { asGatehouseError, auditDecision, auditFailure } from '../../pipeline/run.js';
import { runHttpPipeline, single, type HttpExecution, type HttpOutcome, type HttpPipelineDeps } from '../../pipeline/http.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { clientOf, endServerSpan, startServerSpan, type FrontDoor } from '../../http/server.js';
import type { Span, Tracing } from '../../observability/tracing.js';
import { uuidv7 } from '../../util/uuidv7.js';

const PROXY_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

export interface ProxyRouteDeps {
  pipeline: HttpPipelineDeps;
  auditor: Auditor;
  requestBodyBytes: number;
}

type LogArgs = Parameters<FastifyBaseLogger['info']>;
type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];

/**
 * The request logger Fastify hands each request, made on first use. A pino child with its bindings run through
 * the redaction paths was the largest allocation per proxied request (≈6 KB), although the proxy only logs failures.
 */
export class LazyRequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildOptions,
  ) {}

  #logger(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.#logger().level;
  }

  set level(level: string) {
    this.#logger().level = level;
  }

  fatal(...args: LogArgs): void {
    this.#logger().fatal(...args);
  }

  error(...args: LogArgs): void {
    this.#logger().error(...args);
  }

  warn(...args: LogArgs): void {
    this.#logger().warn(...args);
  }

  info(...args: LogArgs): void {
    this.#logger().info(...args);
  }

  debug(...args: LogArgs): void {
    this.#logger().debug(...args);
  }

  trace(...args: LogArgs): void {
    this.#logger().trace(...args);
  }

  silent(...args: LogArgs): void {
    this.#logger().silent(...args);
  }

  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options);
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';

function errorBody(err: GatehouseError, requestId: string) {
  return { error: err.code, message: err.message, request_id: requestId };
}

/** What the client gets when a request's entry cannot be recorded: nothing of the answer leaves (strict durability, docs/audit.md). */
function auditUnavailable(auditErr: unknown): GatehouseError {
  return isGatehouseError(auditErr) ? auditErr : new GatehouseError('audit_unavailable');
}

/** A proxy request refused before the pipeline (body unreadable, URL undecodable): its one audit entry, then the error, or 503 when the entry cannot be recorded. */
export async function refuseProxyRequest(auditor: Auditor, req: FastifyRequest, reply: FastifyReply, error: GatehouseError): Promise<FastifyReply> {
  const audit = auditor.begin({ channel: 'http', request_id: req.id, client_ip: req.ip, method: req.method, source_id: sourceIdOf(req) }, req.span);
  try {
    await audit.end({ ...auditFailure(error), bytes_out: 0 });
  } catch (auditErr) {
    const unavailable = auditUnavailable(auditErr);
    return reply.code(unavailable.spec.http).send(errorBody(unavailable, req.id));
  }
  return reply.code(error.spec.http).type(JSON_TYPE).send(errorBody(error, req.id));
}

function bodyError(err: unknown): GatehouseError {
  if (isGatehouseError(err)) return err;
  const e = err as { statusCode?: number; code?: string };
  if (e.statusCode === 413 || e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new GatehouseError('payload_too_large');
  if (e.statusCode !== undefined && e.statusCode >= 400 && e.statusCode < 500) return new GatehouseError('invalid_request');
  return new GatehouseError('internal', undefined, { cause: err });
}

function sourceIdOf(req: FastifyRequest): string | null {
  const id = (req.params as { source_id?: unknown } | undefined)?.source_id;
  return typeof id === 'string' && SOURCE_ID_PATTERN.test(id) ? id : null;
}

/** The logging a proxy request may need (failures only): made on first use, bound to the request id. */
type ProxyLog = Pick<FastifyBaseLogger, 'error' | 'warn'>;

/** One proxy request as either handler received it (the front door, or the Fastify route for the targets it leaves). */
export interface ProxyCall {
  readonly requestId: string;
  readonly clientIp: string | null;
  readonly method: string;
  /** The source id as routed; checked against SOURCE_ID_PATTERN here. */
  readonly sourceId: string;
  /** The request target exactly as received. */
  readonly rawTarget: string;
  /** As node:http parsed them (lower-cased names); the pipeline reads only the names it needs. */
  readonly headers: HttpHeaders;
  /** The request body, null when there is none or it is empty. */
  readonly body: Buffer | null;
  /** The HTTP server span while tracing records this request. */
  readonly span: Span | undefined;
  /** The request's connection; only a destroyed socket means the client went away (the request stream is done once read). */
  readonly socket: { readonly destroyed: boolean } | null;
  log(): ProxyLog;
}

/** What the client gets: the status, the headers besides `x-request-id`, and the body (JSON answers as text with their content type). */
export interface ProxyAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Buffer | string;
}

function jsonAnswer(status: number, body: object, headers: Record<string, string> = {}): ProxyAnswer {
  headers['content-type'] = JSON_TYPE;
  return { status, headers, body: JSON.stringify(body) };
}

/**
 * Runs one proxy request through the governed pipeline, ends its audit entry with what is answered (strict
 * durability: nothing of the answer leaves before that), and renders the answer. Both HTTP handlers of the proxy
 * call this and only write what it returns, so status, error body and audit mapping stand here once. Never throws.
 */
export async function answerProxyRequest(deps: ProxyRouteDeps, call: ProxyCall): Promise<ProxyAnswer> {
  const sourceOk = SOURCE_ID_PATTERN.test(call.sourceId);
  const audit = deps.auditor.begin({ channel: 'http', request_id: call.requestId, client_ip: call.clientIp, method: call.method, source_id: sourceOk ? call.sourceId : null, bytes_in: call.body?.length ?? 0 }, call.span);
  const exec: HttpExecution = {
    channel: 'http',
    requestId: call.requestId,
    clientIp: call.clientIp,
    sourceId: call.sourceId,
    credential: { kind: 'bearer', authorization: single(call.headers.authorization) },
    action: { kind: 'http', method: call.method, rawTarget: call.rawTarget, headers: call.headers, body: call.body },
    audit,
  };

  let outcome: HttpOutcome | undefined;
  let failure: unknown;
  try {
    if (!sourceOk) throw new GatehouseError('unknown_source');
    outcome = await runHttpPipeline(exec, deps.pipeline);
  } catch (err) {
    failure = err;
  }

  const error = failure === undefined ? undefined : asGatehouseError(failure);
  if (error?.code === 'internal') call.log().error({ err: failure }, 'proxy request failed');
  else if (error?.code === 'upstream_failed') call.log().warn({ err: failure, source_id: exec.sourceId }, 'upstream request failed');

  const status = error ? error.spec.http : outcome!.kind === 'queued' ? 202 : outcome!.kind === 'respond' ? outcome!.response.status : 500;
  const response = outcome?.kind === 'respond' ? outcome.response : undefined;
  const clientGone = call.socket?.destroyed === true;
  const finalFields = {
    status: clientGone ? 499 : status,
    decision: auditDecision({ outcome, error }),
    error_code: error?.code ?? null,
    cache: exec.cacheOutcome ?? null,
    redactions: exec.redactions ?? 0,
    bytes_out: error === undefined && response !== undefined ? response.body.length : 0,
  };
  try {
    // Strict durability: the answer leaves only once its audit entry is durable (docs/audit.md).
    if (clientGone) await audit.endOnAbort(finalFields);
    else await audit.end(finalFields);
  } catch (auditErr) {
    const unavailable = auditUnavailable(auditErr);
    return jsonAnswer(unavailable.spec.http, errorBody(unavailable, call.requestId));
  }

  if (error) return jsonAnswer(status, errorBody(error, call.requestId), error.retryAfterSeconds !== undefined ? { 'retry-after': String(error.retryAfterSeconds) } : {});
  if (response === undefined) {
    const approval = (outcome as { approval: { id: number; state: string } }).approval;
    return jsonAnswer(status, { error: 'approval_required', message: 'The request is waiting for approval.', approval_id: approval.id, approval_state: approval.state, request_id: call.requestId });
  }
  // Built for this request by the redaction or cache stage: the answer's own to extend.
  const headers = response.headers;
  if (exec.cacheOutcome) headers['x-gatehouse-cache'] = exec.cacheOutcome;
  return { status, headers, body: response.body };
}

const PROXY_PREFIX_LENGTH = '/proxy/'.length;
const SLASH = 0x2f;
const QUESTION = 0x3f;

/**
 * The source id of a `/proxy/<id>[/…][?…]` target when it is spelled as a route would read it without decoding
 * (SOURCE_ID_PATTERN, so no escapes); null for anything else, which the Fastify route keeps answering.
 */
function routedSourceId(url: string): string | null {
  let end = PROXY_PREFIX_LENGTH;
  for (; end < url.length; end++) {
    const c = url.charCodeAt(end);
    if (c === SLASH || c === QUESTION) break;
  }
  const id = url.slice(PROXY_PREFIX_LENGTH, end);
  return SOURCE_ID_PATTERN.test(id) ? id : null;
}

/** Whether a request announces a body (the front door leaves those to the Fastify route and its body limit). */
function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export interface ProxyFrontDoorDeps extends ProxyRouteDeps {
  readonly log: FastifyBaseLogger;
  readonly trustProxy: boolean;
  readonly tracing: Tracing | null;
}

/**
 * The proxy's own node:http handler ahead of Fastify on the gateway listener (docs/decisions/0028-proxy-hot-path.md):
 * it takes the proxy's routes (`/proxy/:source_id` and `/proxy/:source_id/*`, methods GET, POST, PUT, PATCH, DELETE)
 * for requests without a body whose source id needs no decoding, which is every ordinary agent read, and skips the
 * framework's request and reply objects, router, hooks and serializer. Bodies, and targets only the router can read,
 * stay with the Fastify route, which renders through the same answerProxyRequest.
 */
export function proxyFrontDoor(deps: ProxyFrontDoorDeps): FrontDoor {
  return (req, res) => {
    const url = req.url ?? '';
    if (!url.startsWith('/proxy/') || !PROXY_METHOD_SET.has(req.method ?? '') || announcesBody(req)) return false;
    const sourceId = routedSourceId(url);
    if (sourceId === null) return false;
    void serveFrontDoor(deps, req, res, sourceId, url);
    return true;
  };
}

async function serveFrontDoor(deps: ProxyFrontDoorDeps, req: IncomingMessage, res: ServerResponse, sourceId: string, url: string): Promise<void> {
  const requestId = uuidv7();
  const method = req.method!;
  const client = clientOf(req, deps.trustProxy);
  const span =
    deps.tracing === null
      ? undefined
      : startServerSpan(deps.tracing, 'gateway', { method, route: url.length > PROXY_PREFIX_LENGTH + sourceId.length ? PROXY_ROUTES[1] : PROXY_ROUTES[0], headers: req.headers, requestId, protocol: client.protocol });
  if (span !== undefined) res.once('close', () => endServerSpan(span, res.writableFinished ? res.statusCode : null));
  let log: ProxyLog | undefined;
  let answer: ProxyAnswer;
  try {
    answer = await answerProxyRequest(deps, {
      requestId,
      clientIp: client.ip,
      method,
      sourceId,
      rawTarget: url,
      headers: req.headers,
      body: null,
      span,
      socket: req.socket ?? null,
      log: () => (log ??= deps.log.child({ reqId: requestId })),
    });
  } catch (err) {
    // answerProxyRequest answers every failure itself; this is the last guard of the handler.
    (log ?? deps.log).error({ err, reqId: requestId }, 'unhandled gateway error');
    answer = jsonAnswer(500, errorBody(new GatehouseError('internal'), requestId));
  }
  writeAnswer(res, answer, requestId);
}

/** Writes an answer as Fastify's reply.send would: octet-stream when untyped, no body or length on 204 and 1xx. */
function writeAnswer(res: ServerResponse, answer: ProxyAnswer, requestId: string): void {
  if (res.destroyed) return;
  const headers = answer.headers;
  headers['x-request-id'] = requestId;
  const status = answer.status;
  if (status === 204 || status < 200) {
    delete headers['content-type'];
    delete headers['content-length'];
    res.writeHead(status, headers);
    res.end();
    return;
  }
  headers['content-type'] ??= 'application/octet-stream';
  headers['content-length'] = String(Buffer.byteLength(answer.body));
  res.writeHead(status, headers);
  res.end(answer.body);
}

const PROXY_METHOD_SET: ReadonlySet<string> = new Set(PROXY_METHODS);
const PROXY_ROUTES = ['/proxy/:source_id', '/proxy/:source_id/*'] as const;

export function registerProxyRoutes(app: FastifyInstance, deps: ProxyRouteDeps): void {
  void app.register(async (scope) => {
    // Bodies are opaque bytes here: the proxy forwards them, it never parses them for the upstream.
    scope.setChildLoggerFactory((logger, bindings, options) => new LazyRequestLogger(logger, bindings, options));
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.requestBodyBytes }, (_req, body, done) => done(null, body));
    // A body refused while it is read (413, malformed framing) never reaches the handler; it still gets its one audit entry.
    scope.setErrorHandler((err, req, reply) => refuseProxyRequest(deps.auditor, req, reply, bodyError(err)));

    const handler = async (req: FastifyRequest<{ Params: { source_id: string } }>, reply: FastifyReply) => {
      const body = Buffer.isBuffer(req.body) && req.body.length > 0 ? req.body : null;
      const answer = await answerProxyRequest(deps, {
        requestId: req.id,
        clientIp: req.ip,
        method: req.method,
        sourceId: req.params.source_id,
        rawTarget: req.raw.url ?? req.url,
        headers: req.headers,
        body,
        span: req.span,
        socket: req.raw.socket ?? null,
        log: () => req.log,
      });
      return reply.code(answer.status).headers(answer.headers).send(answer.body);
    };

    for (const url of PROXY_ROUTES) {
      scope.route({ method: [...PROXY_METHODS], url, handler, exposeHeadRoute: false });
    }
  });
}
