// What one source's own catalog says about the allowlisted calls: names it shadows, built-ins it lacks or marks more volatile. Narrows, never widens.
import { BUILTIN_FUNCTION_FAMILIES, familyOf, VOLATILITY_RANK, type CallInfo, type Volatility } from './allowlist.js';

/** One pg_proc row (or pg_operator / pg_type row, with volatility null) of a name the allowlist knows. */
export interface CatalogCallRow {
  readonly kind: 'function' | 'operator' | 'cast';
  readonly name: string;
  /** Whether the object lives in pg_catalog. */
  readonly builtin: boolean;
  /** pg_proc.provolatile for functions; null for operators and types. */
  readonly volatility: string | null;
}

/** The per-source verdict on calls the built-in allowlist lets through. */
export interface CallTrust {
  /** False when the source's catalog gives a reason to doubt an allowlisted call; refused calls are never trusted here. */
  trusted(call: CallInfo): boolean;
  /** The names of the source doubts, for logs and tests. */
  readonly doubted: ReadonlySet<string>;
}

/** For a gateway without a source catalog (the policy dry-run): the allowlist alone decides. */
export const TRUST_ALLOWLIST: CallTrust = Object.freeze({ trusted: (c: CallInfo) => c.refusal === null, doubted: new Set<string>() });

function volatility(v: string | null): Volatility | null {
  return v === 'i' || v === 's' || v === 'v' ? v : null;
}

/**
 * Builds a source's trust from its catalog rows for the allowlisted names:
 * - a function name also defined outside pg_catalog could be the one PostgreSQL picks (overload resolution weighs all
 *   schemas of search_path by argument types, so `public.length(integer)` wins over a cast to text): doubted in every
 *   spelling, because `pg_catalog.length` is safe but the name is then better spelled out by a role rule;
 * - a built-in whose pg_catalog overloads include one more volatile than its family allows (or an unknown class), or
 *   that pg_catalog does not have at all, is not the function the allowlist describes: doubted;
 * - an operator symbol or cast type also defined outside pg_catalog: doubted (an unqualified operator resolves like a
 *   function; a type of the same name is a sign of a catalog someone is shaping).
 */
export function callTrustFromCatalog(rows: readonly CatalogCallRow[]): CallTrust {
  const doubted = new Set<string>();
  const seenBuiltin = new Set<string>();
  for (const r of rows) {
    const key = `${r.kind}:${r.name}`;
    if (!r.builtin) {
      doubted.add(key);
      continue;
    }
    seenBuiltin.add(key);
    if (r.kind !== 'function') continue;
    const family = familyOf(r.name);
    // A name the allowlist does not hold is refused anyway; the catalog has nothing to narrow there.
    if (family === undefined) continue;
    const max = BUILTIN_FUNCTION_FAMILIES[family]?.volatility;
    const v = volatility(r.volatility);
    if (max === undefined || v === null || VOLATILITY_RANK[v] > VOLATILITY_RANK[max]) doubted.add(key);
  }
  for (const f of Object.values(BUILTIN_FUNCTION_FAMILIES)) {
    for (const n of f.names) if (!seenBuiltin.has(`function:${n}`)) doubted.add(`function:${n}`);
  }
  return Object.freeze({
    trusted: (c: CallInfo) => c.refusal === null && !doubted.has(`${c.kind}:${c.base}`),
    doubted,
  });
}
