// The structure of one SQL source as column governance sees it: relations by name and OID, their columns, and view definitions.
//
// API (pure; connectors/postgres-structure.ts loads it from the source's own catalogs):
// - `buildStructure(rows, version)` builds one immutable SourceStructure from catalog rows (STRUCTURE_QUERY's shape).
// - `structure.lookup(schema | null, name)` resolves a relation name as the upstream session does: an unqualified name
//   is looked up in pg_catalog first, then in DEFAULT_SCHEMA (the search_path every upstream session is pinned to).
// - `structure.byOid(oid)` maps RowDescription's table OID back to a relation; `relation.columns` are in attnum order.
// - `structure.version` changes with every load: analyses cached against a structure are cached per version.
import { DEFAULT_SCHEMA } from './types.js';
import { joinName } from './names.js';

export type RelationKind = 'table' | 'view' | 'matview' | 'foreign' | 'partitioned';

export interface StructureColumn {
  readonly name: string;
  readonly attnum: number;
}

export interface StructureRelation {
  readonly oid: number;
  readonly schema: string;
  readonly name: string;
  /** `schema.name`, the form policies and audit entries use. */
  readonly qualified: string;
  readonly kind: RelationKind;
  /** Visible columns (attnum > 0, not dropped), in attnum order. */
  readonly columns: readonly StructureColumn[];
  /** The view's or materialized view's query (pg_get_viewdef), null for other kinds. */
  readonly definition: string | null;
}

/** One row of the catalog query: the adapter hands them over as text values, as PostgreSQL sends them. */
export interface StructureRow {
  readonly oid: string;
  readonly schema: string;
  readonly name: string;
  /** pg_class.relkind: r, v, m, f, p. */
  readonly relkind: string;
  readonly definition: string | null;
  /** JSON array of [attnum, attname] pairs. */
  readonly columns: string | null;
}

const KINDS: Readonly<Record<string, RelationKind>> = { r: 'table', v: 'view', m: 'matview', f: 'foreign', p: 'partitioned' };

/**
 * The relations a statement may name: tables, views, materialized views, foreign and partitioned tables of every
 * schema but the TOAST and temporary ones. One row per relation; columns as a JSON array so that a catalog with many
 * columns stays one row per relation.
 */
export const STRUCTURE_QUERY = `select c.oid::text as oid, n.nspname as schema, c.relname as name, c.relkind::text as relkind,
  case when c.relkind in ('v', 'm') then pg_catalog.pg_get_viewdef(c.oid) end as definition,
  (select pg_catalog.json_agg(pg_catalog.json_build_array(a.attnum, a.attname) order by a.attnum)
     from pg_catalog.pg_attribute a where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped)::text as columns
from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'v', 'm', 'f', 'p')
  and n.nspname <> 'pg_toast' and n.nspname not like 'pg\\_temp\\_%' and n.nspname not like 'pg\\_toast\\_temp\\_%'`;

/** Where the decision stages get a source's structure (connectors/postgres-structure.ts implements it). */
export interface StructureProvider<S extends { readonly source_id: string } = { readonly source_id: string }> {
  /** The cached structure while fresh and loaded for this very source record, else null (no I/O). */
  current(source: S): SourceStructure | null;
  /** The cached structure, or a load (one per source at a time); rejects when it cannot be read. */
  get(source: S): Promise<SourceStructure>;
  /** A fresh cached structure by source id, without loading. */
  peek(sourceId: string): SourceStructure | null;
  /** Drops the cached structure (DDL went through the gateway). */
  invalidate(sourceId: string): void;
  /**
   * Loads the structure again when the cached one is older than `minAgeMs` (a relation it lacks may have been created
   * outside the gateway since); otherwise answers the cached one. The age bound keeps a name that never exists from
   * reloading the catalog per statement.
   */
  refresh(source: S, minAgeMs: number): Promise<SourceStructure>;
}

export class StructureError extends Error {
  readonly code = 'structure_invalid';
}

let nextVersion = 1;

export class SourceStructure {
  readonly version: number;
  readonly #byName = new Map<string, StructureRelation>();
  readonly #byOid = new Map<number, StructureRelation>();
  readonly defaultSchema: string;

  constructor(relations: readonly StructureRelation[], defaultSchema = DEFAULT_SCHEMA) {
    this.version = nextVersion++;
    this.defaultSchema = defaultSchema;
    for (const r of relations) {
      this.#byName.set(r.qualified, r);
      this.#byOid.set(r.oid, r);
    }
  }

  get size(): number {
    return this.#byOid.size;
  }

  /** As PostgreSQL resolves it with search_path = DEFAULT_SCHEMA: pg_catalog is searched first (it always is). */
  lookup(schema: string | null, name: string): StructureRelation | null {
    if (schema !== null && schema !== '') return this.#byName.get(joinName(schema, name)) ?? null;
    return this.#byName.get(joinName('pg_catalog', name)) ?? this.#byName.get(joinName(this.defaultSchema, name)) ?? null;
  }

  /** The qualified name an unqualified reference would get when the relation is not known (for messages and policies). */
  qualify(schema: string | null, name: string): string {
    if (schema !== null && schema !== '') return joinName(schema, name);
    return this.lookup(null, name)?.qualified ?? joinName(name.startsWith('pg_') ? 'pg_catalog' : this.defaultSchema, name);
  }

  byOid(oid: number): StructureRelation | null {
    return this.#byOid.get(oid) ?? null;
  }
}

function parseColumns(text: string | null, rel: string): StructureColumn[] {
  if (text === null || text === '') return [];
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new StructureError(`columns of ${rel} are not valid JSON`);
  }
  if (!Array.isArray(raw)) throw new StructureError(`columns of ${rel} are not a list`);
  const out: StructureColumn[] = [];
  for (const pair of raw) {
    if (!Array.isArray(pair) || typeof pair[0] !== 'number' || typeof pair[1] !== 'string') throw new StructureError(`a column of ${rel} is malformed`);
    out.push(Object.freeze({ attnum: pair[0], name: pair[1] }));
  }
  out.sort((a, b) => a.attnum - b.attnum);
  return out;
}

/** Builds a structure from the catalog query's rows; a malformed row fails the whole load (the caller fails closed). */
export function buildStructure(rows: readonly StructureRow[], defaultSchema = DEFAULT_SCHEMA): SourceStructure {
  const relations: StructureRelation[] = [];
  for (const row of rows) {
    const kind = KINDS[row.relkind];
    const oid = Number(row.oid);
    if (kind === undefined || !Number.isSafeInteger(oid)) throw new StructureError(`relation ${row.schema}.${row.name} has an unexpected kind or OID`);
    const qualified = joinName(row.schema, row.name);
    relations.push(
      Object.freeze({
        oid,
        schema: row.schema,
        name: row.name,
        qualified,
        kind,
        columns: Object.freeze(parseColumns(row.columns, qualified)),
        definition: kind === 'view' || kind === 'matview' ? row.definition : null,
      }),
    );
  }
  return new SourceStructure(relations, defaultSchema);
}
