// The governance runtime of a gateway or admin process: built once, it gives every front door (and approval execution) the same pipeline dependencies.
import { ttlCache } from '../util/ttl-cache.js';
import { initSqlParser, SqlClassifier } from '../governance/sql/index.js';
import { createPiiScanner, piiOptionsFromConfig, type PiiScanner } from '../governance/pii/index.js';
import { RateLimiter } from '../ratelimit/limiter.js';
import { createEgressDispatcher, type EgressDispatcher } from '../egress/agent.js';
import { CircuitRegistry } from '../egress/circuit.js';
import { SourceGenerations, storeDurableGenerations } from '../cache/generations.js';
import { GovernedCache } from '../cache/governed-cache.js';
import { agentAuthenticator, startKeySessionMemo, type AgentIdentity } from '../identity/index.js';
import { loadSourceRoleContext } from '../store/repos/grants.js';
import { PayloadCipher } from '../approvals/crypto.js';
import { ApprovalIntake } from '../approvals/queue.js';
import { notifierFor } from '../notify/index.js';
import { DEFAULT_CALL_TRUST_TTL_MS, loadCallTrust } from '../connectors/postgres-calls.js';
import { PerSourceCache } from '../connectors/source-cache.js';
import type { CallTrust } from '../governance/sql/source-calls.js';
import type { HttpPipelineDeps } from '../pipeline/http.js';
import type * as PostgresRuntimeModule from '../connectors/postgres-runtime.js';
import { perServices, type Services } from './services.js';
import { loadPostgresStructure, SourceStructures } from '../connectors/postgres-structure.js';
import { catalogEventsFor, catalogGovernanceFor } from '../catalog/runtime.js';
import type { RoleContext, WriteEffectPort } from '../pipeline/context.js';

export interface GovernanceRuntime {
  readonly pii: PiiScanner;
  readonly sql: SqlClassifier;
  readonly rateLimiter: RateLimiter;
  readonly egress: EgressDispatcher;
  readonly circuits: CircuitRegistry;
  readonly generations: SourceGenerations;
  readonly cache: GovernedCache;
  readonly cipher: PayloadCipher;
  /** The dependencies of the HTTP pipeline (a superset of what the SQL front doors need). */
  readonly deps: HttpPipelineDeps;
}

/** Role contexts by identity, source and grant version: any grant or role change advances the version, so a cached context is never stale. */
function cachedRoleContexts(services: Services): (identity: AgentIdentity, sourceId: string) => RoleContext | Promise<RoleContext> {
  const cache = ttlCache<string, RoleContext>({ max: 10_000, ttl: 30_000 });
  const load = async (identity: AgentIdentity, sourceId: string, key: string): Promise<RoleContext> => {
    const loaded = await loadSourceRoleContext(services.db, identity.id, sourceId);
    const ctx: RoleContext = loaded ? { grants: loaded.grants, roles: loaded.roles } : { grants: [], roles: [] };
    // Only cache what was read at the version the request carries; a newer read says the identity's key session is behind.
    if (!loaded || loaded.grant_version === identity.grant_version) cache.set(key, ctx);
    return ctx;
  };
  return (identity, sourceId) => {
    const key = `${identity.id}\u0000${sourceId}\u0000${identity.grant_version}`;
    return cache.get(key) ?? load(identity, sourceId, key);
  };
}

let postgresRuntimeModule: Promise<typeof PostgresRuntimeModule> | undefined;

/**
 * The process's PostgreSQL runtime; its module is imported when first used, as it is built on this runtime (a static
 * import would be a cycle). The import is made once: every `import()` resolves its specifier again, which each measured
 * write paid (docs/decisions/0029, TPC-B addendum).
 */
async function postgresRuntime(services: Services) {
  postgresRuntimeModule ??= import('../connectors/postgres-runtime.js');
  return (await postgresRuntimeModule).postgresRuntimeFor(services);
}

/** The PostgreSQL runtime's write measurement, reached on first use (it builds on this runtime: egress, PII scanner). */
function writeEffectsOf(services: Services): WriteEffectPort {
  return {
    estimate: async (r) => (await postgresRuntime(services)).writeEffects.estimate(r),
    preview: async (r, estimate) => (await postgresRuntime(services)).writeEffects.preview(r, estimate),
  };
}

/**
 * The governance runtime of a composition root, built once: the gateway, the wire listener and the admin's approval
 * execution of one process share its egress pools, circuits, cache and limiter (docs/approvals.md: an approved request runs
 * through the very same pipeline as a live one).
 */
