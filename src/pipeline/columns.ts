// The `columns` stage: resolves what a SQL statement really reads (stars, whole rows, views, subqueries) against the source's structure, so column policies and redaction see data, not spellings.
import { GatehouseError } from '../errors/registry.js';
import { candidatesFor, type CompiledPolicySet, type Operation } from '../governance/policy/index.js';
import { compileColumnGlobs } from '../governance/policy/glob.js';
import { analyzeCached, type StatementColumns } from '../governance/sql/provenance.js';
import type { SourceStructure } from '../governance/sql/structure.js';
import { readsRedacted, redactedResultColumns, type ResultField } from '../governance/sql/result-columns.js';
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
      // A classification condition asks which columns the statement reads as much as a column condition does.
      columns ||= p.conditions.columns !== undefined || p.conditions.classification_tags !== undefined;
      redact ||= p.redactColumns.length > 0 || p.redactClassified.length > 0;
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

/** What one analysis adds to a classification's columns and tables, merged once per (analysis, classification). */
interface Merged {
  readonly columnsIn: readonly string[] | undefined;
  readonly tablesIn: readonly string[] | undefined;
  readonly columns: readonly string[];
  readonly tables: readonly string[];
  readonly unresolved: readonly string[];
}
const mergedMemo = new WeakMap<readonly StatementColumns[], Merged>();

function merged(statements: readonly StatementColumns[], columnsIn: readonly string[] | undefined, tablesIn: readonly string[] | undefined): Merged {
  const hit = mergedMemo.get(statements);
  if (hit !== undefined && hit.columnsIn === columnsIn && hit.tablesIn === tablesIn) return hit;
  const m: Merged = {
    columnsIn,
    tablesIn,
    columns: union(columnsIn, statements.flatMap((s) => s.reads)),
    tables: union(tablesIn, statements.flatMap((s) => s.relations)),
    unresolved: Object.freeze(statements.flatMap((s) => s.unresolved)),
  };
  mergedMemo.set(statements, m);
  return m;
}

/** The structure as the statement's session resolves unqualified names (its search_path; docs/pgwire.md "search_path"). */
function sessionStructure(req: GovernedRequest, loaded: SourceStructure): SourceStructure {
  return req.action.kind === 'sql' ? loaded.forPath(req.action.searchPath) : loaded;
}

function apply(req: GovernedRequest, loaded: SourceStructure, rules: ColumnRules): void {
  const action = req.action as { sql: string };
  const structure = sessionStructure(req, loaded);
  const statements = analyzeCached(action.sql, structure);
  if (statements === null) throw new GatehouseError('forbidden', 'The statement could not be resolved to the columns it reads.');
  const m = merged(statements, req.columns, req.tables);
  // A column or table rule cannot be checked against what cannot be resolved: deny rather than guess (spec §4 rule 1).
  if (m.unresolved.length > 0 && (rules.columns || rules.tables)) {
    req.audit.addReason(`columns: unresolved ${m.unresolved.slice(0, 5).join(', ')}`);
    throw new GatehouseError('forbidden', `Column rules apply to this source, and the statement's ${m.unresolved[0]} cannot be resolved to the columns it reads.`);
  }
  req.columns = m.columns;
  req.tables = m.tables;
  req.columnAnalysis = { structure, statements };
}

/** A structure older than this is loaded again when a statement names a relation it lacks. */
const STALE_RELATION_RELOAD_MS = 5_000;

