// Write-risk classification (spec §4 step 5): how risky a write is, and whether the role rule, policy and risk together queue it for approval.
import type { ApprovalMode } from './source-roles.js';
import type { Effect } from './policy/index.js';

export const RISK_LEVELS = ['low', 'medium', 'high', 'critical'] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

/** What a write does to one table, as the planner (or the rolled-back count) says. */
export interface TableEffect {
  /** Schema-qualified name of the table written. */
  readonly table: string;
  readonly operation: 'insert' | 'update' | 'delete' | 'merge';
  /** Rows the statement writes in this table. */
  readonly rows: number;
  /** Rows the whole table holds (the planner's estimate); null when not asked (inserts). */
  readonly tableRows: number | null;
}

/** The effect of a write measured on the source before it runs; `ok: false` when it could not be measured. */
export type WriteEstimate = { readonly ok: true; readonly rows: number; readonly tables: readonly TableEffect[] } | { readonly ok: false; readonly reason: string };

/** Per-source thresholds above which a write is high risk (connection_config.write_risk, docs/approvals.md). */
export interface WriteRiskThresholds {
  /** More rows than this, in all tables together, is high risk. */
  readonly max_rows: number;
  /** Updating, deleting or merging more than this share (0–1) of a table's rows is high risk… */
  readonly max_table_share: number;
  /** …when the write touches more than this many rows of it: one row of a one-row table is routine (a counter, a settings row). */
  readonly share_min_rows: number;
}

export interface SqlRiskInput {
  kind: 'sql';
  operation: 'read' | 'write' | 'ddl' | 'admin';
  /** Statement kinds of the classified SQL, e.g. ["delete"], ["update"], ["insert"]. */
  statementKinds: readonly string[];
  /** True when an UPDATE or DELETE has no WHERE clause (it touches every row). */
  unboundedWrite: boolean;
  multiStatement: boolean;
  /** The measured effect of a row-writing statement (needsWriteEstimate), with the source's thresholds. */
  effect?: { readonly estimate: WriteEstimate; readonly thresholds: WriteRiskThresholds };
}

/** Statement kinds that write rows of tables, so that the planner can say how many. */
const ROW_WRITES: ReadonlySet<string> = new Set(['insert', 'update', 'delete', 'merge']);

/**
 * Whether a statement's risk depends on its measured effect: a single statement that writes rows (INSERT, UPDATE,
 * DELETE, MERGE, or any statement holding one in a CTE or under EXPLAIN ANALYZE). Several statements in one request
 * are high risk already; other writes (COPY FROM, a sequence call, LOCK) keep the rules of their kind.
 */
export function needsWriteEstimate(input: { operation: string; statementKinds: readonly string[]; traps: readonly string[]; multiStatement: boolean }): boolean {
  if (input.operation !== 'write' || input.multiStatement) return false;
  return input.statementKinds.some((k) => ROW_WRITES.has(k)) || input.traps.includes('writable_cte') || input.traps.includes('explain_analyze_write');
}

/** The reasons a measured effect makes a write high risk (none: within the thresholds); an unmeasured effect is one (fail closed). */
export function effectRisks(estimate: WriteEstimate, t: WriteRiskThresholds): string[] {
  if (!estimate.ok) return [`write effect could not be estimated (${estimate.reason})`];
  const reasons: string[] = [];
  if (estimate.rows > t.max_rows) reasons.push(`writes about ${Math.round(estimate.rows)} rows (more than max_rows ${t.max_rows})`);
  // Inserting adds rows; only rewriting or removing existing ones is measured against the table, all writes to one table together.
  const perTable = new Map<string, { rows: number; tableRows: number; operations: Set<string> }>();
  for (const e of estimate.tables) {
    if (e.operation === 'insert' || e.tableRows === null) continue;
    const seen = perTable.get(e.table) ?? { rows: 0, tableRows: 0, operations: new Set<string>() };
    seen.rows += e.rows;
    seen.tableRows = Math.max(seen.tableRows, e.tableRows);
    seen.operations.add(e.operation);
    perTable.set(e.table, seen);
  }
  for (const [table, e] of perTable) {
    if (e.rows <= t.share_min_rows) continue;
    const share = e.rows / Math.max(e.tableRows, 1);
    if (share > t.max_table_share) reasons.push(`${[...e.operations].join('/')} of about ${Math.round(Math.min(share, 1) * 100)}% of ${table} (more than max_table_share ${t.max_table_share})`);
  }
  return reasons;
}

