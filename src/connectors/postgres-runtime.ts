// The process's PostgreSQL upstream runtime: one set of per-source pools and one buffered executor per composition root, shared by the wire listener, the MCP query tool and approved statements.
import { perServices, type Services } from '../runtime/services.js';
import { buildGovernanceRuntime } from '../runtime/governance.js';
import { PostgresExecutor, UpstreamPools, type UpstreamPoolDeps } from './postgres-exec.js';
import { PostgresWriteEffects } from './postgres-effects.js';
import { ManagedPrivileges } from '../privileges/runtime.js';

export interface PostgresRuntime {
  readonly pools: UpstreamPools;
  readonly executor: PostgresExecutor;
  /** Measures writes before they run, on a pool of its own (at most MEASURE_CONNECTIONS per source). */
  readonly writeEffects: PostgresWriteEffects;
  /**
   * Reads the source's catalogs (structure for column resolution, functions for the allowlist) on a pool of its own
   * (at most CATALOG_CONNECTIONS per source): a statement's decision needs them while every connection of the
   * sessions' pool may be held by open sessions, one of them the session waiting for that decision.
   */
  readonly catalog: PostgresExecutor;
  /** Managed privileges of the sources that use them (src/privileges/): reconciliation, session roles, readiness. */
  readonly privileges: ManagedPrivileges;
}

/** Connections per source for measuring writes: wire sessions holding all of pool_max must not starve it. */
const MEASURE_CONNECTIONS = 2;
/** Connections per source for catalog reads (see PostgresRuntime.catalog). */
const CATALOG_CONNECTIONS = 2;

async function createPostgresRuntime(services: Services): Promise<PostgresRuntime> {
  const governance = await buildGovernanceRuntime(services);
  const { config } = services;
  const poolDeps: UpstreamPoolDeps = {
    log: services.log.child({ component: 'pgwire-upstream' }),
    resolveSecretRef: (ref) => services.resolveSecretRef(ref),
    // Egress rules apply to SQL sources as to HTTP ones: a loopback or private upstream needs gateway.egress.allow_private_sources.
    checkTarget: (sourceId, host) => governance.egress.checkTarget(sourceId, host),
    maxMessageBytes: config.gateway.limits.pg_message_bytes,
    connectTimeoutMs: config.gateway.timeouts.upstream_connect_ms,
  };
  const pools = new UpstreamPools(poolDeps);
  // Its sessions start bounded by the estimate's timeout, so an estimate need not set it (docs/decisions/0029, TPC-B addendum).
  const measurePools = new UpstreamPools({ ...poolDeps, maxPerSource: MEASURE_CONNECTIONS, sessionTimeoutMs: (c) => c.write_risk.estimate_timeout_ms });
  services.onClose(() => pools.close());
  services.onClose(() => measurePools.close());
  const catalogPools = new UpstreamPools({ ...poolDeps, maxPerSource: CATALOG_CONNECTIONS });
  services.onClose(() => catalogPools.close());
  const measureExecutor = new PostgresExecutor(measurePools, governance.pii);
  const writeEffects = new PostgresWriteEffects(measureExecutor, services.log.child({ component: 'write-effects' }));
  const executor = new PostgresExecutor(pools, governance.pii);
  // Sources with managed privileges (docs/least-privilege.md): an identity's statements run as its managed role.
  const privileges = new ManagedPrivileges({
    reconcile: {
      db: services.db,
      resolveSecretRef: (ref) => services.resolveSecretRef(ref),
      checkTarget: (sourceId, host) => governance.egress.checkTarget(sourceId, host),
      currentPolicies: () => services.policies.current(),
      connectTimeoutMs: config.gateway.timeouts.upstream_connect_ms,
    },
    registry: services.registry,
    coord: services.coord,
    log: services.log.child({ component: 'privileges' }),
    adminAudit: services.adminAudit,
    readiness: services.readiness,
    intervalMs: config.gateway.managed_privileges.reconcile_interval_seconds * 1000,
    instanceId: services.instanceId,
  });
  const sessionRole = (source: Parameters<ManagedPrivileges['sessionRole']>[0], identityId: number) => privileges.sessionRole(source, identityId);
  executor.useSessionRoles(sessionRole);
  measureExecutor.useSessionRoles(sessionRole);
  await privileges.start();
  services.onClose(() => privileges.close());
  return { pools, executor, writeEffects, catalog: new PostgresExecutor(catalogPools, governance.pii), privileges };
}

/** Built once per services: two front doors with their own pools would each hold up to `pool_max` connections to the same source. */
export const postgresRuntimeFor: (services: Services) => Promise<PostgresRuntime> = perServices(createPostgresRuntime);