export const buildGovernanceRuntime: (services: Services) => Promise<GovernanceRuntime> = perServices(createGovernanceRuntime);

async function createGovernanceRuntime(services: Services): Promise<GovernanceRuntime> {
  const { config, log } = services;
  await initSqlParser();
  const sql = new SqlClassifier({ maxLength: config.gateway.limits.sql_bytes });
  const pii = createPiiScanner(piiOptionsFromConfig(config.pii));
  const rateLimiter = new RateLimiter({ redis: services.coord.redisClient(), keyPrefix: `${services.coord.keyPrefix}rate` });
  const allowPrivate = new Set(config.gateway.egress.allow_private_sources);
  const egressLog = log.child({ component: 'egress' });
  const egress = createEgressDispatcher({
    allowPrivate: (sourceId) => allowPrivate.has(sourceId),
    connectTimeoutMs: config.gateway.timeouts.upstream_connect_ms,
    // Private egress is an operator exception (spec §4 rule 5): every use is logged with the source that used it.
    onDecision: (d) => {
      if (!d.allowed) egressLog.warn({ source_id: d.sourceId, host: d.hostname, range: d.range }, 'egress refused');
      else if (d.privateOverride) egressLog.info({ source_id: d.sourceId, host: d.hostname, range: d.range }, 'private egress allowed by gateway.egress.allow_private_sources');
    },
  });
  services.onClose(() => egress.close());
  const circuits = new CircuitRegistry({ failureThreshold: config.gateway.circuit.failure_threshold, halfOpenAfterMs: config.gateway.circuit.half_open_after_ms });
  const generations = new SourceGenerations({
    coord: services.coord,
    durable: storeDurableGenerations(services.db),
    bus: services.invalidation,
    namespace: config.cache.generation_namespace,
    log: log.child({ component: 'generations' }),
  });
  const cache = new GovernedCache({
    coord: services.coord,
    generations,
    bus: services.invalidation,
    config: config.cache,
    log: log.child({ component: 'cache' }),
    maxEntryBytes: Math.min(config.gateway.limits.response_body_bytes, 8 * 1024 * 1024),
  });
  services.onClose(async () => {
    await cache.close();
    await generations.close();
  });
  const cipher = new PayloadCipher(services.secrets.get('approvals.encryption_key_ref'));
  const approvals = new ApprovalIntake({
    db: services.db,
    cipher,
    pii,
    expirySeconds: config.approvals.expiry_seconds,
    maxRequestBytes: config.approvals.max_request_bytes,
    onQueued: (notice) => notifierFor(services).notify(notice),
  });
  await startKeySessionMemo(services);
  const authenticate = agentAuthenticator(services);

  // The structure loads through the process's PostgreSQL runtime, which is built on this one: reached lazily.
  const structures = new SourceStructures({
    load: async (source) => loadPostgresStructure((await postgresRuntime(services)).catalog, source),
  });
  // What each source's own catalog says of the allowlisted calls (docs/governance/sql.md "Functions: deny by default").
  const callTrust = new PerSourceCache<CallTrust>({
    load: async (source) => loadCallTrust((await postgresRuntime(services)).catalog, source),
    ttlMs: DEFAULT_CALL_TRUST_TTL_MS,
  });
  const deps: HttpPipelineDeps = {
    config,
    log: log.child({ component: 'pipeline' }),
    authenticate,
    lookupSource: (sourceId) => services.registry.get(sourceId),
    roleContext: cachedRoleContexts(services),
    policies: () => services.policies.current(),
    rateLimiter,
    sql,
    structures,
    pii,
    approvals,
    egress,
    circuits,
    cache,
    resolveSecretRef: (ref) => services.resolveSecretRef(ref),
    // Read through the process's shared upstream pools, built after this runtime (they need its egress check).
    callTrust: (source) => callTrust.current(source) ?? callTrust.get(source),
    callCatalogChanged: (sourceId) => callTrust.invalidate(sourceId),
    writeEffects: writeEffectsOf(services),
    catalog: await catalogGovernanceFor(services),
  };
  // A scan that found drift means the cached structure of column governance is stale too (docs/catalog.md "Events").
  catalogEventsFor(services).on('changed', (m) => {
    if (m.reason === 'scanned' && (m.changes ?? 0) > 0) structures.invalidate(m.source_id);
  });

  return { pii, sql, rateLimiter, egress, circuits, generations, cache, cipher, deps };
}
