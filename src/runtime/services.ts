// The composition root shared by every role: opens the control store and coordination once, wires readiness, and closes them in order.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Config, LoadedConfig, ServiceRole } from '../config/index.js';
import { createCoordination, type Coordination, type HostPort, type RedisTopology } from '../coord/index.js';
import { openControlStore, type ControlStore } from '../store/db.js';
import { migrationStatus } from '../store/migrate.js';
import { StoreUnavailableError } from '../store/errors.js';
import { StoreStartup } from './store-startup.js';
import type { Database } from '../store/schema.js';
import { Readiness } from '../health/readiness.js';
import { SourceRegistry } from '../registry/sources.js';
import { InvalidationBus } from '../cache/invalidation.js';
import type { Logger } from '../observability/logger.js';
import { runtimeSecrets, type RuntimeSecrets } from './dev-secrets.js';
import type { AdminAuditor } from '../admin/audit-events.js';
import { PolicyService } from '../admin/policies/service.js';
import { AuditWriter } from '../audit/writer.js';
import { Auditor } from '../audit/context.js';
import { auditChanges } from '../audit/entry.js';
import { Metrics } from '../observability/metrics.js';
import type { Tracing } from '../observability/tracing.js';
import { startTelemetry } from '../observability/start.js';

export interface Services {
  readonly config: Readonly<Config>;
  readonly secrets: RuntimeSecrets;
  readonly log: Logger;
  /** Resolves secret references of source configurations at use time (never cached in plain form). */
  readonly resolveSecretRef: LoadedConfig['resolveSecretRef'];
  readonly instanceId: string;
  readonly store: ControlStore;
  readonly db: Kysely<Database>;
  readonly coord: Coordination;
  readonly readiness: Readiness;
  readonly registry: SourceRegistry;
  readonly invalidation: InvalidationBus;
  /** The durable audit writer (spec §6.4); `auditor.begin()` gives each request its one entry. */
  readonly audit: AuditWriter;
  readonly auditor: Auditor;
  /** Admin actions are recorded here (docs/audit.md) through the same writer, on channel `admin`. */
  readonly adminAudit: AdminAuditor;
  /** The compiled policy set of this instance, reloaded on change (docs/policy-api.md); loaded for roles all, gateway and admin. */
  readonly policies: PolicyService;
  /** This process's metrics (GET /metrics, OTLP when exporting; docs/observability.md). */
  readonly metrics: Metrics;
  /** Span creation while OTLP export is on; null when observability.otlp_endpoint is unset (no SDK runs then). */
  readonly tracing: Tracing | null;
  /** Registers a closer run at shutdown, last registered first (listeners before the stores they use). */
  onClose(fn: () => Promise<void>): void;
  close(): Promise<void>;
}

/**
 * A builder run once per composition root: every caller with the same services shares one build (its pools,
 * subscriptions and timers), and a build that failed is forgotten so the next caller tries again.
 */
export function perServices<S extends object, T>(build: (services: S) => Promise<T>): (services: S) => Promise<T> {
  const built = new WeakMap<S, Promise<T>>();
  return (services) => {
    let value = built.get(services);
    if (value === undefined) {
      value = build(services);
      built.set(services, value);
      value.catch(() => built.delete(services));
    }
    return value;
  };
}

/** The directory that holds embedded state (`./.gatehouse` by default): the parent of the embedded store. */
export function stateDirOf(config: Readonly<Config>): string {
  return path.dirname(path.resolve(config.database.embedded_dir));
}

export function shouldMigrateOnStart(config: Readonly<Config>): boolean {
  return config.database.migrate_on_start ?? config.environment !== 'production';
}

/** `deferUnavailable`: a service starts (not ready) while the store is unreachable; `gatehouse migrate` fails fast. */
/**
 * `direct`: the session connection for migrations (database.direct_url, needed behind a transaction pooler; the
 * main URL otherwise), one connection, no pooler.
 */
