// The per-request audit emitter: the request owns one AuditContext and it emits exactly one canonical entry (spec §6.4).
import { performance } from 'node:perf_hooks';
import { AUDIT_ARRAY_MAX, boundedAuditText, isoTimestamp, newAuditId, type AuditChannel, type AuditEntry, type AuditFields } from './entry.js';
import { AUDIT_ACCEPTED, type AuditPort } from './port.js';
import { markSpanError, SpanKind, type Context, type Span, type Tracing } from '../observability/tracing.js';

/** Counts each emitted entry (docs/observability.md: request metrics are read off the canonical entry). */
export interface AuditObserver {
  observeEntry(entry: AuditEntry): void;
}

/**
 * The span names of a request's own span, by front door (docs/observability.md "Traces"). A proxied HTTP request has
 * none of its own: its server span is the request (docs/decisions/0030-telemetry-overhead.md).
 */
const REQUEST_SPAN_NAMES: Record<Exclude<AuditChannel, 'http'>, string> = { pgwire: 'gatehouse.pgwire.statement', mcp: 'gatehouse.mcp.tool_call', admin: 'gatehouse.admin.action' };

/** pino-compatible subset. */
export interface AuditLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export type AuditBegin = { channel: AuditChannel; request_id: string } & Partial<AuditFields>;

/** The status recorded when the client went away before an answer (nginx's convention). */
export const CLIENT_CLOSED_STATUS = 499;

/**
 * A new entry with every field at its default, as one literal: every entry then has the same shape, and building
 * it is cheaper than spreading a defaults object (both were visible in the proxy's per-request profile).
 */
function newEntry(id: string, ts: string, init: AuditBegin): AuditEntry {
  const entry: AuditEntry = {
    id, ts, request_id: init.request_id, channel: init.channel,
    identity_id: null, admin_user_id: null, source_id: null, operation: null, method: null, path: null,
    sql_fingerprint: null, sql_normalized: null, tables: [], decision: 'error', reasons: [], policy_ids: [],
    approval_id: null, status: 0, upstream_status: null, cache: null, redactions: 0, bytes_in: 0, bytes_out: 0,
    duration_ms: 0, client_ip: null, action: null, target: null, changes: null, error_code: null,
  };
  return Object.assign(entry, init);
}

/** Creates request contexts bound to one audit port. Constructed once per process, injected. */
export class Auditor {
  readonly #port: AuditPort;
  readonly #logger: AuditLogger;
  readonly #now: () => number;
  readonly #observer: AuditObserver | null;
  readonly #tracing: Tracing | null;

  constructor(opts: { port: AuditPort; logger: AuditLogger; now?: () => number; observer?: AuditObserver | null; tracing?: Tracing | null }) {
    this.#port = opts.port;
    this.#logger = opts.logger;
    this.#now = opts.now ?? Date.now;
    this.#observer = opts.observer ?? null;
    this.#tracing = opts.tracing ?? null;
  }

  /**
   * Starts the entry of one request: id and ts are fixed now, so retries and replays keep them. With tracing on, an
   * MCP tool call or admin action gets its own span beneath `parent` (the HTTP server span); a proxied request's
   * span is its server span itself; a wire statement, which has no HTTP request, starts a trace of its own.
   */
  begin(init: AuditBegin, parent?: Span): AuditContext {
    const tracing = this.#tracing;
    let span: Span | undefined;
    let ownSpan = false;
    // An unsampled trace (observability.trace_sample_ratio) gets no spans of ours at all: its requests cost as without tracing.
    if (tracing !== null && (parent === undefined ? init.channel === 'pgwire' && tracing.sampleNewTrace() : parent.isRecording())) {
      if (init.channel === 'http') span = parent;
      else {
        span = tracing.startChild(REQUEST_SPAN_NAMES[init.channel], parent);
        ownSpan = true;
        if (!span.isRecording()) span = undefined;
      }
    }
    return new AuditContext(this.#port, this.#logger, init, this.#now(), { observer: this.#observer, tracing, span, ownSpan, parent });
  }
}

/**
 * Collects the fields of one request's entry and emits it once. The id and ts are set at creation;
 * `duration_ms` is measured from creation unless set explicitly.
 */
export class AuditContext {
  readonly id: string;
  readonly ts: string;
  readonly #port: AuditPort;
  readonly #logger: AuditLogger;
  readonly #startedAt = performance.now();
  /** The entry being collected; once emitted it belongs to the audit port and is never changed again. */
  readonly #fields: AuditEntry;
  #durationSet = false;
  #ended: Promise<void> | null = null;
  readonly #observer: AuditObserver | null;
  readonly #tracing: Tracing | null;
  readonly #parentSpan: Span | undefined;
  /** This request's span, present only while tracing is on: the pipeline hangs its stage spans beneath it. */
  readonly span: Span | undefined;
  /** Whether `span` is this context's to end (false: it is the HTTP server span, which its handler ends on the response's close). */
  readonly #ownSpan: boolean;
  /** The parent context of this request's stage spans, made with the first of them. */
  #spanContext: Context | undefined;

