// Per-source call trust read from the source's own pg_proc, pg_operator and pg_type (cached per source in a PerSourceCache): it narrows the built-in allowlist, never widens it.
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

/** How long one read of a source's catalog is used; a statement allowed as ddl or admin drops it at once. */
export const DEFAULT_CALL_TRUST_TTL_MS = 60_000;

/** Reads the source's call trust with the source's own login (never an agent's mapped role). */
export async function loadCallTrust(executor: PostgresExecutor, source: RegisteredSource): Promise<CallTrust> {
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
