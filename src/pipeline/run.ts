// Runs an ordered list of stages over one request and keeps its audit entry in step; the front door ends the entry with what it answered.
import { jwtRefusalReason } from '../identity/agent-jwt.js';
import { GatehouseError, isGatehouseError, type ErrorCode } from '../errors/registry.js';
import { StoreUnavailableError } from '../store/errors.js';
import type { AuditDecision, AuditFields } from '../audit/entry.js';
import { auditFieldsOf } from './decide.js';
import type { GovernedRequest, Stage, StageOutcome } from './context.js';
import { markSpanError } from '../observability/tracing.js';

function isPromise<T>(value: Promise<T> | T): value is Promise<T> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

/**
 * The stages that get a child span of the request's span when tracing is on: those that cost time or decide
 * (docs/observability.md). Each span costs a few microseconds, so the cheap steps are left to the request span.
 */
const TRACED_STAGES: ReadonlySet<string> = new Set(['policy', 'cache_lookup', 'upstream', 'redact', 'cache_store']);

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

/** runStages with a span per traced stage; kept apart so the untraced path stays as it was. */
async function runTracedStages<R extends GovernedRequest, D, O>(stages: readonly Stage<R, D, O>[], req: R, deps: D): Promise<O | undefined> {
  try {
    for (const stage of stages) {
      const span = TRACED_STAGES.has(stage.name) ? req.audit.startSpan(`gatehouse.${stage.name}`) : undefined;
      try {
        const outcome = await stage.run(req, deps);
        if (outcome) return outcome;
      } catch (err) {
        if (span) markSpanError(span, asGatehouseError(err).code);
        throw err;
      } finally {
        span?.end();
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
