// The approval lifecycle (spec §3): decisions, exactly-once execution, expiry and crash recovery, with notifications on the side. Rules: docs/approvals.md.
import { getIdentityById } from '../store/repos/identities.js';
import { GatehouseError } from '../errors/registry.js';
import { toAgentIdentity } from '../identity/index.js';
import type { Logger } from '../observability/logger.js';
import type { ApprovalEvent, ApprovalNotice } from '../notify/message.js';
import type { ApprovalNotifier } from '../notify/slack.js';
import type { Db } from '../store/repos/util.js';
import { failureResult, type ApprovalExecutor, type ExecutionOutcome, type SqlApprovalExecutor } from './execute.js';
import {
  claimExecution,
  decideApproval,
  expireDue,
  failStaleClaims,
  getApproval,
  recordOutcome,
  unclaimedApprovals,
  type ApprovalRow,
} from './store.js';

/** Rows settled per sweep call; the next sweep takes the rest. */
const SWEEP_BATCH = 500;

/** The result recovery records for an execution that started but never reported back. */
export const OUTCOME_UNKNOWN = { error: 'outcome_unknown', message: 'Outcome unknown after a crash; not retried.' } as const;

export interface SweepDeps {
  db: Db;
  notifier: ApprovalNotifier;
  log: Logger;
  /** A claim older than this with no outcome is failed (recovery rule 1). */
  claimTimeoutMs: number;
}

/** The execution claim timeout: well past the longest an execution may legitimately take (its upstream timeout, barriers, audit). */
export function claimTimeoutMsFor(upstreamRequestMs: number): number {
  return Math.max(300_000, 4 * upstreamRequestMs);
}

/** Sends a notice for a row; the identity's name is looked up off the request path, and a failure only loses the notice. */
export function notifyRow(deps: Pick<SweepDeps, 'db' | 'notifier' | 'log'>, row: ApprovalRow, event: ApprovalEvent, errorCode?: string | null): void {
  void (async () => {
    const identity = await getIdentityById(deps.db, row.identity_id).catch(() => undefined);
    const notice: ApprovalNotice = {
      event,
      approval_id: row.id,
      source_id: row.source_id,
      identity_id: row.identity_id,
      identity_name: identity?.name ?? null,
      risk_level: row.risk_level,
      summary: row.sql_text,
      error_code: errorCode ?? null,
    };
    deps.notifier.notify(notice);
  })().catch((err: unknown) => deps.log.warn({ err, approval_id: row.id }, 'approval notification skipped'));
}

/**
 * The worker's sweep (store only, no pipeline needed): pending approvals past expiry become `expired`, and
 * executions claimed longer than the claim timeout ago without an outcome become `failed` (never retried).
 */
export async function sweepApprovals(deps: SweepDeps): Promise<{ expired: number; failed: number }> {
  let expired = 0;
  for (;;) {
    const rows = await expireDue(deps.db, SWEEP_BATCH);
    for (const row of rows) notifyRow(deps, row, 'expired');
    expired += rows.length;
    if (rows.length < SWEEP_BATCH) break;
  }
  const stale = await failStaleClaims(deps.db, deps.claimTimeoutMs, OUTCOME_UNKNOWN);
  for (const row of stale) {
    deps.log.error({ approval_id: row.id }, 'approved request claimed for execution but never reported an outcome; marked failed, not retried');
    notifyRow(deps, row, 'failed', OUTCOME_UNKNOWN.error);
  }
  if (expired + stale.length > 0) deps.log.info({ expired, failed: stale.length }, 'approvals swept');
  return { expired, failed: stale.length };
}

export interface ApprovalServiceOptions extends SweepDeps {
  executor: ApprovalExecutor;
}

export interface DecisionOutcome {
  row: ApprovalRow;
  /** True when the approved request executed; false when rejected or when execution failed. */
  executed: boolean;
}

export class ApprovalService {
  #sqlExecutor: SqlApprovalExecutor | null = null;

  constructor(private readonly opts: ApprovalServiceOptions) {}