/** True when the statement names a relation the structure does not hold (CTE names are not relations: the analysis tells). */
function lacksRelation(req: GovernedRequest, structure: SourceStructure): boolean {
  const statements = analyzeCached((req.action as { sql: string }).sql, sessionStructure(req, structure));
  return statements !== null && statements.some((s) => s.unresolved.some((u) => u.startsWith('relation ')));
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
    const policyRules = rulesFor(deps.policies(), req.sourceId, req.operation!);
    // Columns drift protection redacts are redacted by provenance too: their statements need resolving.
    // So are columns a scan has not seen yet, and classified columns under a name they got since the scan: a source
    // with a catalog snapshot that records identities has every statement resolved against the live structure.
    const catalogAsks = (req.catalog?.protectedColumns.length ?? 0) > 0 || req.catalog?.identity !== undefined;
    const rules = catalogAsks && !policyRules.redact ? { ...policyRules, redact: true } : policyRules;
    if (rules === NONE) return;
    const source = req.source!;
    const cached = deps.structures.current(source);
    if (cached !== null && !lacksRelation(req, cached)) return apply(req, cached, rules);
    // A relation the cached structure lacks may have been created outside the gateway: one reload, at most every few seconds.
    const loading = cached !== null ? deps.structures.refresh(source, STALE_RELATION_RELOAD_MS) : deps.structures.get(source);
    return loading.then(
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

/** EXECUTE and FETCH return rows of a query an earlier statement prepared or declared: what feeds them is not in this text. */
function opaqueRows(req: GovernedRequest): boolean {
  return req.sql?.statements.some((s) => s.kind === 'execute' || s.kind === 'fetch') ?? false;
}

/** Result columns of the request's statement that must be replaced whole (redaction by provenance; both SQL front doors). */
export function provenanceRedaction(req: GovernedRequest, fields: readonly ResultField[]): boolean[] {
  return redactedResultColumns({
    fields,
    analysis: req.columnAnalysis,
    tables: req.tables ?? [],
    redactColumns: req.policyDecision?.obligations.redact_columns ?? [],
    opaque: opaqueRows(req),
  });
}

/**
 * True when an upstream error of this statement may quote a redacted value: PostgreSQL's messages carry input values
 * (`invalid input syntax for type integer: "123-45-6789"`), so such a statement's error keeps its SQLSTATE only.
 */
export function errorMayQuoteRedacted(req: GovernedRequest): boolean {
  const redact = req.policyDecision?.obligations.redact_columns ?? [];
  if (redact.length === 0) return false;
  if (opaqueRows(req)) return true;
  return req.columnAnalysis !== undefined && readsRedacted(req.columnAnalysis, redact);
}

/** An upstream error's fields with everything that may quote data removed: severity and SQLSTATE stay. */
export function withheldErrorFields(fields: ReadonlyMap<string, string>): Map<string, string> {
  const out = new Map<string, string>();
  for (const k of ['S', 'V', 'C']) {
    const v = fields.get(k);
    if (v !== undefined) out.set(k, v);
  }
  out.set('M', `the statement failed upstream (SQLSTATE ${fields.get('C') ?? 'XX000'}); its message is withheld because the statement reads redacted columns`);
  return out;
}

/** A notice of such a statement, kept to its severity and SQLSTATE: notices quote input values too (to_tsquery's). */
export function withheldNoticeFields(fields: ReadonlyMap<string, string>): Map<string, string> {
  const out = withheldErrorFields(fields);
  out.set('M', `a notice of the statement (SQLSTATE ${fields.get('C') ?? '00000'}) is withheld because the statement reads redacted columns`);
  return out;
}

/** Most column names an audit reason lists. */
const AUDIT_COLUMNS_MAX = 50;

const readsReasons = new WeakMap<readonly StatementColumns[], string | null>();

/** The `columns read: …` reason of an analysis, built once per analysis (the wire asks per execution). */
function readsReason(statements: readonly StatementColumns[]): string | null {
  let reason = readsReasons.get(statements);
  if (reason === undefined) {
    const list = [...new Set(statements.flatMap((s) => s.reads))];
    reason = list.length === 0 ? null : `columns read: ${list.slice(0, AUDIT_COLUMNS_MAX).join(', ')}${list.length > AUDIT_COLUMNS_MAX ? ` (+${list.length - AUDIT_COLUMNS_MAX} more)` : ''}`;
    readsReasons.set(statements, reason);
  }
  return reason;
}

/** Names in the audit entry what the statement really read (resolved columns) and which result columns were redacted by provenance. */
export function auditColumns(req: GovernedRequest, redactedByProvenance: readonly string[] = []): void {
  const reason = req.columnAnalysis === undefined ? null : readsReason(req.columnAnalysis.statements);
  if (reason !== null) req.audit.addReason(reason);
  if (redactedByProvenance.length > 0) req.audit.addReason(`redacted by provenance: ${redactedByProvenance.slice(0, AUDIT_COLUMNS_MAX).join(', ')}`);
}

/**
 * A write may not store a redacted column's value in a column that is not redacted itself (`insert into notes select
 * ssn …`, `update t set name = email`): it would be readable in clear afterwards. Checked after policy, when the
 * redaction obligations are known; refused with 42501 naming both columns.
 */
export function refuseRedactedCopies(req: GovernedRequest): void {
  const redact = req.policyDecision?.obligations.redact_columns ?? [];
  const analysis = req.columnAnalysis;
  if (redact.length === 0 || analysis === undefined) return;
  const m = compileColumnGlobs(redact.map((g) => g.toLowerCase()));
  const redacted = (c: string) => m(c.toLowerCase());
  for (const s of analysis.statements) {
    for (const copy of s.copies) {
      if (redacted(copy.target)) continue;
      const source = [...copy.sources.columns].find(redacted);
      if (source === undefined) continue;
      req.audit.addReason(`redacted column copied: ${source} into ${copy.target}`);
      throw new GatehouseError('forbidden', `A policy redacts column ${source}; a write cannot store it in ${copy.target}, which is not redacted.`);
    }
  }
}
