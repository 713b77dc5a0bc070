// The subject mapping endpoints (spec §4, §2 "Single sign-on subject mapping", §8): PUT/DELETE /api/admin-auth/oidc/admins/{admin_id} and /agents/{identity_id}.
import { z } from 'zod';
import { GatehouseError } from '../../../errors/registry.js';
import { getAdminUserById } from '../../../store/repos/admin-users.js';
import { getIdentityById } from '../../../store/repos/identities.js';
import { setAdminSubject, setIdentitySubject, type SubjectMapping } from '../../../store/repos/oidc-subjects.js';
import { agentAuthDeps, revokeKeySessions } from '../../../identity/index.js';
import { intId } from '../../api/route.js';
import type { AdminModuleContext } from '../../module.js';
import { requirePermission } from '../principal.js';
import { auditOf } from '../routes.js';

/** spec §2 and §8: subject 1..512 characters, email up to 320, nullable. */
export const subjectMappingBody = z.strictObject({
  subject: z.string().min(1).max(512),
  email: z.string().max(320).nullable().optional(),
});

const adminParams = z.strictObject({ admin_id: intId });
const agentParams = z.strictObject({ identity_id: intId });

const mappingView = z.object({
  issuer: z.string().nullable(),
  subject: z.string().nullable(),
  email: z.string().nullable(),
});
const adminMappingView = mappingView.extend({ admin_id: z.number(), auth_version_advanced: z.boolean() });
const agentMappingView = mappingView.extend({ identity_id: z.number() });

export function registerMappingRoutes({ app, api, services }: AdminModuleContext): void {
  const { db, adminAudit } = services;
  const keyDeps = agentAuthDeps(services);

  /** Mappings belong to the configured issuer; without one there is nothing to map to. */
  const issuer = (): string => {
    const url = services.config.auth.oidc.issuer_url;
    if (url === null) throw new GatehouseError('conflict', 'auth.oidc.issuer_url is not configured: there is no issuer to map subjects of.');
    return url;
  };

  const mappingOf = (body: z.output<typeof subjectMappingBody>): SubjectMapping => ({ issuer: issuer(), subject: body.subject, email: body.email ?? null });

  const adminHandler = async (adminId: number, mapping: SubjectMapping | null, req: Parameters<typeof auditOf>[0], method: 'PUT' | 'DELETE') => {
    const before = await getAdminUserById(db, adminId);
    if (!before) throw new GatehouseError('not_found', 'Admin user not found.');
    const after = await setAdminSubject(db, adminId, mapping);
    if (!after) throw new GatehouseError('not_found', 'Admin user not found.');
    const view = { admin_id: after.id, issuer: after.oidc_issuer, subject: after.oidc_subject, email: after.oidc_email, auth_version_advanced: after.auth_version !== before.auth_version };
    await adminAudit.record(
      auditOf(req, {
        action: method === 'PUT' ? 'oidc.admin_mapping.set' : 'oidc.admin_mapping.delete',
        outcome: 'success',
        status: 200,
        target: { type: 'admin_user', id: after.id },
        changes: { before: { issuer: before.oidc_issuer, subject: before.oidc_subject, email: before.oidc_email }, after: { issuer: view.issuer, subject: view.subject, email: view.email } },
        details: { auth_version_advanced: view.auth_version_advanced },
      }),
    );
    return view;
  };

  const agentHandler = async (identityId: number, mapping: SubjectMapping | null, req: Parameters<typeof auditOf>[0], method: 'PUT' | 'DELETE') => {
    const before = await getIdentityById(db, identityId);
    if (!before) throw new GatehouseError('not_found', 'Identity not found.');
    const after = await setIdentitySubject(db, identityId, mapping);
    if (!after) throw new GatehouseError('not_found', 'Identity not found.');
    // Gateways drop what they remember of this identity (key sessions, JWT subjects) at once.
    if (after.auth_version !== before.auth_version) await revokeKeySessions(keyDeps, [after.api_key_digest ?? `identity:${after.id}`]);
    const view = { identity_id: after.id, issuer: after.oidc_issuer, subject: after.oidc_subject, email: after.oidc_email };
    await adminAudit.record(
      auditOf(req, {
        action: method === 'PUT' ? 'oidc.agent_mapping.set' : 'oidc.agent_mapping.delete',
        outcome: 'success',
        status: 200,
        target: { type: 'identity', id: after.id },
        changes: { before: { issuer: before.oidc_issuer, subject: before.oidc_subject, email: before.oidc_email }, after: { issuer: view.issuer, subject: view.subject, email: view.email } },
      }),
    );
    return view;
  };

  api.route(app, {
    method: 'PUT',
    url: '/api/admin-auth/oidc/admins/:admin_id',
    summary: "Map an admin to a subject of the configured issuer (owners); a changed subject ends the admin's sessions",
    tags: ['admin-auth'],
    params: adminParams,
    body: subjectMappingBody,
    response: adminMappingView,
    preHandler: requirePermission('admins:manage'),
    handler: ({ params, body, req }) => adminHandler(params.admin_id, mappingOf(body), req, 'PUT'),
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/admin-auth/oidc/admins/:admin_id',
    summary: "Remove an admin's subject mapping (owners); ends the admin's sessions when one was set",
    tags: ['admin-auth'],
    params: adminParams,
    response: adminMappingView,
    preHandler: requirePermission('admins:manage'),
    handler: ({ params, req }) => adminHandler(params.admin_id, null, req, 'DELETE'),
  });

  api.route(app, {
    method: 'PUT',
    url: '/api/admin-auth/oidc/agents/:identity_id',
    summary: "Map an agent identity to a subject of the configured issuer: the identity's JWTs authenticate it",
    tags: ['admin-auth'],
    params: agentParams,
    body: subjectMappingBody,
    response: agentMappingView,
    preHandler: requirePermission('identities:write'),
    handler: ({ params, body, req }) => agentHandler(params.identity_id, mappingOf(body), req, 'PUT'),
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/admin-auth/oidc/agents/:identity_id',
    summary: "Remove an agent identity's subject mapping",
    tags: ['admin-auth'],
    params: agentParams,
    response: agentMappingView,
    preHandler: requirePermission('identities:write'),
    handler: ({ params, req }) => agentHandler(params.identity_id, null, req, 'DELETE'),
  });
}
