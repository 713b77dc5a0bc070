// Source structures for column governance: loaded from each PostgreSQL source's own catalogs through the gateway's upstream connection, cached per source with a bounded TTL, dropped on DDL.
//
// API: `new SourceStructures({ load, ttlMs })`; `get(source)` answers the cached structure or loads it (one load per
// source at a time); `peek(sourceId)` answers a fresh cached one without loading (the wire's decision memo compares
// it); `invalidate(sourceId)` drops it — the `columns` stage calls it for every statement the classifier sees as ddl,
// and the front doors call it again when such a statement ends (docs/governance/sql.md "Source structure").
import type { RegisteredSource } from '../registry/sources.js';
import { buildStructure, STRUCTURE_QUERY, type SourceStructure, type StructureProvider, type StructureRow } from '../governance/sql/structure.js';
import type { PostgresExecutor } from './postgres-exec.js';

/** Relations read at most per load; a source past it is refused for statements with column rules (fail closed). */
export const MAX_STRUCTURE_RELATIONS = 100_000;
export const DEFAULT_STRUCTURE_TTL_MS = 30_000;

interface Entry {
  structure: SourceStructure;
  source: RegisteredSource;
  loadedAt: number;
}

interface Loading {
  promise: Promise<SourceStructure>;
  source: RegisteredSource;
}

export class SourceStructures implements StructureProvider<RegisteredSource> {
  readonly #entries = new Map<string, Entry>();
  readonly #loading = new Map<string, Loading>();
  /** Advanced by invalidate(): a load that started before it answers its callers but is not kept. */
  readonly #generation = new Map<string, number>();
  readonly #load: (source: RegisteredSource) => Promise<SourceStructure>;
  readonly #ttlMs: number;
  /** Loads done (tests read it to see the cache work). */
  loads = 0;

  constructor(opts: { load: (source: RegisteredSource) => Promise<SourceStructure>; ttlMs?: number }) {
    this.#load = opts.load;
    this.#ttlMs = opts.ttlMs ?? DEFAULT_STRUCTURE_TTL_MS;
    if (!Number.isInteger(this.#ttlMs) || this.#ttlMs < 0) throw new RangeError('ttlMs must be a non-negative integer');
  }

  peek(sourceId: string): SourceStructure | null {
    const e = this.#entries.get(sourceId);
    if (!e || Date.now() - e.loadedAt >= this.#ttlMs) return null;
    return e.structure;
  }

  current(source: RegisteredSource): SourceStructure | null {
    const e = this.#entries.get(source.source_id);
    return e && e.source === source && Date.now() - e.loadedAt < this.#ttlMs ? e.structure : null;
  }

  get(source: RegisteredSource): Promise<SourceStructure> {
    // A reconfigured source (a new registry record) may point at another database: its structure is loaded again.
    const cached = this.current(source);
    if (cached !== null) return Promise.resolve(cached);
    const running = this.#loading.get(source.source_id);
    if (running && running.source === source) return running.promise;
    const generation = this.#generation.get(source.source_id) ?? 0;
    const startedAt = Date.now();
    const promise = this.#load(source).then(
      (structure) => {
        this.loads++;
        if (this.#loading.get(source.source_id)?.promise === promise) this.#loading.delete(source.source_id);
        if ((this.#generation.get(source.source_id) ?? 0) === generation) this.#entries.set(source.source_id, { structure, source, loadedAt: startedAt });
        return structure;
      },
      (err: unknown) => {
        if (this.#loading.get(source.source_id)?.promise === promise) this.#loading.delete(source.source_id);
        throw err;
      },
    );
    this.#loading.set(source.source_id, { promise, source });
    return promise;
  }

  invalidate(sourceId: string): void {
    this.#generation.set(sourceId, (this.#generation.get(sourceId) ?? 0) + 1);
    this.#entries.delete(sourceId);
    this.#loading.delete(sourceId);
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
  const rows: StructureRow[] = result.rows.map((r) => ({
    oid: r[oid] ?? '',
    schema: r[schema] ?? '',
    name: r[name] ?? '',
    relkind: r[relkind] ?? '',
    definition: r[definition] ?? null,
    columns: r[columns] ?? null,
  }));
  return buildStructure(rows);
}
