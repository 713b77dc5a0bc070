// The approvals admin module (spec §4 /api/approvals…): list, read, approve and reject, plus the admin-side recovery loop for decided-but-never-claimed approvals.
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AdminModule } from '../admin/module.js';
import { intId } from '../admin/api/route.js';
import { adminOf, requirePermission } from '../admin/auth/principal.js';
import { auditOf } from '../admin/auth/routes.js';
import { isGatehouseError } from '../errors/registry.js';
import { GatehouseError } from '../errors/registry.js';
import { approvalServiceFor } from './runtime.js';
import { APPROVAL_STATUSES, getApproval, listApprovals, viewApproval } from './store.js';

const idParams = z.strictObject({ approval_id: intId });
const listQuery = z.object({
  status: z.enum(APPROVAL_STATUSES).optional(),
  /** Not in the spec (an optional addition): newest first, bounded. */
  limit: z.coerce.number({ error: 'Input should be a valid integer' }).int().min(1).max(1000).default(200),
});

export const approvalViewSchema = z.object({
  id: z.number().int(),
  identity_id: z.number().int(),
  source_id: z.string(),
  sql_text: z.string(),
  risk_level: z.string(),
  status: z.enum(APPROVAL_STATUSES),
  approved_by: z.string().nullable(),
  created_at: z.string().nullable(),
  executed_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  request_metadata: z.record(z.string(), z.unknown()),
});

export const approvalActionSchema = z.object({ id: z.number().int(), status: z.enum(APPROVAL_STATUSES), executed: z.boolean().nullable() });

export const approvalsModule: AdminModule = async ({ app, api, services }) => {
  const { db, adminAudit } = services;
  const approvals = await approvalServiceFor(services);
  const read = requirePermission('approvals:read');
  const decide = requirePermission('approvals:decide');

  api.route(app, {
    method: 'GET', url: '/api/approvals', summary: 'List approvals, newest first, optionally by status', tags: ['approvals'],
    query: listQuery, response: z.array(approvalViewSchema), preHandler: read,
    handler: async ({ query }) => (await listApprovals(db, { status: query.status, limit: query.limit })).map(viewApproval),
  });

  api.route(app, {
    method: 'GET', url: '/api/approvals/:approval_id', summary: 'One approval', tags: ['approvals'],
    params: idParams, response: approvalViewSchema, preHandler: read,
    handler: async ({ params }) => {
      const row = await getApproval(db, params.approval_id);
      if (!row) throw new GatehouseError('not_found', 'Approval not found.');
      return viewApproval(row);
    },
  });

  const action = (verb: 'approve' | 'reject') => async ({ params, req }: { params: { approval_id: number }; req: FastifyRequest }) => {
    const admin = adminOf(req);
    const id = params.approval_id;
    try {
      const { row, executed } = await approvals.decide(id, verb, admin.username);
      await adminAudit.record(auditOf(req, {
        action: `approval.${verb}`, outcome: 'success', status: 200, target: { type: 'approval', id },
        details: { status: row.status, executed },
      }));
      return { id: row.id, status: row.status, executed };
    } catch (err) {
      if (isGatehouseError(err) && (err.code === 'not_actionable' || err.code === 'not_found')) {
        await adminAudit.record(auditOf(req, {
          action: `approval.${verb}`, outcome: 'denied', status: err.spec.http, target: { type: 'approval', id },
          details: { reason: err.code, ...(typeof err.details?.status === 'string' ? { status: err.details.status } : {}) },
        }));
      }
      throw err;
    }
  };

  api.route(app, {
    method: 'POST', url: '/api/approvals/:approval_id/approve', summary: 'Approve a pending approval; the request executes once before this answers', tags: ['approvals'],
    params: idParams, response: approvalActionSchema, preHandler: decide, handler: action('approve'),
  });
  api.route(app, {
    method: 'POST', url: '/api/approvals/:approval_id/reject', summary: 'Reject a pending approval; the request never executes', tags: ['approvals'],
    params: idParams, response: approvalActionSchema, preHandler: decide, handler: action('reject'),
  });

  // Recovery rule 2 (docs/approvals.md) runs where the pipeline lives: approved rows whose decider died before claiming.
  const log = services.log.child({ component: 'approvals' });
  let inFlight: Promise<unknown> | null = null;
  let closed = false;
  const recover = () => {
    if (inFlight !== null || closed) return;
    inFlight = approvals
      .recoverUnclaimed()
      .then((n) => n > 0 && log.warn({ executed: n }, 'approved requests that were never claimed were executed by recovery'))
      .catch((err: unknown) => log.error({ err }, 'approval recovery failed'))
      .finally(() => (inFlight = null));
  };
  const timer = setInterval(recover, services.config.worker.sweep_interval_seconds * 1000);
  timer.unref();
  app.addHook('onReady', async () => recover());
  services.onClose(async () => {
    closed = true;
    clearInterval(timer);
    await inFlight;
  });
};
