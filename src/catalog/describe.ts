// What `describe_source` shows of a captured catalog (pure): only the relations the identity's SQL rules name and the operations its HTTP rules allow; structure only.
import { compileGlobs, GLOB_SEP } from '../governance/policy/glob.js';
import { joinName } from '../governance/sql/names.js';
import type { CatalogStructure } from './model.js';

export interface VisibleRules {
  readonly sqlTables: readonly string[];
  readonly http: ReadonlyArray<{ readonly methods: readonly string[]; readonly paths: readonly string[] }>;
}

export interface VisibleCatalog {
  readonly kind: CatalogStructure['kind'];
  readonly truncated_by: string | null;
  readonly relations: ReadonlyArray<{ schema: string; name: string; kind: string; columns: ReadonlyArray<{ name: string; type: string; nullable: boolean }>; primary_key: readonly string[] | null }>;
  readonly operations: ReadonlyArray<{ method: string; path: string; parameters: readonly string[]; response_properties: readonly string[] }>;
  /** Objects of the catalog the identity's rules do not name (counted, never listed). */
  readonly hidden: number;
}

/** The part of a structure an identity may see; a relation no rule of its roles names is left out (and counted). */
export function visibleCatalog(structure: CatalogStructure, rules: VisibleRules): VisibleCatalog {
  const tables = compileGlobs(rules.sqlTables, GLOB_SEP.table);
  const relations = structure.relations
    .filter((r) => tables(joinName(r.schema, r.name)))
    .map((r) => ({ schema: r.schema, name: r.name, kind: r.kind, columns: r.columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable })), primary_key: r.primary_key }));
  const httpRules = rules.http.map((h) => ({ methods: new Set(h.methods), paths: compileGlobs([...h.paths], GLOB_SEP.path) }));
  const operations = structure.operations
    .filter((o) => httpRules.some((h) => (h.methods.has('*') || h.methods.has(o.method)) && h.paths(o.path)))
    .map((o) => ({ method: o.method, path: o.path, parameters: o.parameters, response_properties: o.response_properties }));
  const hidden = structure.relations.length - relations.length + structure.operations.length - operations.length;
  return { kind: structure.kind, truncated_by: structure.truncated_by, relations, operations, hidden };
}
