// Governance of one wire statement: the shared decision stages, the audit entry it owns, and the ErrorResponse a refusal becomes.
import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { decisionStages, preparationStages } from '../../pipeline/decide.js';
import { asGatehouseError, auditFailure, runStages } from '../../pipeline/run.js';
import type { GovernedRequest, PipelineDeps, Stage, StageOutcome } from '../../pipeline/context.js';
import type { AuditContext, Auditor } from '../../audit/context.js';
import type { AgentIdentity } from '../../identity/index.js';
import { toAgentIdentity } from '../../identity/index.js';
import { getIdentityById } from '../../store/repos/identities.js';
import type { Db } from '../../store/repos/util.js';
import { UpstreamSqlError } from '../../connectors/postgres-exec.js';
import type { ErrorFields } from './protocol.js';

/**
 * The SQLSTATE of "approval required": an implementation-defined class (classes starting with 5–9 or I–Z are
 * reserved for implementations); "W" for wait, "A" for approval. docs/pgwire.md and docs/errors.md document it.
 */
export const APPROVAL_REQUIRED_SQLSTATE = 'WA001';

/** Every decision stage, for an execution. */
export const WIRE_EXECUTE_STAGES: readonly Stage[] = decisionStages;
/** The stages up to policy, for a Parse: parameters are not known yet, so rate limits and approvals wait for Execute. */
export const WIRE_PARSE_STAGES: readonly Stage[] = preparationStages;

/** A refusal's audit entry is ended by the decision; `recorded` settles when it is durable (true) or could not be recorded (false). */
export type StatementDecision =
  | { kind: 'allow'; req: GovernedRequest }
  | { kind: 'queued'; req: GovernedRequest; error: ErrorFields; recorded: Promise<boolean> }
  | { kind: 'refused'; req: GovernedRequest; error: ErrorFields; recorded: Promise<boolean> };

export interface WireDecider {
  readonly pipeline: PipelineDeps;
  readonly auditor: Auditor;
  readonly sessionId: string;
  readonly clientIp: string | null;
  readonly sourceId: string;
}

/** The one place a wire failure becomes ErrorResponse fields: the registry's SQLSTATE and safe message, or an upstream error's own (already sanitized). */
export function errorFieldsOf(err: unknown): ErrorFields {
  if (err instanceof UpstreamSqlError) return { sqlstate: err.sqlstate, message: err.message };
  const e = asGatehouseError(err);
  const sqlstate = typeof e.details?.sqlstate === 'string' ? e.details.sqlstate : e.spec.sqlstate;
  return { sqlstate, message: e.message, ...(e.retryAfterSeconds !== undefined ? { hint: `Retry after ${e.retryAfterSeconds} s.` } : {}) };
}

/**
 * Runs one statement through the stages. Allowed: the caller executes it and ends the audit entry with what
 * the upstream answered. Refused or queued: the entry is ended here, and the caller answers the error.
 */
export async function decideStatement(
  d: WireDecider,
  identity: AgentIdentity,
  sql: string,
  params: readonly unknown[],
  stages: readonly Stage[],
): Promise<StatementDecision> {
  const audit = d.auditor.begin({ channel: 'pgwire', request_id: `${d.sessionId}:${randomUUID().slice(0, 8)}`, client_ip: d.clientIp, source_id: d.sourceId, bytes_in: Buffer.byteLength(sql) });
  const req: GovernedRequest = {
    channel: 'pgwire',
    requestId: audit.request_id,
    clientIp: d.clientIp,
    sourceId: d.sourceId,
    credential: { kind: 'authenticated', identity },
    action: { kind: 'sql', sql, params },
    audit,
  };
  let outcome: StageOutcome | undefined;
  try {
    outcome = await runStages(stages, req, d.pipeline);
  } catch (err) {
    if (asGatehouseError(err).code === 'internal') d.pipeline.log.error({ err }, 'wire statement decision failed');
    return { kind: 'refused', req, error: errorFieldsOf(err), recorded: endRecorded(d, audit, auditFailure(err)) };
  }
  if (outcome?.kind === 'queued') {
    const a = outcome.approval;
    const recorded = endRecorded(d, audit, { status: 202, decision: 'require_approval', approval_id: a.id });
    return {
      kind: 'queued',
      req,
      recorded,
      error: {
        sqlstate: APPROVAL_REQUIRED_SQLSTATE,
        message: 'approval required',
        detail: `approval_id=${a.id}`,
        hint: `The statement was not executed; it waits for approval (state ${a.state}, expires ${a.expires_at}). An approved statement is executed by the gateway once.`,
      },
    };
  }
  return { kind: 'allow', req };
}

/**
 * Ends an entry; resolves true once it satisfies the audit durability mode (strict: committed or fsynced), false when
 * it could not be recorded (logged here). Never rejects: the relay holds the statement's answer on it (strict mode).
 */
export function endRecorded(d: Pick<WireDecider, 'pipeline'>, audit: AuditContext, fields: Parameters<AuditContext['end']>[0]): Promise<boolean> {
  return audit.end(fields).then(
    () => true,
    (err: unknown) => {
      d.pipeline.log.error({ err: { code: (err as { code?: string }).code } }, 'wire audit entry could not be recorded');
      return false;
    },
  );
}

export interface IdentityState {
  identity: AgentIdentity;
  verifier: string | null;
}

/**
 * The identity as it stands now, re-read at most once per TTL per identity (shared by the process's sessions):
 * a disabled identity or a rotated key ends its wire sessions within that time.
 */
export class IdentityRefresher {
  readonly #cache: LRUCache<number, IdentityState>;

  constructor(private readonly db: Db, ttlMs = 1_000) {
    this.#cache = new LRUCache({ max: 10_000, ttl: ttlMs });
  }

  async current(id: number): Promise<IdentityState | null> {
    const hit = this.#cache.get(id);
    if (hit) return hit;
    const row = await getIdentityById(this.db, id);
    if (!row) return null;
    const state = { identity: toAgentIdentity(row), verifier: row.scram_verifier };
    this.#cache.set(id, state);
    return state;
  }
}
