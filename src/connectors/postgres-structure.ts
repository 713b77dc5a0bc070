// Source structures for column governance: loaded from each PostgreSQL source's own catalogs through the gateway's upstream connection, cached per source with a bounded TTL, dropped on DDL.
//
// API: `new SourceStructures({ load, ttlMs })`; `get(source)` answers the cached structure or loads it (one load per
// source at a time); `peek(sourceId)` answers a fresh cached one without loading (the wire's decision memo compares
// it); `invalidate(sourceId)` drops it — the `columns` stage calls it for every statement the classifier sees as ddl,
// and the front doors call it again when such a statement ends (docs/governance/sql.md "Source structure").
import type { RegisteredSource } from '../registry/sources.js';
import { buildStructure, STRUCTURE_QUERY, type SourceStructure, type StructureProvider, type StructureRow } from '../governance/sql/structure.js';
import type { PostgresExecutor } from './postgres-exec.js';
import { PerSourceCache } from './source-cache.js';

/** Relations read at most per load; a source past it is refused for statements with column rules (fail closed). */
export const MAX_STRUCTURE_RELATIONS = 100_000;
export const DEFAULT_STRUCTURE_TTL_MS = 30_000;

/** The source structures of column governance: the per-source cache of a SourceStructure. */
export class SourceStructures extends PerSourceCache<SourceStructure> implements StructureProvider<RegisteredSource> {
  constructor(opts: { load: (source: RegisteredSource) => Promise<SourceStructure>; ttlMs?: number }) {
    super({ load: opts.load, ttlMs: opts.ttlMs ?? DEFAULT_STRUCTURE_TTL_MS });
  }
}

/** Reads the structure with the source's own login (never an agent's mapped role): every relation, column and view definition. */
export async function loadPostgresStructure(executor: PostgresExecutor, source: RegisteredSource): Promise<SourceStructure> {
  const result = await executor.executeSql({ source, identity: { mapped_pg_role: null }, sql: STRUCTURE_QUERY, params: [], maxRows: MAX_STRUCTURE_RELATIONS });
  if (result.truncated) throw new Error(`the source has more than ${MAX_STRUCTURE_RELATIONS} relations`);
  const at = (name: string) => {
    const i = result.columns.indexOf(name);
    if (i < 0) throw new Error(`the structure query answered no ${name} column`);
    return i;
  };
  const [oid, schema, name, relkind, definition, columns] = ['oid', 'schema', 'name', 'relkind', 'definition', 'columns'].map(at) as [number, number, number, number, number, number];
  const parents = result.columns.indexOf('parents');
  const rows: StructureRow[] = result.rows.map((r) => ({
    oid: r[oid] ?? '',
    schema: r[schema] ?? '',
    name: r[name] ?? '',
    relkind: r[relkind] ?? '',
    definition: r[definition] ?? null,
    columns: r[columns] ?? null,
    parents: parents < 0 ? null : (r[parents] ?? null),
  }));
  return buildStructure(rows);
}
