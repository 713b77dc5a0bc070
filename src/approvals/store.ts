// Approval rows in the control store: the spec §2 view, and every state transition as one atomic UPDATE (spec §3; docs/approvals.md "Transitions").
import { sql } from 'kysely';
import type { Db } from '../store/repos/util.js';
import { guard } from '../store/repos/util.js';

export const APPROVAL_STATUSES = ['pending', 'approved', 'rejected', 'expired', 'executed', 'failed'] as const;
export type ApprovalStatus = (typeof APPROVAL_STATUSES)[number];

/** A row as the service reads it: every column except the encrypted request, which only a claim returns. */
export interface ApprovalRow {
  id: number;
  identity_id: number;
  source_id: string;
  sql_text: string;
  risk_level: string;
  status: ApprovalStatus;
  approved_by: string | null;
  decided_at: Date | null;
  created_at: Date;
  executed_at: Date | null;
  expires_at: Date | null;
  execution_started_at: Date | null;
  request_metadata: Record<string, unknown>;
  result: unknown;
}

/** The Approval response of spec §2, field for field. */
export interface ApprovalView {
  id: number;
  identity_id: number;
  source_id: string;
  sql_text: string;
  risk_level: string;
  status: ApprovalStatus;
  approved_by: string | null;
  created_at: string | null;
  executed_at: string | null;
  expires_at: string | null;
  request_metadata: Record<string, unknown>;
}

/** The columns every read returns; `request_payload` is deliberately not among them. */
const COLUMNS = sql.raw(
  'id, identity_id, source_id, sql_text, risk_level, status, approved_by, decided_at, created_at, executed_at, expires_at, execution_started_at, request_metadata, result',
);

const iso = (d: Date | null): string | null => (d === null ? null : new Date(d).toISOString());

export function viewApproval(row: ApprovalRow): ApprovalView {
  return {
    id: row.id,
    identity_id: row.identity_id,
    source_id: row.source_id,
    sql_text: row.sql_text,
    risk_level: row.risk_level,
    status: row.status,
    approved_by: row.approved_by,
    created_at: iso(row.created_at),
    executed_at: iso(row.executed_at),
    expires_at: iso(row.expires_at),
    request_metadata: row.request_metadata ?? {},
  };
}

export async function listApprovals(db: Db, opts: { status?: ApprovalStatus | undefined; limit: number }): Promise<ApprovalRow[]> {
  const where = opts.status === undefined ? sql`` : sql`where status = ${opts.status}`;
  return guard('approval', async () => (await sql<ApprovalRow>`select ${COLUMNS} from approvals ${where} order by id desc limit ${opts.limit}`.execute(db)).rows);
}

export async function getApproval(db: Db, id: number): Promise<ApprovalRow | null> {
  return guard('approval', async () => (await sql<ApprovalRow>`select ${COLUMNS} from approvals where id = ${id}`.execute(db)).rows[0] ?? null);
}

export type DecideResult =
  | { kind: 'decided'; row: ApprovalRow }
  /** It was still pending but past its expiry: this call marked it expired instead. */
  | { kind: 'expired'; row: ApprovalRow }
  | { kind: 'not_actionable'; row: ApprovalRow }
  | { kind: 'not_found' };

/**
 * The decision, as one statement: only a pending row changes, and a pending row past its expiry becomes
 * `expired` rather than decided. Concurrent decisions serialize on the row lock; the losers re-check
 * `status = 'pending'` after the winner commits and match nothing, so exactly one decision wins.
 */
export async function decideApproval(db: Db, id: number, to: 'approved' | 'rejected', by: string): Promise<DecideResult> {
  const updated = await guard('approval', async () =>
    (
      await sql<ApprovalRow>`
        update approvals set
          status = case when expires_at is null or expires_at > now() then ${to} else 'expired' end,
          approved_by = case when expires_at is null or expires_at > now() then ${by} else approved_by end,
          decided_at = now()
        where id = ${id} and status = 'pending'
        returning ${COLUMNS}`.execute(db)
    ).rows[0],
  );
  if (updated) return updated.status === 'expired' ? { kind: 'expired', row: updated } : { kind: 'decided', row: updated };
  const current = await getApproval(db, id);
  return current === null ? { kind: 'not_found' } : { kind: 'not_actionable', row: current };
}

