// The admin module for identities, data sources, connectors, role records and grants: builds their shared dependencies once and registers the routes.
import { defaultConnectors, type ConnectorRegistry, type SecretResolver } from '../../connectors/registry.js';
import type { AdminModule } from '../module.js';
import { identitiesModule } from './identities.js';
import { buildDataSourceRoutes } from './data-sources.js';
import { buildGrantRoutes } from './grants.js';

export interface ResourcesModuleOptions {
  connectors?: ConnectorRegistry;
  /** Resolves `env:` / `file:` credential references of source configs when a connection is tested. */
  resolveSecret?: SecretResolver;
}

export function resourcesModule(opts: ResourcesModuleOptions = {}): AdminModule {
  return async (ctx) => {
    const connectors = opts.connectors ?? defaultConnectors();
    const resolveSecret = opts.resolveSecret ?? ctx.services.resolveSecretRef;
    await identitiesModule(ctx);
    buildDataSourceRoutes(ctx, connectors, resolveSecret);
    buildGrantRoutes(ctx);
  };
}
