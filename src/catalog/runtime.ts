// The catalog's composition: one event hub per process, and the worker's scanner and scheduler built on the process's services.
import { createEgressDispatcher } from '../egress/agent.js';
import type { Services } from '../runtime/services.js';
import type { PeriodicTask } from '../worker/worker.js';
import type { CatalogPort } from '../pipeline/context.js';
import { CatalogEvents } from './events.js';
import { CatalogGovernance } from './governance.js';
import { CatalogScanner } from './scanner.js';
import { CATALOG_POLL_MS, CatalogScheduler } from './scheduler.js';

const hubs = new WeakMap<Services, CatalogEvents>();

/** The process's catalog event hub (in-process hook + `catalog:changed`); closed with the services. */
export function catalogEventsFor(services: Services): CatalogEvents {
  let hub = hubs.get(services);
  if (hub === undefined) {
    const created = new CatalogEvents(services.coord);
    hubs.set(services, created);
    services.onClose(() => created.close());
    hub = created;
  }
  return hub;
}

const views = new WeakMap<Services, Promise<CatalogGovernance>>();

/** The process's catalog view for the pipeline, listening to `catalog:changed` from every process. */
export function catalogGovernanceFor(services: Services): Promise<CatalogGovernance> {
  let view = views.get(services);
  if (view === undefined) {
    view = (async () => {
      const events = catalogEventsFor(services);
      // A Redis outage at start keeps the subscription pending; the view's TTL bounds staleness meanwhile.
      await events.listen().catch(() => undefined);
      return new CatalogGovernance(services.db, events, undefined, () => services.coord.status().subscriptionsHealthy);
    })();
    views.set(services, view);
  }
  return view;
}

/** The same view behind a synchronous handle (for callers built before it is): nothing cached until it is built. */
export function catalogPortFor(services: Services): CatalogPort {
  let built: CatalogGovernance | null = null;
  const view = catalogGovernanceFor(services).then((v) => (built = v));
  return {
    current: (sourceId) => built?.current(sourceId) ?? null,
    get: async (sourceId) => (await view).get(sourceId),
  };
}

/** A scanner with the worker's identity; connections pass the same egress rules as live traffic. */
export function buildCatalogScanner(services: Services, workerId: string): CatalogScanner {
  const { config } = services;
  const allowPrivate = new Set(config.gateway.egress.allow_private_sources);
  const egress = createEgressDispatcher({ allowPrivate: (id) => allowPrivate.has(id), connectTimeoutMs: config.gateway.timeouts.upstream_connect_ms });
  services.onClose(() => egress.close());
  return new CatalogScanner({
    db: services.db,
    coord: services.coord,
    config: config.catalog,
    workerId,
    resolveSecret: (ref) => services.resolveSecretRef(ref),
    checkTarget: (sourceId, host) => egress.checkTarget(sourceId, host),
    dispatcherFor: (sourceId) => egress.forSource(sourceId),
    events: catalogEventsFor(services),
    log: services.log.child({ component: 'catalog' }),
  });
}

/** The worker's periodic catalog task; it also wakes on source saves and on-demand requests. */
export function catalogWorkerTask(services: Services, workerId: string): PeriodicTask {
  const scanner = buildCatalogScanner(services, workerId);
  const scheduler = new CatalogScheduler({ db: services.db, coord: services.coord, config: services.config.catalog, scanner, log: services.log.child({ component: 'catalog' }) });
  let listening = false;
  services.onClose(() => scheduler.stop());
  return {
    name: 'catalog',
    intervalMs: CATALOG_POLL_MS,
    runAtStart: true,
    run: async () => {
      if (!services.config.catalog.enabled) return;
      if (!listening) {
        listening = true;
        await scheduler.listen();
      }
      await scheduler.tick();
    },
  };
}