export async function openStore(config: Readonly<Config>, log: Logger, opts: { deferUnavailable?: boolean; direct?: boolean } = {}): Promise<ControlStore> {
  const direct = opts.direct === true && config.database.direct_url !== null;
  return openControlStore({
    deferUnavailable: opts.deferUnavailable ?? false,
    url: direct ? config.database.direct_url : config.database.url,
    pooler: direct ? 'none' : config.database.pooler,
    embeddedDir: path.resolve(config.database.embedded_dir),
    poolMax: direct ? 1 : config.database.pool_max,
    connectTimeoutMs: config.database.connect_timeout_ms,
    statementTimeoutMs: config.database.statement_timeout_ms,
    ssl: { mode: config.database.ssl_mode, caFile: config.database.ssl_ca_file },
    logger: log.child({ component: 'store' }),
  });
}

export async function buildServices(loaded: LoadedConfig, role: ServiceRole, log: Logger): Promise<Services> {
  const { config } = loaded;
  const closers: Array<() => Promise<void>> = [];
  const instanceId = `${os.hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const secrets = runtimeSecrets(config, loaded.secrets, log, stateDirOf(config));

  const store = await openStore(config, log, { deferUnavailable: role !== 'migration' });
  closers.push(() => store.close());
  // Behind a transaction pooler migrations run on their own direct connection (docs/operations.md "PgBouncer").
  const migrationStore = shouldMigrateOnStart(config) && config.database.direct_url !== null ? await openStore(config, log, { deferUnavailable: true, direct: true }) : store;
  if (migrationStore !== store) closers.push(() => migrationStore.close());
  try {
    // Loads that would wait for their next refresh run as soon as a store that was unreachable at start answers.
    const firstLoads: Array<() => Promise<void>> = [];
    let built = false;
    const storeStartup = new StoreStartup({
      store,
      log: log.child({ component: 'store' }),
      migrate: shouldMigrateOnStart(config),
      migrationStore,
      onReachable: async () => {
        if (built) await Promise.all(firstLoads.map((load) => load()));
      },
    });
    await storeStartup.start();
    closers.push(async () => storeStartup.stop());

    const coord = createCoordination({
      redisUrl: config.redis.url ?? undefined,
      topology: redisTopology(config.redis),
      keyPrefix: config.redis.key_prefix,
      connectTimeoutMs: config.redis.connect_timeout_ms,
      logger: log.child({ component: 'coordination' }),
    });
    closers.push(() => coord.close());
    if (coord.kind === 'memory') log.warn('coordination runs in-process (embedded development mode): limits and caches are not shared (admin sessions are kept in the embedded store)');

    const readiness = new Readiness();
    const registry = new SourceRegistry(store.db, coord, log.child({ component: 'registry' }));
    const invalidation = new InvalidationBus(coord, config.cache.invalidation_channel, instanceId, log.child({ component: 'cache-invalidation' }));

    readiness.register('database', async () => {
      try {
        await store.ping();
      } catch (err) {
        // The message is built from fixed text and the safe target only (store/errors.ts): the reason the operator needs.
        if (err instanceof StoreUnavailableError) return { ok: false, detail: err.message };
        throw err;
      }
      return { ok: true, detail: store.kind === 'pglite' ? 'embedded store' : 'reachable' };
    });
    readiness.register('migrations', async () => {
      const status = await migrationStatus(store.db);
      return status.atHead
        ? { ok: true, detail: `at head (${status.applied.length} applied)` }
        : { ok: false, detail: `pending: ${status.pending.join(', ')}` };
    });
    readiness.register('redis', async () => {
      await coord.ping();
      return { ok: true, detail: coord.kind === 'memory' ? 'in-process coordination (embedded)' : 'reachable' };
    });
    readiness.register('registry', () => registry.health());
    const metrics = new Metrics();
    const telemetry = await startTelemetry(config, { role, instanceId, metrics, log });
    // Pushed last (closed after everything else): spans and metrics of the shutdown itself still leave.
    if (telemetry) closers.push(() => telemetry.shutdown());
    const auditLog = log.child({ component: 'audit' });
    const audit = new AuditWriter({ db: store.db, copyIn: store.copyIn, config: config.audit, logger: auditLog, onInsert: (seconds, ok) => metrics.observeAuditInsert(seconds, ok) });
    await audit.start();
    // Closed after the listeners (closers run in reverse), so in-flight requests still record their entries.
    closers.push(() => audit.close());
    registerAuditGauges(metrics, audit);
    const auditor = new Auditor({ port: audit, logger: auditLog, observer: metrics, tracing: telemetry?.tracing ?? null });
    readiness.register('audit_buffer', () => audit.health());
    const adminAudit: AdminAuditor = {
      record: (event) =>
        auditor
          .begin({
            channel: 'admin',
            request_id: event.request_id,
            admin_user_id: event.admin_user_id,
            action: event.action,
            target: event.target ? { type: event.target.type, id: String(event.target.id) } : null,
            changes: event.changes ? auditChanges(event.changes.before ?? null, event.changes.after ?? null) : null,
            decision: event.outcome === 'success' ? 'allow' : event.outcome === 'denied' ? 'deny' : 'error',
            reasons: event.details ? Object.entries(event.details).map(([k, v]) => `${k}=${String(v)}`).slice(0, 16) : [],
            status: event.status,
            client_ip: event.client_ip,
          })
          .end(),
    };
    readiness.register('cache_invalidation', () => invalidation.health());

    if (role !== 'worker' && role !== 'migration') {
      // Start-up must not fail when Redis is briefly down: the subscription is kept and made on reconnect, and /ready says so meanwhile.
      await invalidation.start();
      closers.push(() => invalidation.stop());
      await registry.start();
      closers.push(() => registry.stop());
      firstLoads.push(() => registry.reload());
    }
    const policies = new PolicyService(store.db, coord, log.child({ component: 'policies' }), { instanceId });
    if (role === 'all' || role === 'gateway' || role === 'admin') {
      await policies.start();
      closers.push(() => policies.stop());
      firstLoads.push(() => policies.reload());
    }
    built = true;

    let closed = false;
    return {
      config,
      secrets,
      log,
      resolveSecretRef: loaded.resolveSecretRef,
      instanceId,
      store,
      db: store.db,
      coord,
      readiness,
      registry,
      invalidation,
      audit,
      auditor,
      adminAudit,
      policies,
      metrics,
      tracing: telemetry?.tracing ?? null,
      onClose: (fn) => closers.push(fn),
      close: async () => {
        if (closed) return;
        closed = true;
        await runClosers(closers, log);
      },
    };
  } catch (err) {
    await runClosers(closers, log);
    throw err;
  }
}

function registerAuditGauges(metrics: Metrics, audit: AuditWriter): void {
  metrics.addGauge('gatehouse_audit_buffer_entries', 'Audit entries accepted in memory, not yet in PostgreSQL or the spool.', [], () => [{ value: audit.stats().buffered }]);
  metrics.addGauge('gatehouse_audit_spool_bytes', 'Bytes of audit entries in the durable spool waiting for PostgreSQL.', [], () => [{ value: audit.stats().spooled_bytes }]);
  metrics.addGauge('gatehouse_audit_spool_entries', 'Audit entries in the durable spool waiting for PostgreSQL.', [], () => [{ value: audit.stats().spooled_entries }]);
  metrics.addGauge('gatehouse_audit_postgres_available', '1 while the audit writer reaches PostgreSQL.', [], () => [{ value: audit.stats().postgres_available ? 1 : 0 }]);
  metrics.addGauge('gatehouse_audit_dropped_entries', 'Audit entries lost under fail_open strictness since start (should stay 0).', [], () => [{ value: audit.stats().dropped }]);
}

async function runClosers(closers: Array<() => Promise<void>>, log: Logger): Promise<void> {
  for (const fn of closers.reverse()) {
    try {
      await fn();
    } catch (err) {
      log.error({ err }, 'error while closing');
    }
  }
}

function hostPort(s: string): HostPort {
  const i = s.lastIndexOf(':');
  return { host: s.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port: Number(s.slice(i + 1)) };
}

/** redis.sentinel_master / redis.cluster (docs/operations.md "Redis Sentinel and Cluster"); the config layer made them exclusive. */
function redisTopology(r: Config['redis']): RedisTopology {
  if (r.sentinel_master !== null) return { kind: 'sentinel', masterName: r.sentinel_master, sentinels: r.sentinels.map(hostPort) };
  if (r.cluster) return { kind: 'cluster', nodes: r.cluster_nodes.map(hostPort) };
  return { kind: 'standalone' };
}
