// Span creation for the front doors and the pipeline, over the OpenTelemetry API only (the SDK lives in telemetry.ts and is loaded only when exporting).
import { defaultTextMapGetter, trace, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

export { SpanKind, SpanStatusCode, type Context, type Span };

const propagator = new W3CTraceContextPropagator();

/** Span creation with explicit parents: no global provider and no async-context manager (the request carries its span). */
export class Tracing {
  readonly #tracer: Tracer;
  readonly #sampleRatio: number;
  readonly #perSecond: number;
  readonly #now: () => number;
  /** New traces the budget still allows: refilled at `perSecond` a second, at most one second's worth. */
  #tokens: number;
  #refilledAt: number;

  /**
   * `sampleRatio`: the share of new traces (no client `traceparent`) recorded; `perSecond`: at most this many of them
   * a second in this process (docs/observability.md "Sampling"), so tracing's cost stays bounded under load. The
   * decision is made here, before any span exists, so an unsampled request costs one random number
   * (docs/decisions/0030-telemetry-overhead.md); the SDK's sampler then only follows parents. `now` is a millisecond
   * clock (tests move it).
   */
  constructor(tracer: Tracer, sampleRatio = 1, perSecond = Number.POSITIVE_INFINITY, now: () => number = () => performance.now()) {
    this.#tracer = tracer;
    this.#sampleRatio = sampleRatio;
    this.#perSecond = perSecond;
    this.#now = now;
    this.#tokens = perSecond;
    this.#refilledAt = now();
  }

  /** Whether a new trace (one without a client parent) is recorded: picked by the ratio, then within the budget. */
  sampleNewTrace(): boolean {
    if (!(this.#sampleRatio >= 1 || (this.#sampleRatio > 0 && Math.random() < this.#sampleRatio))) return false;
    if (this.#perSecond === Number.POSITIVE_INFINITY) return true;
    const now = this.#now();
    this.#tokens = Math.min(this.#perSecond, this.#tokens + ((now - this.#refilledAt) * this.#perSecond) / 1000);
    this.#refilledAt = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /**
   * A server span for one incoming request. A W3C `traceparent` (and `tracestate`) from the client becomes its
   * parent; nothing of it is forwarded upstream (spec §4 rule 6's allowlist).
   */
  startServer(name: string, headers: Readonly<Record<string, string | string[] | undefined>>, attributes: Attributes): Span {
    const parent = headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    return this.#tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  }

  /** A span beneath `parent`, or a new trace's root when there is none. */
  startChild(name: string, parent: Span | undefined, attributes?: Attributes, kind: SpanKind = SpanKind.INTERNAL): Span {
    return this.startIn(name, parent === undefined ? ROOT_CONTEXT : trace.setSpan(ROOT_CONTEXT, parent), attributes, kind);
  }

  /**
   * The parent context of a span's children, made once per span that has several (a request's stages), rather than
   * once per child.
   */
  contextOf(span: Span): Context {
    return trace.setSpan(ROOT_CONTEXT, span);
  }

  /** A span beneath the span of `parent` (from contextOf); `startTime` (epoch milliseconds) when it began earlier. */
  startIn(name: string, parent: Context, attributes?: Attributes, kind: SpanKind = SpanKind.INTERNAL, startTime?: number): Span {
    return this.#tracer.startSpan(name, { kind, attributes, startTime }, parent);
  }
}

/** Records a failure on a span by its registry code only: error messages may carry details that do not belong in telemetry. */
export function markSpanError(span: Span, code: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  span.setAttribute('gatehouse.error_code', code);
}
