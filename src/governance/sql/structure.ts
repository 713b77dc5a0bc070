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
import type { PathResolution } from './search-path.js';

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
  /**
   * Qualified names of the tables it inherits from or is a partition of, transitively (pg_inherits): a partition's or
   * child's column holds data of its ancestors' column of the same name, so a rule on `s.parent.c` covers `s.child.c`.
   */
  readonly ancestors: readonly string[];
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
  /** JSON array of the OIDs (as text) of its direct parents in pg_inherits (inheritance and partitioning); null for none. */
  readonly parents?: string | null;
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
     from pg_catalog.pg_attribute a where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped)::text as columns,
  (select pg_catalog.json_agg(i.inhparent::text order by i.inhseqno) from pg_catalog.pg_inherits i where i.inhrelid = c.oid)::text as parents
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
  readonly #byName: Map<string, StructureRelation>;
  readonly #byOid: Map<number, StructureRelation>;
  readonly defaultSchema: string;
  /** The structure as loaded (search_path = DEFAULT_SCHEMA): what view definitions are read against. */
  readonly base: SourceStructure;
  readonly #path: PathResolution | null;
  readonly #forPath = new Map<string, SourceStructure>();

  constructor(relations: readonly StructureRelation[], defaultSchema = DEFAULT_SCHEMA, from?: { base: SourceStructure; byName: Map<string, StructureRelation>; byOid: Map<number, StructureRelation>; path: PathResolution }) {
    this.defaultSchema = defaultSchema;
    if (from !== undefined) {
      this.version = from.base.version;
      this.base = from.base;
      this.#byName = from.byName;
      this.#byOid = from.byOid;
      this.#path = from.path;
      return;
    }
    this.version = nextVersion++;
    this.base = this;
    this.#path = null;
    this.#byName = new Map();
    this.#byOid = new Map();
    for (const r of relations) {
      this.#byName.set(r.qualified, r);
      this.#byOid.set(r.oid, r);
    }
  }

  get size(): number {
    return this.#byOid.size;
  }

  /**
   * The same relations with unqualified names looked up along a session's path (governance/sql/search-path.ts), one
   * object per path (analyses are memoised per structure object). Null: this structure's own default.
   */
  forPath(path: PathResolution | null | undefined): SourceStructure {
    if (path === null || path === undefined) return this.base;
    const base = this.base;
    let s = base.#forPath.get(path.key);
    if (s === undefined) {
      s = new SourceStructure([], path.schemas[0] ?? base.defaultSchema, { base, byName: base.#byName, byOid: base.#byOid, path });
      if (base.#forPath.size > 64) base.#forPath.clear();
      base.#forPath.set(path.key, s);
    }
    return s;
  }

  /** As PostgreSQL resolves it: pg_catalog first (unless the path lists a schema before it), then the path's schemas. */
  lookup(schema: string | null, name: string): StructureRelation | null {
    if (schema !== null && schema !== '') return this.#byName.get(joinName(schema, name)) ?? null;
    const path = this.#path;
    if (path === null) return this.#byName.get(joinName('pg_catalog', name)) ?? this.#byName.get(joinName(this.defaultSchema, name)) ?? null;
    if (path.catalogFirst) {
      const c = this.#byName.get(joinName('pg_catalog', name));
      if (c !== undefined) return c;
    }
    for (const s of path.schemas) {
      const r = this.#byName.get(joinName(s, name));
      if (r !== undefined) return r;
    }
    return path.catalogFirst ? null : (this.#byName.get(joinName('pg_catalog', name)) ?? null);
  }

  /**
   * The other relations an unqualified name may denote under the path, as qualified names: with one path, those of
   * the schemas searched before the one the structure found (one created there since the structure was loaded would
   * win); with several possible paths, every other schema. Their same-named columns are treated as read too, so a
   * redaction or column rule on any of them applies (docs/pgwire.md "search_path"). Empty without a path.
   */
  shadows(name: string, found: StructureRelation | null): string[] {
    const path = this.#path;
    if (path === null) return [];
    const out: string[] = [];
    for (const s of path.schemas) {
      if (found !== null && s === found.schema) {
        if (path.precise) break;
        continue;
      }
      out.push(joinName(s, name));
    }
    return out;
  }

  /** The qualified name an unqualified reference would get when the relation is not known (for messages and policies). */
  qualify(schema: string | null, name: string): string {
    if (schema !== null && schema !== '') return joinName(schema, name);
    const catalog = name.startsWith('pg_') && (this.#path?.catalogFirst ?? true);
    return this.lookup(null, name)?.qualified ?? joinName(catalog ? 'pg_catalog' : this.defaultSchema, name);
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

function parseParents(text: string | null | undefined, rel: string): number[] {
  if (text === null || text === undefined || text === '') return [];
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new StructureError(`parents of ${rel} are not valid JSON`);
  }
  if (!Array.isArray(raw) || raw.some((x) => typeof x !== 'string' || !/^[0-9]+$/.test(x))) throw new StructureError(`parents of ${rel} are malformed`);
  return raw.map(Number);
}

/** Builds a structure from the catalog query's rows; a malformed row fails the whole load (the caller fails closed). */
export function buildStructure(rows: readonly StructureRow[], defaultSchema = DEFAULT_SCHEMA): SourceStructure {
  const base: Array<Omit<StructureRelation, 'ancestors'> & { parents: number[] }> = [];
  for (const row of rows) {
    const kind = KINDS[row.relkind];
    const oid = Number(row.oid);
    if (kind === undefined || !Number.isSafeInteger(oid)) throw new StructureError(`relation ${row.schema}.${row.name} has an unexpected kind or OID`);
    const qualified = joinName(row.schema, row.name);
    base.push({
      oid,
      schema: row.schema,
      name: row.name,
      qualified,
      kind,
      columns: Object.freeze(parseColumns(row.columns, qualified)),
      definition: kind === 'view' || kind === 'matview' ? row.definition : null,
      parents: parseParents(row.parents, qualified),
    });
  }
  const byOid = new Map(base.map((r) => [r.oid, r]));
  const ancestorsOf = (r: (typeof base)[number]): string[] => {
    const out: string[] = [];
    const seen = new Set<number>([r.oid]);
    const queue = [...r.parents];
    while (queue.length > 0) {
      const oid = queue.shift()!;
      if (seen.has(oid)) continue;
      seen.add(oid);
      const p = byOid.get(oid);
      if (p === undefined) continue;
      out.push(p.qualified);
      queue.push(...p.parents);
    }
    return out;
  };
  const relations: StructureRelation[] = base.map(({ parents: _parents, ...r }) => Object.freeze({ ...r, ancestors: Object.freeze(r.kind === 'view' || r.kind === 'matview' ? [] : ancestorsOf({ ...r, parents: _parents })) }));
  return new SourceStructure(relations, defaultSchema);
}
