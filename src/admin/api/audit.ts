// Mounts the audit search and export routes on the admin listener for admins and auditors (permission audit:read).
import type { Kysely } from 'kysely';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { registerAuditRoutes } from '../../audit/routes.js';
import type { AuditDatabase } from '../../audit/schema.js';
import { requirePermission } from '../auth/principal.js';
import type { AdminModule } from '../module.js';

export const auditModule: AdminModule = ({ app, services }) => {
  const check = requirePermission('audit:read');
  registerAuditRoutes(app, {
    db: services.db as unknown as Kysely<AuditDatabase>,
    authorize: async (req: FastifyRequest, reply: FastifyReply) => {
      await (check as (req: FastifyRequest, reply: FastifyReply) => Promise<void>).call(app, req, reply);
    },
  });
};
