// Mounts the audit search and export routes on the admin listener for admins and auditors (permission audit:read), and describes them in the OpenAPI document.
import type { Kysely } from 'kysely';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { auditExportQuery, auditSearchQuery, registerAuditRoutes } from '../../audit/routes.js';
import type { AuditDatabase } from '../../audit/schema.js';
import { requirePermission } from '../auth/principal.js';
import type { AdminModule } from '../module.js';

export const auditModule: AdminModule = ({ app, api, services }) => {
  const check = requirePermission('audit:read');
  registerAuditRoutes(app, {
    db: services.db as unknown as Kysely<AuditDatabase>,
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
