// The `columns` stage: resolves what a SQL statement really reads (stars, whole rows, views, subqueries) against the source's structure, so column policies and redaction see data, not spellings.
import { GatehouseError } from '../errors/registry.js';
import { candidatesFor, type CompiledPolicySet, type Operation } from '../governance/policy/index.js';
import { compileColumnGlobs } from '../governance/policy/glob.js';
import { analyzeCached, type StatementColumns } from '../governance/sql/provenance.js';
import type { SourceStructure } from '../governance/sql/structure.js';
import { redactedResultColumns, type ResultField } from '../governance/sql/result-columns.js';
import type { GovernedRequest, Stage } from './context.js';

/** What the policies that may apply to a (source, operation) ask of column resolution. */
interface ColumnRules {
  /** A policy has a `columns` condition (a column deny, or any column-scoped effect). */
  readonly columns: boolean;
  /** A policy redacts columns. */
  readonly redact: boolean;
  /** A policy has a `tables` condition: views are resolved so it sees the tables behind them. */
  readonly tables: boolean;
}

const NONE: ColumnRules = Object.freeze({ columns: false, redact: false, tables: false });
const rulesMemo = new WeakMap<CompiledPolicySet, Map<string, ColumnRules>>();

function rulesFor(set: CompiledPolicySet, sourceId: string, operation: Operation): ColumnRules {
  let memo = rulesMemo.get(set);
  if (memo === undefined) rulesMemo.set(set, (memo = new Map()));
  const key = `${operation}\u0000${sourceId}`;
  let rules = memo.get(key);
  if (rules === undefined) {
    let columns = false;
    let redact = false;
    let tables = false;
    for (const p of candidatesFor(set, sourceId, operation)) {
      columns ||= p.conditions.columns !== undefined;
      redact ||= p.redactColumns.length > 0;
      tables ||= p.conditions.tables !== undefined;
    }
    rules = columns || redact || tables ? { columns, redact, tables } : NONE;
    if (memo.size > 4_096) memo.clear();
    memo.set(key, rules);
  }
  return rules;
}

function union(a: readonly string[] | undefined, b: Iterable<string>): readonly string[] {
  const out = new Set(a ?? []);
  for (const x of b) out.add(x);
  return Object.freeze([...out]);
}

/** A statement kind that can change the structure (DDL, SELECT INTO, and admin statements to be safe): the cached structure is dropped. */
export function changesStructure(req: GovernedRequest): boolean {
  return req.sql!.statements.some((s) => s.operation === 'ddl' || s.operation === 'admin' || s.traps.includes('select_into'));
}

function apply(req: GovernedRequest, structure: SourceStructure, rules: ColumnRules): void {
  const action = req.action as { sql: string };
  const statements = analyzeCached(action.sql, structure);
  if (statements === null) throw new GatehouseError('forbidden', 'The statement could not be resolved to the columns it reads.');
  const reads = new Set<string>();
  const relations = new Set<string>();
  const unresolved: string[] = [];
  for (const s of statements) {
    for (const c of s.reads) reads.add(c);
    for (const r of s.relations) relations.add(r);
    unresolved.push(...s.unresolved);
  }
  // A column or table rule cannot be checked against what cannot be resolved: deny rather than guess (spec §4 rule 1).
  if (unresolved.length > 0 && (rules.columns || rules.tables)) {
    req.audit.addReason(`columns: unresolved ${unresolved.slice(0, 5).join(', ')}`);
    throw new GatehouseError('forbidden', `Column rules apply to this source, and the statement's ${unresolved[0]} cannot be resolved to the columns it reads.`);
  }
  req.columns = union(req.columns, reads);
  req.tables = union(req.tables, relations);
  req.columnAnalysis = { structure, statements };
}

/**
 * Step 3b (SQL, after the source role, before policy): loads the source's structure only when a policy that may apply
 * has a column, table or redaction rule and the statement names a table; a structure that cannot be loaded refuses
 * the statement (fail closed). Statements that change the structure drop the cached one.
 */
export const resolveColumns: Stage = {
  name: 'columns',
  run(req, deps) {
    if (req.action.kind !== 'sql' || req.sql === undefined) return;
    if (changesStructure(req)) deps.structures.invalidate(req.sourceId);
    if ((req.tables ?? []).length === 0) return;
    const rules = rulesFor(deps.policies(), req.sourceId, req.operation!);
    if (rules === NONE) return;
    const source = req.source!;
    const cached = deps.structures.current(source);
    if (cached !== null) return apply(req, cached, rules);
    return deps.structures.get(source).then(
      (structure) => apply(req, structure, rules),
      (err: unknown) => {
        deps.log.warn({ err: { message: (err as Error)?.message }, source_id: req.sourceId }, 'source structure could not be loaded');
        req.audit.addReason('columns: source structure unavailable');
        throw new GatehouseError('forbidden', 'Column rules apply to this source and its structure cannot be read now; the statement is refused.');
      },
    );
  },
};

/** The columns of `columns` a denying policy's column globs match: named in the refusal so the agent knows what to drop. */
export function deniedColumns(set: CompiledPolicySet, policyId: number | null, columns: readonly string[]): string[] {
  const p = set.policies.find((x) => x.id === policyId);
  if (p === undefined || p.conditions.columns === undefined) return [];
  const m = compileColumnGlobs(p.conditions.columns);
  return columns.filter((c) => m(c));
}

export type { StatementColumns };

/** Result columns of the request's statement that must be replaced whole (redaction by provenance; both SQL front doors). */
export function provenanceRedaction(req: GovernedRequest, fields: readonly ResultField[]): boolean[] {
  return redactedResultColumns({
    fields,
    analysis: req.columnAnalysis,
    tables: req.tables ?? [],
    redactColumns: req.policyDecision?.obligations.redact_columns ?? [],
  });
}

/** Most column names an audit reason lists. */
const AUDIT_COLUMNS_MAX = 50;

/** Names in the audit entry what the statement really read (resolved columns) and which result columns were redacted by provenance. */
export function auditColumns(req: GovernedRequest, redactedByProvenance: readonly string[] = []): void {
  const reads = new Set<string>();
  for (const s of req.columnAnalysis?.statements ?? []) for (const c of s.reads) reads.add(c);
  if (reads.size > 0) {
    const list = [...reads];
    req.audit.addReason(`columns read: ${list.slice(0, AUDIT_COLUMNS_MAX).join(', ')}${list.length > AUDIT_COLUMNS_MAX ? ` (+${list.length - AUDIT_COLUMNS_MAX} more)` : ''}`);
  }
  if (redactedByProvenance.length > 0) req.audit.addReason(`redacted by provenance: ${redactedByProvenance.slice(0, AUDIT_COLUMNS_MAX).join(', ')}`);
}
