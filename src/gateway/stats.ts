// GET /stats on the gateway: cache counters, active connections, registered sources, circuits and audit depth; authenticated unless observability.public_stats_enabled.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticateAdminToken } from '../admin/auth/tokens.js';
import { GatehouseError } from '../errors/registry.js';
import { StoreUnavailableError } from '../store/errors.js';
import type { Services } from '../runtime/services.js';
import type { GovernanceRuntime } from '../runtime/governance.js';
import { postgresRuntimeFor } from '../connectors/postgres-runtime.js';

/**
 * The gateway's statistics gate (/stats, /metrics): open with observability.public_stats_enabled, else an admin API
 * token, or an agent key, since agents may watch their own gateway's health.
 */
export async function authorizeStats(services: Services, governance: GovernanceRuntime, req: FastifyRequest): Promise<void> {
  if (services.config.observability.public_stats_enabled) return;
  const header = req.headers.authorization;
  const token = header?.startsWith('Bearer ') ? header.slice(7).trim() : '';
  // A lost control store is 503 (spec §7), not a refused token.
  const admin = token.startsWith('gha_') ? await authenticateAdminToken(services.db, token).catch((err: unknown) => {
    if (err instanceof StoreUnavailableError) throw new GatehouseError('unavailable', undefined, { cause: err });
    return null;
  }) : null;
  if (!admin) await governance.deps.authenticate(header);
}

export function registerStatsRoute(app: FastifyInstance, services: Services, governance: GovernanceRuntime): { activeConnections(): number } {
  let active = 0;
  app.server.on('connection', (socket) => {
    active += 1;
    socket.once('close', () => {
      active -= 1;
    });
  });

  app.get('/stats', async (req) => {
    await authorizeStats(services, governance, req);
    const sources = services.registry.list();
    // The PostgreSQL sources' connection pools of this process (wire sessions, MCP query, approvals): size and waits.
    const postgres = await postgresRuntimeFor(services);
    return {
      upstream_pools: postgres.pools.stats(),
      cache: governance.cache.stats(),
      connections: { active },
      sources: { registered: sources.length, enabled: sources.filter((s) => s.enabled).length },
      circuits: governance.circuits.states(),
      audit: services.audit.stats(),
      policies: { version: services.policies.version() },
    };
  });
  return { activeConnections: () => active };
}
