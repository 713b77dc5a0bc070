// The HTTP proxy front door (spec §4 "HTTP proxy"): translates a request into the governed pipeline and its outcome back into HTTP; it decides nothing itself.
import { SOURCE_ID_PATTERN } from '../../registry/sources.js';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatehouseError, isGatehouseError } from '../../errors/registry.js';
import type { Auditor } from '../../audit/context.js';
import { asGatehouseError, auditDecision, auditFailure } from '../../pipeline/run.js';
import { runHttpPipeline, type HttpExecution, type HttpOutcome, type HttpPipelineDeps } from '../../pipeline/http.js';

const PROXY_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

export interface ProxyRouteDeps {
  pipeline: HttpPipelineDeps;
  auditor: Auditor;
  requestBodyBytes: number;
}

function headerMap(req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
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
  return reply.code(error.spec.http).type('application/json; charset=utf-8').send(errorBody(error, req.id));
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

export function registerProxyRoutes(app: FastifyInstance, deps: ProxyRouteDeps): void {
  void app.register(async (scope) => {
    // Bodies are opaque bytes here: the proxy forwards them, it never parses them for the upstream.
    scope.setChildLoggerFactory((logger, bindings, options) => new LazyRequestLogger(logger, bindings, options));
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.requestBodyBytes }, (_req, body, done) => done(null, body));
    // A body refused while it is read (413, malformed framing) never reaches the handler; it still gets its one audit entry.
    scope.setErrorHandler((err, req, reply) => refuseProxyRequest(deps.auditor, req, reply, bodyError(err)));

    const handler = async (req: FastifyRequest<{ Params: { source_id: string } }>, reply: FastifyReply) => {
      const audit = deps.auditor.begin({
        channel: 'http',
        request_id: req.id,
        client_ip: req.ip,
        method: req.method,
        source_id: SOURCE_ID_PATTERN.test(req.params.source_id) ? req.params.source_id : null,
        bytes_in: Buffer.isBuffer(req.body) ? req.body.length : 0,
      }, req.span);
      const exec: HttpExecution = {
        channel: 'http',
        requestId: req.id,
        clientIp: req.ip,
        sourceId: req.params.source_id,
        credential: { kind: 'bearer', authorization: req.headers.authorization },
        action: { kind: 'http', method: req.method, rawTarget: req.raw.url ?? req.url, headers: headerMap(req), body: Buffer.isBuffer(req.body) && req.body.length > 0 ? req.body : null },
        audit,
      };

      let outcome: HttpOutcome | undefined;
      let failure: unknown;
      try {
        if (!SOURCE_ID_PATTERN.test(req.params.source_id)) throw new GatehouseError('unknown_source');
        outcome = await runHttpPipeline(exec, deps.pipeline);
      } catch (err) {
        failure = err;
      }

      const error = failure === undefined ? undefined : asGatehouseError(failure);
      if (error?.code === 'internal') req.log.error({ err: failure }, 'proxy request failed');
      else if (error?.code === 'upstream_failed') req.log.warn({ err: failure, source_id: exec.sourceId }, 'upstream request failed');

      const status = error ? error.spec.http : outcome!.kind === 'queued' ? 202 : outcome!.kind === 'respond' ? outcome!.response.status : 500;
      const body: Buffer | object =
        error ? errorBody(error, req.id)
        : outcome!.kind === 'queued' ? { error: 'approval_required', message: 'The request is waiting for approval.', approval_id: outcome!.approval.id, approval_state: outcome!.approval.state, request_id: req.id }
        : (outcome as { response: { body: Buffer } }).response.body;

      const bytesOut = Buffer.isBuffer(body) ? body.length : 0;
      // The request stream is destroyed once its body has been read; only a closed socket means the client went away.
      const clientGone = req.raw.socket?.destroyed === true;
      const finalFields = {
        status: clientGone ? 499 : status,
        decision: auditDecision({ outcome, error }),
        error_code: error?.code ?? null,
        cache: exec.cacheOutcome ?? null,
        redactions: exec.redactions ?? 0,
        bytes_out: bytesOut,
      };
      try {
        // Strict durability: the answer leaves only once its audit entry is durable (docs/audit.md).
        if (clientGone) await audit.endOnAbort(finalFields);
        else await audit.end(finalFields);
      } catch (auditErr) {
        const unavailable = auditUnavailable(auditErr);
        return reply.code(unavailable.spec.http).send(errorBody(unavailable, req.id));
      }

      if (error?.retryAfterSeconds !== undefined) void reply.header('retry-after', String(error.retryAfterSeconds));
      if (outcome?.kind === 'respond') {
        void reply.headers(outcome.response.headers);
        if (exec.cacheOutcome) void reply.header('x-gatehouse-cache', exec.cacheOutcome);
        return reply.code(status).send(outcome.response.body);
      }
      return reply.code(status).type('application/json; charset=utf-8').send(body);
    };

    for (const url of ['/proxy/:source_id', '/proxy/:source_id/*']) {
      scope.route({ method: [...PROXY_METHODS], url, handler, exposeHeadRoute: false });
    }
  });
}