export interface HttpRiskInput {
  kind: 'http';
  method: string;
}

export interface RiskAssessment {
  level: RiskLevel;
  reasons: string[];
}

/**
 * HTTP: reads are low; POST/PUT/PATCH medium; DELETE high. SQL: reads low; inserts medium;
 * updates/deletes medium unless unbounded or measured above the source's thresholds
 * (or not measurable), which is high; DDL high; admin statements critical; several statements in
 * one request are never below high.
 */
export function assessRisk(input: SqlRiskInput | HttpRiskInput): RiskAssessment {
  if (input.kind === 'http') {
    const m = input.method.toUpperCase();
    if (m === 'GET') return { level: 'low', reasons: ['read'] };
    if (m === 'DELETE') return { level: 'high', reasons: ['http delete'] };
    return { level: 'medium', reasons: [`http ${m.toLowerCase()}`] };
  }
  const reasons: string[] = [];
  let level: RiskLevel = 'low';
  const raise = (to: RiskLevel, why: string) => {
    reasons.push(why);
    if (RISK_LEVELS.indexOf(to) > RISK_LEVELS.indexOf(level)) level = to;
  };
  if (input.operation === 'write') raise('medium', 'sql write');
  if (input.operation === 'ddl') raise('high', 'schema change');
  if (input.operation === 'admin') raise('critical', 'administrative statement');
  if (input.unboundedWrite) raise('high', 'update or delete without a WHERE clause');
  // Risk by effect, not by syntax: `WHERE true`, a tautology, a CTE or a MERGE touches what the planner says it does.
  if (input.effect) for (const why of effectRisks(input.effect.estimate, input.effect.thresholds)) raise('high', why);
  if (input.multiStatement && input.operation !== 'read') raise('high', 'several statements in one request');
  if (reasons.length === 0) reasons.push('read');
  return { level, reasons };
}

/**
 * Whether an approved write has grown far beyond what its approver was shown: above twice the approved rows and
 * above them plus max_rows (estimates are rough; only a change of scale counts). An unmeasured write is not held
 * back here: a human approved it, and its risk was judged when it was queued.
 */
export function grownSinceApproval(approvedRows: number | null | undefined, estimate: WriteEstimate | undefined, t: WriteRiskThresholds | undefined): string | null {
  if (approvedRows === null || approvedRows === undefined || !estimate?.ok || !t) return null;
  if (estimate.rows <= Math.max(2 * approvedRows, approvedRows + t.max_rows)) return null;
  return `writes about ${Math.round(estimate.rows)} rows now; about ${Math.round(approvedRows)} were approved`;
}

export interface ApprovalVerdict {
  required: boolean;
  reason: string;
}

/**
 * A write waits for a human when the policy says so, when the role rule says "always", or when the
 * rule says "by_risk" and the risk is high or worse. Reads never queue: there is nothing to hold back.
 */
export function approvalVerdict(input: { isWrite: boolean; policyEffect: Effect; roleApproval: ApprovalMode | undefined; risk: RiskAssessment }): ApprovalVerdict {
  if (!input.isWrite) return { required: false, reason: 'read' };
  if (input.policyEffect === 'require_approval') return { required: true, reason: 'policy requires approval' };
  if (input.roleApproval === 'always') return { required: true, reason: 'source role requires approval for this write' };
  if (input.roleApproval === 'by_risk' && (input.risk.level === 'high' || input.risk.level === 'critical')) {
    return { required: true, reason: `${input.risk.level} risk: ${input.risk.reasons.join(', ')}` };
  }
  return { required: false, reason: `${input.risk.level} risk` };
}
