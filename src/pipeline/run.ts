// Runs an ordered list of stages over one request and keeps its audit entry in step; the front door ends the entry with what it answered.
import { jwtRefusalReason } from '../identity/agent-jwt.js';
import { GatehouseError, isGatehouseError, type ErrorCode } from '../errors/registry.js';
import { StoreUnavailableError } from '../store/errors.js';
import type { AuditDecision, AuditFields } from '../audit/entry.js';
import { auditFieldsOf } from './decide.js';
import type { GovernedRequest, Stage, StageOutcome } from './context.js';
import { performance } from 'node:perf_hooks';
import { markSpanError, type Span } from '../observability/tracing.js';

function isPromise<T>(value: Promise<T> | T): value is Promise<T> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

/**
 * The stages that get a child span of the request's span when tracing is on, by stage name: those that cost time or
 * decide (docs/observability.md). Each span costs a few microseconds, so the cheap steps are left to the request span.
 */
const TRACED_STAGES: ReadonlyMap<string, string> = new Map(['policy', 'cache_lookup', 'upstream', 'redact', 'cache_store'].map((name) => [name, `gatehouse.${name}`]));

/**
 * Stages whose synchronous return without an outcome means they touched nothing: a cache stage of a request the cache
 * does not apply to (the request span's `gatehouse.cache` says `bypass`). They get a span only when they did work
 * (docs/decisions/0030-telemetry-overhead.md).
 */
const SPAN_ONLY_WHEN_WORKING: ReadonlySet<string> = new Set(['cache_lookup', 'cache_store']);

/** Runs the stages in order; the first outcome (or thrown error) ends the run. */
export async function runStages<R extends GovernedRequest, D, O = StageOutcome>(stages: readonly Stage<R, D, O>[], req: R, deps: D): Promise<O | undefined> {
  if (req.audit.span !== undefined) return runTracedStages(stages, req, deps);
  try {
    for (const stage of stages) {
      const ran = stage.run(req, deps);
      // Most stages finish synchronously on the hot path; awaiting them anyway would cost a microtask turn each.
      const outcome = isPromise(ran) ? await ran : ran;
      if (outcome) return outcome;
    }
    return undefined;
  } finally {
    req.audit.set(auditFieldsOf(req));
  }
}

/**
 * runStages with a span per traced stage; kept apart so the untraced path stays as it was. A stage's span is made
 * once the stage has returned, with the start time read before it ran, so that an idle cache stage costs no span.
 */
async function runTracedStages<R extends GovernedRequest, D, O>(stages: readonly Stage<R, D, O>[], req: R, deps: D): Promise<O | undefined> {
  try {
    for (const stage of stages) {
      const spanName = TRACED_STAGES.get(stage.name);
      if (spanName === undefined) {
        const ran = stage.run(req, deps);
        const outcome = isPromise(ran) ? await ran : ran;
        if (outcome) return outcome;
        continue;
      }
      const began = performance.now();
      let span: Span | undefined;
      try {
        const ran = stage.run(req, deps);
        if (!isPromise(ran)) {
          if (!ran && SPAN_ONLY_WHEN_WORKING.has(stage.name)) continue;
          span = req.audit.startStageSpan(spanName, began);
          if (ran) return ran;
          continue;
        }
        span = req.audit.startStageSpan(spanName, began);
        const outcome = await ran;
        if (outcome) return outcome;
      } catch (err) {
        span ??= req.audit.startStageSpan(spanName, began);
        if (span) markSpanError(span, asGatehouseError(err).code);
        throw err;
      } finally {
        span?.end(performance.now());
      }
    }
    return undefined;
  } finally {
    req.audit.set(auditFieldsOf(req));
  }
}

/** Errors that are governance refusals (recorded as `deny`) rather than failures (`error`). */
const DENIALS: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['unauthenticated', 'forbidden', 'egress_denied', 'unknown_source', 'rate_limited', 'invalid_path', 'sql_parse_error']);

/** The audit decision for how a request ended. */
export function auditDecision(result: { outcome?: { readonly kind: string } | undefined; error?: unknown }): AuditDecision {
  if (result.error !== undefined) {
    if (!isGatehouseError(result.error)) return 'error';
    if (DENIALS.has(result.error.code)) return 'deny';
    // Governance allowed the statement; the source database refused it (the wire, MCP and approvals agree on this).
    return result.error.code === 'upstream_sql_error' ? 'allow' : 'error';
  }
  if (result.outcome?.kind === 'queued') return 'require_approval';
  return 'allow';
}

/**
 * Any failure as a registry error: a lost control store is `unavailable` (503 / 57P03, spec §7 "mandatory dependency
 * unavailable"), unknown throwables are `internal` (their detail stays in logs, never with the client).
 */
export function asGatehouseError(err: unknown): GatehouseError {
  if (isGatehouseError(err)) return err;
  if (err instanceof StoreUnavailableError) return new GatehouseError('unavailable', undefined, { cause: err });
  return new GatehouseError('internal', undefined, { cause: err });
}

/**
 * Before a write (or an approved request) reaches its upstream, on every front door: the strict audit refusal, then
 * the write's intent recorded durably with what was decided (docs/audit.md "Write intents"). Reads do not call it.
 */
export function recordWriteIntent(req: GovernedRequest): Promise<void> {
  return req.audit.intend({ ...(auditFieldsOf(req) as Partial<AuditFields>), decision: 'allow' });
}

/** The audit fields of a request that ended in an error, the same on every front door: the registry's status and code, `deny` or `error`. */
export function auditFailure(err: unknown): { status: number; decision: AuditDecision; error_code: ErrorCode; reasons?: string[] } {
  const e = asGatehouseError(err);
  const failure = { status: e.spec.http, decision: auditDecision({ error: e }), error_code: e.code };
  // A refused agent JWT says why (expired, audience, signature, unmapped subject...); never the token (src/identity/agent-jwt.ts).
  const jwtReason = jwtRefusalReason(e);
  return jwtReason !== null ? { ...failure, reasons: [jwtReason] } : failure;
}