  constructor(port: AuditPort, logger: AuditLogger, init: AuditBegin, nowMs: number, trace: { observer?: AuditObserver | null; tracing?: Tracing | null; span?: Span | undefined; ownSpan?: boolean; parent?: Span | undefined } = {}) {
    this.#port = port;
    this.#logger = logger;
    this.#observer = trace.observer ?? null;
    this.#tracing = trace.tracing ?? null;
    this.span = trace.span;
    this.#ownSpan = trace.ownSpan ?? trace.span !== undefined;
    this.#parentSpan = trace.parent;
    this.id = newAuditId(nowMs);
    this.ts = isoTimestamp(nowMs);
    this.#fields = newEntry(this.id, this.ts, init);
    if (init.duration_ms !== undefined) this.#durationSet = true;
  }

  /**
   * A child span of this request's span for one stage, begun at `began` (a `performance.now()` reading; end it with
   * one too); undefined when tracing is off.
   */
  startStageSpan(name: string, began: number): Span | undefined {
    if (this.span === undefined) return undefined;
    this.#spanContext ??= this.#tracing!.contextOf(this.span);
    return this.#tracing!.startIn(name, this.#spanContext, undefined, SpanKind.INTERNAL, began);
  }

  get ended(): boolean {
    return this.#ended !== null;
  }

  get request_id(): string {
    return this.#fields.request_id;
  }

