// Redaction by provenance: which result columns carry a value of a redacted table column, from the statement's analysis and RowDescription's origins.
//
// API (pure; the wire relay and the buffered executor behind the MCP `query` tool both call it once per result shape):
// `redactedResultColumns({ fields, analysis, structure, redactColumns })` → one boolean per result column: true when
// the column must be replaced whole. A column is kept in clear only when it is proven free of redacted sources:
// - the analysis of the statement (provenance.ts) names what feeds each column, aligned with RowDescription when the
//   counts agree and every name the analysis is sure of matches; otherwise every column is treated as fed by
//   everything the statement reads (fail closed);
// - RowDescription's origin (table OID, attnum) adds the origin column (a view's origin adds what the view reads);
//   it is never trusted alone: a UNION reports its first arm's origin only;
// - an unknown origin or an unknown source of a computed column redacts the column.
import { compileColumnGlobs } from '../policy/glob.js';
import { relationColumnProvenance, type Provenance, type StatementColumns } from './provenance.js';
import type { SourceStructure } from './structure.js';

export interface ResultField {
  readonly name: string;
  readonly tableOid: number;
  readonly attnum: number;
}

export interface ColumnAnalysis {
  readonly structure: SourceStructure;
  /** Per statement of the text; the relay and the executor run one statement per request. */
  readonly statements: readonly StatementColumns[];
}

export interface ResultRedactionInput {
  readonly fields: readonly ResultField[];
  /** The request's analysis, or undefined when none was made (no column rules applied, or no table was named). */
  readonly analysis: ColumnAnalysis | undefined;
  /** Tables the statement names (the classifier's list): with none, no table column can be in the result. */
  readonly tables: readonly string[];
  readonly redactColumns: readonly string[];
  /** The rows come from a query decided by an earlier statement (EXECUTE, FETCH): nothing here says what feeds them. */
  readonly opaque?: boolean;
}

/** PostgreSQL truncates identifiers to NAMEDATALEN - 1 bytes: longer expected names are not compared. */
const NAME_MAX_BYTES = 63;

const matchers = new Map<string, (v: string) => boolean>();

/** Whether a column (`schema.table.column`) is one the redaction globs name, case-insensitively, as result redaction decides it. */
export function redactedColumnMatcher(globs: readonly string[]): (v: string) => boolean {
  return matcherFor(globs);
}

function matcherFor(globs: readonly string[]): (v: string) => boolean {
  const key = globs.join('\u0000');
  let m = matchers.get(key);
  if (m === undefined) {
    const compiled = compileColumnGlobs(globs.map((g) => g.toLowerCase()));
    m = (v) => compiled(v.toLowerCase());
    if (matchers.size > 1_000) matchers.clear();
    matchers.set(key, m);
  }
  return m;
}

function aligned(fields: readonly ResultField[], s: StatementColumns): boolean {
  const outputs = s.outputs;
  if (outputs === null || outputs.length !== fields.length) return false;
  for (let i = 0; i < outputs.length; i++) {
    const expected = outputs[i]!.name;
    if (expected !== null && Buffer.byteLength(expected) < NAME_MAX_BYTES && expected !== fields[i]!.name) return false;
  }
  return true;
}

function tainted(p: Provenance, redacted: (v: string) => boolean): boolean {
  if (p.unknown) return true;
  for (const c of p.columns) if (redacted(c)) return true;
  return false;
}

/** True when the statement reads a column `redactColumns` matches, anywhere in it (or may: unresolved parts). */
export function readsRedacted(analysis: ColumnAnalysis, redactColumns: readonly string[]): boolean {
  if (redactColumns.length === 0) return false;
  const redacted = matcherFor(redactColumns);
  return analysis.statements.some((s) => s.unresolved.length > 0 || s.reads.some(redacted));
}

/** One flag per result column: true when its values must be replaced whole (fail closed where unproven). */
export function redactedResultColumns(input: ResultRedactionInput): boolean[] {
  const { fields, analysis } = input;
  if (input.redactColumns.length === 0) return fields.map(() => false);
  if (input.opaque === true) return fields.map(() => true);
  if (analysis === undefined) {
    // Without an analysis, a result over tables is not proven free of anything.
    return fields.map(() => input.tables.length > 0);
  }
  const redacted = matcherFor(input.redactColumns);
  const stmt = analysis.statements.length === 1 ? analysis.statements[0]! : null;
  const fit = stmt !== null && aligned(fields, stmt);
  let fallback: boolean | null = null;
  const everything = (): boolean => {
    if (fallback !== null) return fallback;
    fallback = readsRedacted(analysis, input.redactColumns);
    return fallback;
  };
  return fields.map((f, i) => {
    if (fit ? tainted(stmt!.outputs![i]!.sources, redacted) : everything()) return true;
    if (f.tableOid === 0) return false;
    return tainted(relationColumnProvenance(analysis.structure, f.tableOid, f.attnum), redacted);
  });
}
