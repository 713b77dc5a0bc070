// Per-source call trust read from the source's own pg_proc, pg_operator and pg_type, cached per source: it narrows the built-in allowlist, never widens it.
import { BUILTIN_CAST_TYPES, BUILTIN_FUNCTION_FAMILIES, BUILTIN_OPERATORS } from '../governance/sql/allowlist.js';
import { callTrustFromCatalog, type CallTrust, type CatalogCallRow } from '../governance/sql/source-calls.js';
import type { RegisteredSource } from '../registry/sources.js';
import type { PostgresExecutor } from './postgres-exec.js';

const FUNCTION_NAMES = [...new Set(Object.values(BUILTIN_FUNCTION_FAMILIES).flatMap((f) => f.names))];

/**
 * Every allowlisted function name wherever it is defined (with its volatility), and operator symbols and type names of
 * the allowlist defined outside pg_catalog. Names are passed as parameters; nothing of the agent's statement is in it.
 */
const CATALOG_SQL = `
select 'function' as kind, p.proname as name, (p.pronamespace = 'pg_catalog'::regnamespace)::text as builtin, p.provolatile::text as volatility
  from pg_catalog.pg_proc p where p.proname = any($1::text[])
union all
select distinct 'operator', o.oprname, 'false', null
  from pg_catalog.pg_operator o where o.oprnamespace <> 'pg_catalog'::regnamespace and o.oprname = any($2::text[])
union all
select distinct 'cast', t.typname, 'false', null
  from pg_catalog.pg_type t where t.typnamespace <> 'pg_catalog'::regnamespace and t.typname = any($3::text[])`;

/** Rows at most: every pg_catalog overload of ~400 names is well under it; a catalog above it is not trusted whole. */
const MAX_ROWS = 20_000;

function pgArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(',')}}`;
}

const PARAMS = [pgArray(FUNCTION_NAMES), pgArray([...BUILTIN_OPERATORS]), pgArray([...BUILTIN_CAST_TYPES])];

export interface SourceCallCatalogOptions {
  /** How long one read of a source's catalog is used. A function created through the gateway (DDL) drops it at once. */
  readonly ttlMs?: number;
  readonly now?: () => number;
}

interface Entry {
  readonly source: RegisteredSource;
  readonly at: number;
  readonly trust: Promise<CallTrust>;
}

/** One read per source and TTL, shared by every statement and session; a failed read is not kept. */
export class SourceCallCatalog {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #now: () => number;
  /** Catalog reads made (tests and metrics). */
  reads = 0;

  constructor(private readonly executor: () => Promise<PostgresExecutor>, options: SourceCallCatalogOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#now = options.now ?? Date.now;
  }

  /** The source's trust, read when missing, stale, or the registry's source record changed (reconfigured). */
  trustFor(source: RegisteredSource): Promise<CallTrust> {
    const hit = this.#entries.get(source.source_id);
    if (hit && hit.source === source && this.#now() - hit.at < this.#ttlMs) return hit.trust;
    const trust = this.#read(source);
    const entry: Entry = { source, at: this.#now(), trust };
    this.#entries.set(source.source_id, entry);
    trust.catch(() => {
      if (this.#entries.get(source.source_id) === entry) this.#entries.delete(source.source_id);
    });
    return trust;
  }

  /** After DDL through the gateway: the next statement reads the catalog again. */
  invalidate(sourceId: string): void {
    this.#entries.delete(sourceId);
  }

  async #read(source: RegisteredSource): Promise<CallTrust> {
    this.reads++;
    const executor = await this.executor();
    const result = await executor.executeSql({ source, identity: { mapped_pg_role: null }, sql: CATALOG_SQL, params: PARAMS, maxRows: MAX_ROWS });
    // A catalog too large to read whole cannot vouch for anything: every allowlisted name is doubted.
    if (result.truncated) return callTrustFromCatalog([]);
    const rows: CatalogCallRow[] = [];
    for (const [kind, name, builtin, volatility] of result.rows) {
      if ((kind !== 'function' && kind !== 'operator' && kind !== 'cast') || typeof name !== 'string') continue;
      rows.push({ kind, name, builtin: builtin === 'true', volatility: volatility ?? null });
    }
    return callTrustFromCatalog(rows);
  }
}
