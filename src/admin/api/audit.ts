// Mounts the audit search and export routes on the admin listener for admins and auditors (permission audit:read), and describes them in the OpenAPI document.
import type { Kysely } from 'kysely';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { auditExportQuery, auditSearchQuery, registerAuditRoutes } from '../../audit/routes.js';
import type { AuditDatabase } from '../../audit/schema.js';
import { requirePermission } from '../auth/principal.js';
import type { AdminModule } from '../module.js';
import { openStore, type Services } from '../../runtime/services.js';

const readStores = new WeakMap<Services, Promise<Kysely<AuditDatabase>>>();

/** The store audit searches read (the API's and the console's): one per service set, opened on first use. */
export function auditReadStore(services: Services): Promise<Kysely<AuditDatabase>> {
  let store = readStores.get(services);
  if (!store) readStores.set(services, (store = openAuditReadStore(services)));
  return store;
}

/** database.read_url's replica when configured (its own small pool), else the primary. */
async function openAuditReadStore(services: Services): Promise<Kysely<AuditDatabase>> {
  const { config } = services;
  if (config.database.read_url === null) return services.db as unknown as Kysely<AuditDatabase>;
  const replica = await openStore({ ...config, database: { ...config.database, url: config.database.read_url, pool_max: Math.min(config.database.pool_max, 4) } }, services.log.child({ component: 'audit-read-store' }), { deferUnavailable: true });
  services.onClose(() => replica.close());
  return replica.db as unknown as Kysely<AuditDatabase>;
}

export const auditModule: AdminModule = async ({ app, api, services }) => {
  const check = requirePermission('audit:read');
  registerAuditRoutes(app, {
    db: await auditReadStore(services),
    authorize: async (req: FastifyRequest, reply: FastifyReply) => {
      await (check as (req: FastifyRequest, reply: FastifyReply) => Promise<void>).call(app, req, reply);
    },
  });
  api.describe({ method: 'GET', url: '/api/audit', summary: 'Search audit entries, newest first, one keyset page at a time', tags: ['audit'], query: auditSearchQuery });
  api.describe({
    method: 'GET',
    url: '/api/audit/export',
    summary: 'Export the matching audit entries as CSV or JSON Lines (streamed)',
    tags: ['audit'],
    query: auditExportQuery,
    produces: ['text/csv', 'application/x-ndjson'],
  });
};