  /** The wire listener (or MCP) registers how stored SQL executes; until then SQL approvals fail with "no SQL executor". */
  registerSqlExecutor(executor: SqlApprovalExecutor | null): void {
    this.#sqlExecutor = executor;
  }

  get sqlExecutor(): SqlApprovalExecutor | null {
    return this.#sqlExecutor;
  }

  /**
   * Approve or reject. 404 for an unknown id, 409 `not_actionable` for one already decided or expired (an
   * expired-but-unswept one is marked expired by this very call). An approval executes before this returns.
   */
  async decide(id: number, decision: 'approve' | 'reject', by: string): Promise<DecisionOutcome> {
    const result = await decideApproval(this.opts.db, id, decision === 'approve' ? 'approved' : 'rejected', by);
    if (result.kind === 'not_found') throw new GatehouseError('not_found', 'Approval not found.');
    if (result.kind === 'expired') {
      notifyRow(this.opts, result.row, 'expired');
      throw new GatehouseError('not_actionable', 'The approval expired before it was decided.', { details: { status: 'expired' } });
    }
    if (result.kind === 'not_actionable') {
      throw new GatehouseError('not_actionable', `The approval is no longer pending (status ${result.row.status}).`, { details: { status: result.row.status } });
    }
    if (decision === 'reject') {
      notifyRow(this.opts, result.row, 'rejected');
      return { row: result.row, executed: false };
    }
    notifyRow(this.opts, result.row, 'approved');
    const settled = await this.execute(id);
    const row = settled ?? (await getApproval(this.opts.db, id)) ?? result.row;
    return { row, executed: row.status === 'executed' };
  }

  /**
   * Claims and executes one approved row. The claim succeeds once per row ever, so whoever calls this —
   * the deciding request or recovery — at most one execution happens. Null when another caller holds the claim.
   */
  async execute(id: number): Promise<ApprovalRow | null> {
    const claimed = await claimExecution(this.opts.db, id);
    if (claimed === null) return null;
    const { row, payload } = claimed;
    const outcome = await this.#outcomeOf(row, payload);
    const recorded = await recordOutcome(this.opts.db, id, outcome.status, outcome.result);
    if (recorded === null) {
      this.opts.log.error({ approval_id: id, status: outcome.status }, 'approval outcome arrived after recovery had settled the row; the recorded state stands');
      return getApproval(this.opts.db, id);
    }
    if (recorded.status === 'failed') notifyRow(this.opts, recorded, 'failed', typeof outcome.result.error === 'string' ? outcome.result.error : null);
    return recorded;
  }

  async #outcomeOf(row: ApprovalRow, payload: Buffer | null): Promise<ExecutionOutcome> {
    let identityRow;
    try {
      identityRow = await getIdentityById(this.opts.db, row.identity_id);
    } catch (err) {
      this.opts.log.error({ err, approval_id: row.id }, 'identity of an approval cannot be loaded');
      return failureResult('unavailable', 'The identity could not be loaded; the request was not executed.');
    }
    if (!identityRow) return failureResult('identity_missing', 'The identity no longer exists; the request was not executed.');
    if (!identityRow.enabled) return failureResult('identity_disabled', 'The identity is disabled; the request was not executed.');
    return this.opts.executor.run(row, payload, toAgentIdentity(identityRow));
  }

  /** The worker's sweep (expiry and stale claims), callable here too. */
  sweep(): Promise<{ expired: number; failed: number }> {
    return sweepApprovals(this.opts);
  }

  /**
   * Recovery rule 2: approved rows that were never claimed (the decider crashed between its decision and its
   * claim) execute now, each at most once, once they are older than `graceMs` (so a live decider finishes first).
   */
  async recoverUnclaimed(graceMs = 60_000): Promise<number> {
    const ids = await unclaimedApprovals(this.opts.db, graceMs, SWEEP_BATCH);
    let executed = 0;
    for (const id of ids) {
      try {
        if ((await this.execute(id)) !== null) executed += 1;
      } catch (err) {
        this.opts.log.error({ err, approval_id: id }, 'recovery of an approved request failed');
        // The claim may or may not be held: rule 1 settles a held claim later; an unheld one is retried next sweep.
      }
    }
    return executed;
  }
}
