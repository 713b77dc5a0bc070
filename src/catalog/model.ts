// The catalog's data model (pure): a captured structure, its node paths, and PostgreSQL-style quoting of path segments (docs/catalog.md).

import { joinName } from '../governance/sql/names.js';

export type RelationKind = 'table' | 'view' | 'matview' | 'partitioned' | 'foreign';
export type ObjectType = 'schema' | RelationKind | 'column' | 'operation';

/** Which cap ended a scan early (spec §8 "catalog caps"). */
export type CapName = 'max_nodes' | 'max_schemas' | 'max_tables' | 'max_columns_per_table';

export interface CatalogColumn {
  readonly name: string;
  /** format_type(atttypid, atttypmod): `character varying(40)`, `integer[]`. */
  readonly type: string;
  readonly nullable: boolean;
  readonly has_default: boolean;
  /** pg_attribute.attnum: stable across renames within its relation (absent in snapshots taken before it was captured). */
  readonly attnum?: number;
}

export interface ForeignKey {
  readonly name: string;
  readonly columns: readonly string[];
  readonly references: { readonly schema: string; readonly table: string; readonly columns: readonly string[] };
}

export interface CatalogRelation {
  /** pg_class.oid as text: the relation's identity across renames and schema moves (absent in older snapshots). */
  readonly oid?: string;
  readonly schema: string;
  readonly name: string;
  readonly kind: RelationKind;
  /** For a partition: the qualified path of its partitioned parent. */
  readonly partition_of: string | null;
  readonly columns: readonly CatalogColumn[];
  readonly primary_key: readonly string[] | null;
  readonly foreign_keys: readonly ForeignKey[];
  /** False when a cap cut its columns: a column missing from it is unknown, not removed. */
  readonly complete: boolean;
}

export interface CatalogSchema {
  /** pg_namespace.oid as text (absent in older snapshots). */
  readonly oid?: string;
  readonly name: string;
  /** False when a cap cut its relations: a relation missing from it is unknown, not removed. */
  readonly complete: boolean;
}

/** An HTTP operation of an OpenAPI document: `GET /users/{id}`, its parameters and response property names. */
export interface CatalogOperation {
  readonly method: string;
  readonly path: string;
  readonly parameters: readonly string[];
  readonly response_properties: readonly string[];
}

/** One scan's result. `complete` at each level says what a diff may call removed (spec §8: nothing unreached is). */
export interface CatalogStructure {
  readonly kind: 'sql' | 'openapi';
  readonly schemas: readonly CatalogSchema[];
  /** False when max_schemas or max_nodes cut the schema list. */
  readonly schemas_complete: boolean;
  readonly relations: readonly CatalogRelation[];
  readonly operations: readonly CatalogOperation[];
  readonly truncated_by: CapName | null;
  readonly node_count: number;
}

const PLAIN = /^[a-z_][a-z0-9_$]*$/;

/** One path segment as PostgreSQL's quote_ident would write it: plain lower-case names bare, the rest in double quotes. */
export function quoteSegment(name: string): string {
  return PLAIN.test(name) ? name : `"${name.replaceAll('"', '""')}"`;
}

/** `schema`, `schema.table` or `schema.table.column`, each segment quoted when it must be. */
export function pathOf(...segments: readonly string[]): string {
  return segments.map(quoteSegment).join('.');
}

/**
 * Splits a path the way PostgreSQL reads a qualified name: quoted segments keep case, dots and `""`; unquoted ones
 * are folded to lower case. Null when it is not a well-formed name of 1 to 3 segments.
 */
export function parsePath(text: string): string[] | null {
  const out: string[] = [];
  let i = 0;
  while (i <= text.length) {
    if (text[i] === '"') {
      let seg = '';
      i += 1;
      for (;;) {
        if (i >= text.length) return null;
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            seg += '"';
            i += 2;
            continue;
          }
          i += 1;
          break;
        }
        seg += text[i];
        i += 1;
      }
      if (seg === '') return null;
      out.push(seg);
    } else {
      const end = text.indexOf('.', i);
      const raw = end < 0 ? text.slice(i) : text.slice(i, end);
      if (raw === '' || raw.includes('"') || /\s/.test(raw)) return null;
      out.push(raw.toLowerCase());
      i = end < 0 ? text.length : end;
    }
    if (i === text.length) break;
    if (text[i] !== '.') return null;
    i += 1;
    if (i === text.length) return null;
  }
  return out.length >= 1 && out.length <= 3 ? out : null;
}

/** The name the governance core uses for a column (`schema.table.column`; a part holding `.` or `"` quoted: governance/sql/names.ts). */
export function governedColumn(schema: string, table: string, column: string): string {
  return joinName(schema, table, column);
}

export function emptyStructure(kind: CatalogStructure['kind']): CatalogStructure {
  return { kind, schemas: [], schemas_complete: true, relations: [], operations: [], truncated_by: null, node_count: 0 };
}
