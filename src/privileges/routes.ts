// Admin API of managed privileges (docs/least-privilege.md, docs/admin-api.md): the pending plan of a source (dry run), a reconciliation on demand, and the state sessions are decided by; and the console page that shows them.
import { z } from 'zod';
import type { AdminModule } from '../admin/module.js';
import { requirePermission } from '../admin/auth/principal.js';
import { sourceParams } from '../admin/api/data-sources.js';
import { audit, notFound } from '../admin/api/shared.js';
import { postgresRuntimeFor } from '../connectors/postgres-runtime.js';
import { managedSettings, type ReconcileResult } from './reconciler.js';
import { registerPrivilegePages } from './pages.js';

const resultSchema = z.object({
  source_id: z.string(),
  ok: z.boolean(),
  dry_run: z.boolean(),
  summary: z.record(z.string(), z.number()),
  drift: z.number(),
  statements: z.array(z.string()),
  statement_count: z.number(),
  error: z.string().nullable(),
  duration_ms: z.number(),
  session_roles: z.record(z.string(), z.string()),
  base_role: z.string().nullable(),
});

function present(r: ReconcileResult) {
  const { desired, ...rest } = r;
  return {
    ...rest,
    session_roles: Object.fromEntries([...(desired?.sessionRoles ?? new Map<number, string>())].map(([id, role]) => [String(id), role])),
    base_role: desired?.baseRole ?? null,
  };
}

export const privilegesModule: AdminModule = ({ app, api, services }) => {
  registerPrivilegePages({ app, api });
  const read = requirePermission('sources:read');
  const write = requirePermission('sources:write');
  const managedSource = (sourceId: string) => {
    const source = services.registry.get(sourceId);
    if (!source) throw notFound('data source');
    if (managedSettings(source) === null) throw notFound('managed privileges (connection_config.privileges is not "managed") of this data source');
    return source;
  };

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/:source_id/privileges/dry-run',
    summary: 'The reconciliation plan of a source with managed privileges, computed now and not applied',
    tags: ['privileges'],
    preHandler: read,
    params: sourceParams,
    response: resultSchema,
    handler: async ({ params }) => {
      const source = managedSource(params.source_id);
      const { privileges } = await postgresRuntimeFor(services);
      return present(await privileges.dryRun(source));
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/:source_id/privileges/reconcile',
    summary: 'Reconcile the managed privileges of a source now (other gateway processes are asked too)',
    tags: ['privileges'],
    preHandler: write,
    params: sourceParams,
    response: resultSchema,
    handler: async ({ params, req }) => {
      const source = managedSource(params.source_id);
      const { privileges } = await postgresRuntimeFor(services);
      const result = await privileges.reconcile(source.source_id, 'admin');
      await privileges.announce(source.source_id);
      if (result === null) throw notFound('managed privileges of this data source');
      const out = present(result);
      await audit(services, req, 'privileges.reconcile_requested', { type: 'data_source', id: source.source_id }, undefined, 200, { ok: out.ok, summary: out.summary });
      return out;
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/privileges',
    summary: 'The state of managed privileges of a source in this process: in place (with each identity\'s session role) or why sessions are refused',
    tags: ['privileges'],
    preHandler: read,
    params: sourceParams,
    response: z.object({ source_id: z.string(), status: z.string(), reason: z.string().nullable(), at: z.string().nullable(), session_roles: z.record(z.string(), z.string()), base_role: z.string().nullable() }),
    handler: async ({ params }) => {
      const source = managedSource(params.source_id);
      const { privileges } = await postgresRuntimeFor(services);
      const st = privileges.state(source.source_id);
      if (st === undefined) return { source_id: source.source_id, status: 'pending', reason: null, at: null, session_roles: {}, base_role: null };
      if (st.status === 'failed') return { source_id: source.source_id, status: 'failed', reason: st.reason, at: new Date(st.at).toISOString(), session_roles: {}, base_role: null };
      return {
        source_id: source.source_id,
        status: 'ok',
        reason: null,
        at: new Date(st.at).toISOString(),
        session_roles: Object.fromEntries([...st.sessionRoles].map(([id, role]) => [String(id), role])),
        base_role: st.baseRole,
      };
    },
  });
};
