// Deny-by-default calls (docs/governance/sql.md "Functions: deny by default"): statements nothing can allow, and the calls a role rule must name.
import { GatehouseError } from '../errors/registry.js';
import type { SqlClassified } from '../governance/sql/index.js';
import { UNCALLABLE_TRAPS } from '../governance/sql/allowlist.js';
import type { GovernedRequest, PipelineDeps } from './context.js';

export function refuseUncallable(req: GovernedRequest, sql: SqlClassified): void {
  for (const trap of sql.traps) {
    const message = UNCALLABLE_TRAPS.get(trap);
    if (message === undefined) continue;
    req.audit.addReason(`${trap} refused`);
    throw new GatehouseError('forbidden', message);
  }
}

/**
 * The calls a role rule must name: those outside the built-in allowlist, and those the source's own catalog doubts
 * (connectors/postgres-calls.ts). The catalog is read only when an allowlisted call is there to doubt.
 */
export async function untrustedCalls(req: GovernedRequest, sql: SqlClassified, deps: PipelineDeps): Promise<string[]> {
  const out = new Set<string>();
  let allowlisted = false;
  for (const c of sql.calls) {
    if (c.refusal !== null) out.add(c.name);
    else allowlisted = true;
  }
  if (allowlisted && deps.callTrust && req.source?.source_type === 'postgres') {
    const trust = await deps.callTrust(req.source);
    for (const c of sql.calls) if (!trust.trusted(c)) out.add(c.name);
  }
  return [...out];
}