/**
 * Claims the execution of an approved row: succeeds once per row, ever (`execution_started_at` is set only
 * while null). Only the claimant gets the encrypted request.
 */
export async function claimExecution(db: Db, id: number): Promise<{ row: ApprovalRow; payload: Buffer | null } | null> {
  const claimed = await guard('approval', async () =>
    (
      await sql<ApprovalRow & { request_payload: Buffer | null }>`
        update approvals set execution_started_at = now()
        where id = ${id} and status = 'approved' and execution_started_at is null
        returning ${COLUMNS}, request_payload`.execute(db)
    ).rows[0],
  );
  if (!claimed) return null;
  const { request_payload, ...row } = claimed;
  return { row, payload: request_payload };
}

/** Records the outcome of a claimed execution; null when recovery already settled the row (it then stays as recovery left it). */
export async function recordOutcome(db: Db, id: number, status: 'executed' | 'failed', result: unknown): Promise<ApprovalRow | null> {
  return guard('approval', async () =>
    (
      await sql<ApprovalRow>`
        update approvals set status = ${status}, executed_at = now(), result = ${JSON.stringify(result)}::jsonb
        where id = ${id} and status = 'approved' and execution_started_at is not null
        returning ${COLUMNS}`.execute(db)
    ).rows[0] ?? null,
  );
}

/** The sweeper: pending rows past expiry become expired, a bounded batch per call. */
export async function expireDue(db: Db, limit: number): Promise<ApprovalRow[]> {
  return guard('approval', async () =>
    (
      await sql<ApprovalRow>`
        update approvals set status = 'expired', decided_at = now()
        where id in (select id from approvals where status = 'pending' and expires_at <= now() order by id limit ${limit} for update skip locked)
          and status = 'pending'
        returning ${COLUMNS}`.execute(db)
    ).rows,
  );
}

/**
 * Crash recovery, rule 1: a claim older than `claimTimeoutMs` with no outcome means the executor died after it may
 * have sent the request. The outcome is unknown, so the row fails and is never retried (never executed twice).
 */
export async function failStaleClaims(db: Db, claimTimeoutMs: number, result: unknown): Promise<ApprovalRow[]> {
  return guard('approval', async () =>
    (
      await sql<ApprovalRow>`
        update approvals set status = 'failed', executed_at = now(), result = ${JSON.stringify(result)}::jsonb
        where status = 'approved' and execution_started_at is not null
          and execution_started_at < now() - make_interval(secs => ${claimTimeoutMs / 1000})
        returning ${COLUMNS}`.execute(db)
    ).rows,
  );
}

/** Crash recovery, rule 2: approved rows never claimed (the decider died before claiming), decided at least `graceMs` ago. */
export async function unclaimedApprovals(db: Db, graceMs: number, limit: number): Promise<number[]> {
  return guard('approval', async () =>
    (
      await sql<{ id: number }>`
        select id from approvals
        where status = 'approved' and execution_started_at is null and decided_at <= now() - make_interval(secs => ${graceMs / 1000})
        order by id limit ${limit}`.execute(db)
    ).rows.map((r) => r.id),
  );
}

/** The identity of an approval's requester, fresh from the store (never a cached session). */

/** Approvals per state (every state listed, zero when none), for the approvals metric (docs/observability.md). */
export async function countApprovalsByStatus(db: Db): Promise<Record<ApprovalStatus, number>> {
  const rows = await guard('approval', async () => (await sql<{ status: string; n: string }>`select status, count(*) as n from approvals group by status`.execute(db)).rows);
  const counts = Object.fromEntries(APPROVAL_STATUSES.map((s) => [s, 0])) as Record<ApprovalStatus, number>;
  for (const r of rows) if ((APPROVAL_STATUSES as readonly string[]).includes(r.status)) counts[r.status as ApprovalStatus] = Number(r.n);
  return counts;
}
