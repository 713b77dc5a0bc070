// Write-risk classification (spec §4 step 5): how risky a write is, and whether the role rule, policy and risk together queue it for approval.
import type { ApprovalMode } from './source-roles.js';
import type { Effect } from './policy/index.js';

export const RISK_LEVELS = ['low', 'medium', 'high', 'critical'] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

export interface SqlRiskInput {
  kind: 'sql';
  operation: 'read' | 'write' | 'ddl' | 'admin';
  /** Statement kinds of the classified SQL, e.g. ["delete"], ["update"], ["insert"]. */
  statementKinds: readonly string[];
  /** True when an UPDATE or DELETE has no WHERE clause (it touches every row). */
  unboundedWrite: boolean;
  multiStatement: boolean;
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
 * updates/deletes medium unless unbounded (high); DDL high; admin statements critical;
 * several statements in one request are never below high.
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
  if (input.multiStatement && input.operation !== 'read') raise('high', 'several statements in one request');
  if (reasons.length === 0) reasons.push('read');
  return { level, reasons };
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