  /** Merges fields as the request progresses; arrays replace, they do not append. */
  set(fields: Partial<AuditFields>): this {
    if (this.#ended) {
      this.#logger.error({ audit_id: this.id, request_id: this.#fields.request_id, fields: Object.keys(fields) }, 'audit entry changed after it was emitted (bug)');
      return this;
    }
    Object.assign(this.#fields, fields);
    if (fields.duration_ms !== undefined) this.#durationSet = true;
    return this;
  }

  /** Appends a reason, up to what an entry holds (the first reasons are the ones that decided). */
  addReason(reason: string): this {
    if (this.#fields.reasons.length >= AUDIT_ARRAY_MAX) return this;
    return this.set({ reasons: [...this.#fields.reasons, boundedAuditText(reason)!] });
  }

  /** Throws GatehouseError('audit_unavailable') when this request's entry could not be recorded now. */
  admit(): void {
    this.#port.admit();
  }

  /**
   * Before a write reaches its upstream: the strict refusal of `admit()`, then the entry as known now recorded durably
   * as the write's intent (docs/audit.md "Write intents"). If the process dies before `end()`, the next start records
   * it with outcome unknown; `end()` completes it. Rejects with GatehouseError('audit_unavailable') when the intent
   * cannot be recorded and the mode forbids going on: the write must then not be sent.
   */
  async intend(fields: Partial<AuditFields> = {}): Promise<void> {
    this.admit();
    if (this.#ended) return;
    this.set(fields);
    await this.#port.recordIntent(this.snapshot());
  }

  /** The entry as it would be emitted now (for logs and tests). */
  snapshot(): AuditEntry {
    return { ...this.#fields, id: this.id, ts: this.ts, duration_ms: this.#duration() };
  }

  #duration(): number {
    return this.#durationSet ? this.#fields.duration_ms : Math.round((performance.now() - this.#startedAt) * 1000) / 1000;
  }

  /**
   * Emits the entry; resolves when the audit durability mode is satisfied. A second call is a bug
   * in the caller: it is logged and returns the first call's promise, so nothing is emitted twice.
   */
  end(final: Partial<AuditFields> = {}): Promise<void> {
    if (this.#ended) {
      this.#logger.error({ audit_id: this.id, request_id: this.#fields.request_id }, 'audit entry ended twice (bug); the second end is ignored');
      return this.#ended;
    }
    Object.assign(this.#fields, final);
    if (final.duration_ms !== undefined) this.#durationSet = true;
    // The collected entry itself is emitted (no copy): nothing can change it afterwards, set() refuses once ended.
    const entry = this.#fields;
    entry.duration_ms = this.#duration();
    entry.id = this.id;
    entry.ts = this.ts;
    try {
      this.#ended = this.#port.write(entry);
    } catch (err) {
      // The writer refuses an invalid entry synchronously (a bug in what built it). Callers chain on the promise, so
      // the refusal travels there: a throw here would escape their error handling (the wire relay's, for one).
      this.#logger.error({ audit_id: this.id, request_id: entry.request_id, err: String(err) }, 'audit entry refused by the writer (bug)');
      this.#ended = Promise.reject(err as Error);
    }
    this.#observer?.observeEntry(entry);
    if (this.span !== undefined) this.#endSpans(entry, this.#ended);
    return this.#ended;
  }

  /**
   * Request attributes (ids and outcome, never keys, SQL text or bodies) on the request's span and its HTTP parent. A
   * write that waits (strict durability, a spooled entry) gets its `gatehouse.audit.write` span, and a span of this
   * context's own ends when the write settles; an entry the port accepted at once adds no span.
   */
  #endSpans(entry: AuditEntry, written: Promise<void>): void {
    const span = this.span!;
    const attributes = {
      'gatehouse.channel': entry.channel,
      'gatehouse.decision': entry.decision,
      'gatehouse.status': entry.status,
      ...(entry.identity_id !== null ? { 'gatehouse.identity_id': entry.identity_id } : {}),
      ...(entry.source_id !== null ? { 'gatehouse.source_id': entry.source_id } : {}),
      ...(entry.operation !== null ? { 'gatehouse.operation': entry.operation } : {}),
      ...(entry.action !== null ? { 'gatehouse.action': entry.action } : {}),
      ...(entry.cache !== null ? { 'gatehouse.cache': entry.cache } : {}),
      ...(entry.approval_id !== null ? { 'gatehouse.approval_id': entry.approval_id } : {}),
    };
    span.setAttributes(attributes);
    if (entry.error_code !== null) markSpanError(span, entry.error_code);
    if (this.#parentSpan !== undefined && this.#parentSpan !== span) {
      if (entry.identity_id !== null) this.#parentSpan.setAttribute('gatehouse.identity_id', entry.identity_id);
      if (entry.source_id !== null) this.#parentSpan.setAttribute('gatehouse.source_id', entry.source_id);
    }
    if (written === AUDIT_ACCEPTED) {
      if (this.#ownSpan) span.end();
      return;
    }
    const write = this.#tracing!.startIn('gatehouse.audit.write', this.#spanContext ?? this.#tracing!.contextOf(span));
    const done = (failed: boolean) => {
      if (failed) markSpanError(write, 'audit_unavailable');
      write.end();
      if (this.#ownSpan) span.end();
    };
    written.then(() => done(false), () => done(true));
  }

  /**
   * For a client that disconnected before the answer: status 499 unless a status was already
   * decided, decision `error` unless one was made. A no-op (without a bug log) if already ended.
   */
  endOnAbort(final: Partial<AuditFields> = {}): Promise<void> {
    if (this.#ended) return this.#ended;
    const status = this.#fields.status === 0 ? CLIENT_CLOSED_STATUS : this.#fields.status;
    return this.end({ status, error_code: this.#fields.error_code ?? 'client_closed', ...final });
  }
}
