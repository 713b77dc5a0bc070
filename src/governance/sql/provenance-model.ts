// The data model of column resolution: provenance sets, the FROM items and scopes the analysis keeps, and small parse-tree helpers (provenance.ts walks with them).
export type Json = Record<string, unknown>;

/** The table columns (`schema.table.column`) a value is computed from; `unknown` when they cannot all be named. */
export interface Provenance {
  readonly columns: ReadonlySet<string>;
  readonly unknown: boolean;
}

export interface OutputColumn {
  /** The name PostgreSQL will give the column when it is certain (a plain reference or an alias), else null. */
  readonly name: string | null;
  readonly sources: Provenance;
}

export interface StatementColumns {
  /** Every table column the statement reads, anywhere in it. */
  readonly reads: readonly string[];
  /** Relations reached, views included and resolved to what they read (`schema.name`). */
  readonly relations: readonly string[];
  /** Per result column (top-level SELECT, VALUES, set operation or RETURNING), or null when the width is unknown. */
  readonly outputs: readonly OutputColumn[] | null;
  /** What could not be resolved (relation names, failed view definitions): callers fail closed. */
  readonly unresolved: readonly string[];
  /** Per column a write stores (`schema.table.column`, or `schema.table.*` when unknown): what its value is computed from. */
  readonly copies: readonly ColumnCopy[];
}

export interface ColumnCopy {
  readonly target: string;
  readonly sources: Provenance;
}

export const EMPTY: Provenance = Object.freeze({ columns: new Set<string>(), unknown: false });
export const UNKNOWN: Provenance = Object.freeze({ columns: new Set<string>(), unknown: true });
/** Deepest view nesting followed (PostgreSQL allows no cycles; this bounds the work). */
export const MAX_VIEW_DEPTH = 16;
/** Set-returning functions whose result has more than one column, by name: their width in FROM. */
export const MULTI_COLUMN_FUNCTIONS: Readonly<Record<string, readonly string[]>> = {
  json_each: ['key', 'value'],
  jsonb_each: ['key', 'value'],
  json_each_text: ['key', 'value'],
  jsonb_each_text: ['key', 'value'],
  pg_options_to_table: ['option_name', 'option_value'],
};

export function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
export function asArray(v: unknown): readonly unknown[] {
  return Array.isArray(v) ? v : [];
}
export function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}
export function stringNode(v: unknown): string | null {
  return isObj(v) && isObj(v.String) ? (str(v.String.sval) ?? '') : null;
}

export function union(a: Provenance, b: Provenance): Provenance {
  if (b.columns.size === 0 && (!b.unknown || a.unknown)) return a;
  if (a.columns.size === 0 && (!a.unknown || b.unknown)) return b;
  const cols = new Set(a.columns);
  for (const c of b.columns) cols.add(c);
  return { columns: cols, unknown: a.unknown || b.unknown };
}

export function unionAll(list: readonly Provenance[]): Provenance {
  let p = EMPTY;
  for (const x of list) p = union(p, x);
  return p;
}

export interface RelCol {
  readonly name: string;
  readonly prov: Provenance;
}

/** One FROM item (or a join of them) as a query level sees it. */
export interface Item {
  /** What the item may be qualified with: its alias, or the relation's own name. */
  readonly alias: string | null;
  /** The relation `schema.name` it was named by (for `schema.table.column` references), else null. */
  readonly qualified: string | null;
  /** Its columns in order, or null when their number is unknown. */
  readonly columns: readonly RelCol[] | null;
  /** Inner items of a join (their names stay visible). */
  readonly children: readonly Item[];
  /** The item's whole row, when its columns are unknown. */
  readonly opaque: Provenance;
}

export interface Cte {
  columns: readonly RelCol[] | null;
  opaque: Provenance;
}

export interface Level {
  readonly parent: Level | null;
  readonly items: Item[];
  readonly ctes: Map<string, Cte> | null;
  /** Output names a bare ORDER BY / GROUP BY name may refer to. */
  outputNames: ReadonlySet<string> | null;
}

export interface QueryResult {
  readonly outputs: RelCol[] | null;
}

export function wholeOf(item: Item): Provenance {
  if (item.columns === null) return item.opaque;
  return unionAll(item.columns.map((c) => c.prov));
}

export function renamed(cols: readonly RelCol[] | null, alias: unknown): readonly RelCol[] | null {
  if (cols === null) return null;
  const names = isObj(alias) ? asArray(alias.colnames).map(stringNode) : [];
  if (names.length === 0) return cols;
  return cols.map((c, i) => ({ name: names[i] ?? c.name, prov: c.prov }));
}

export function signature(c: Cte): string {
  if (c.columns === null) return `?${c.opaque.unknown}`;
  return c.columns.map((x) => `${[...x.prov.columns].sort().join(',')}|${x.prov.unknown}`).join(';');
}

export function aliasOf(body: Json): string | null {
  return isObj(body.alias) ? str(body.alias.aliasname) : null;
}

export function findCte(level: Level | null, name: string): Cte | null {
  for (let l = level; l !== null; l = l.parent) {
    const c = l.ctes?.get(name);
    if (c !== undefined) return c;
  }
  return null;
}

export function findIn(items: readonly Item[], q: readonly string[]): Item | null {
  for (const item of items) {
    if (q.length === 1 && item.alias === q[0]) return item;
    if (q.length >= 2 && item.qualified === q.slice(-2).join('.') && (item.alias === q[q.length - 1] || item.alias === null)) return item;
    const inner = findIn(item.children, q);
    if (inner !== null) return inner;
  }
  return null;
}

/** The qualifier of a `*` or `t.*` select-list entry, or null for any other expression. */
export function starOf(val: unknown): string[] | null {
  if (!isObj(val) || !isObj(val.ColumnRef)) return null;
  const fields = asArray(val.ColumnRef.fields);
  const last = fields[fields.length - 1];
  if (!isObj(last) || !('A_Star' in last)) return null;
  return fields.slice(0, -1).map((f) => stringNode(f) ?? '');
}

/** The name PostgreSQL gives an unaliased output, where it is certain (a column reference or a cast of one). */
export function outputName(val: unknown): string | null {
  if (!isObj(val)) return null;
  if (isObj(val.ColumnRef)) {
    const f = asArray(val.ColumnRef.fields);
    return stringNode(f[f.length - 1]);
  }
  if (isObj(val.TypeCast)) return outputName(val.TypeCast.arg);
  return null;
}
