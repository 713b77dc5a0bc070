// Admin JSON API for source role records (DESIGN §6) and identity grants (spec §2 Source role grant); every change revokes the holders' key sessions.
import { z } from 'zod';
import type { SourceRole } from '../../store/schema.js';
import { getDataSourceBySourceId } from '../../store/repos/data-sources.js';
import { getIdentityById } from '../../store/repos/identities.js';
import { createSourceRole, deleteSourceRole, getSourceRoleById, getSourceRoleByKey, listSourceRoles, updateSourceRole } from '../../store/repos/source-roles.js';
import { createGrant, deleteGrant, getGrantById, listGrantsForIdentity, listGrantsForSource, updateGrant, type GrantWithRole } from '../../store/repos/grants.js';
import { defaultRoles, roleRulesSchema } from '../../governance/source-roles.js';
import { agentAuthDeps, revokeIdentityKeySessions } from '../../identity/index.js';
import { requirePermission } from '../auth/principal.js';
import type { AdminModuleContext } from '../module.js';
import { intId } from './route.js';
import { validationError } from '../../http/validation.js';
import { sourceParams } from './data-sources.js';
import { audit, given, iso, notFound, timestampSchema } from './shared.js';

const roleKeySchema = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'must be 1-63 lowercase letters, digits, "_", "." or "-", starting with a letter or digit');

export function presentRole(r: SourceRole) {
  return { id: r.id, source_id: r.source_id, role_key: r.role_key, description: r.description, enabled: r.enabled, rules: r.rules, created_at: iso(r.created_at), updated_at: iso(r.updated_at) };
}

/** Exactly the spec §2 grant response fields. */
export function presentGrant(g: GrantWithRole) {
  return { id: g.id, identity_id: g.identity_id, source_id: g.source_id, role_id: g.role_id, role_key: g.role_key, enabled: g.enabled, expires_at: iso(g.expires_at), granted_by: g.granted_by };
}

const roleResponse = z.object({
  id: z.number().int(),
  source_id: z.string(),
  role_key: z.string(),
  description: z.string(),
  enabled: z.boolean(),
  rules: z.unknown(),
  created_at: z.string().nullable(),
  updated_at: z.string().nullable(),
});
const grantResponse = z.object({
  id: z.number().int(),
  identity_id: z.number().int(),
  source_id: z.string(),
  role_id: z.number().int(),
  role_key: z.string(),
  enabled: z.boolean(),
  expires_at: z.string().nullable(),
  granted_by: z.number().int().nullable(),
});

const roleCreateSchema = z.strictObject({
  role_key: roleKeySchema,
  description: z.string().max(512).default(''),
  enabled: z.boolean().default(true),
  rules: roleRulesSchema,
});
const roleUpdateSchema = z.strictObject({
  description: z.string().max(512).nullish(),
  enabled: z.boolean().nullish(),
  rules: roleRulesSchema.nullish(),
});
const roleParams = z.strictObject({ source_id: sourceParams.shape.source_id, role_id: intId });

const futureTimestamp = timestampSchema.refine((s) => Date.parse(s) > Date.now(), 'must be in the future');
const grantCreateSchema = z
  .strictObject({
    source_id: z.string().min(1).max(63),
    role_id: z.number().int().min(1).max(2_147_483_647).nullish(),
    role_key: roleKeySchema.nullish(),
    expires_at: futureTimestamp.nullish(),
  })
  .superRefine((b, ctx) => {
    if (!given(b.role_id) && !given(b.role_key)) ctx.addIssue({ code: 'custom', path: ['role_key'], message: 'give role_id or role_key' });
  });
const grantUpdateSchema = z.strictObject({ enabled: z.boolean().nullish(), expires_at: futureTimestamp.nullish() });
const identityParams = z.strictObject({ id: intId });
const grantParams = z.strictObject({ id: intId, grant_id: intId });

export function buildGrantRoutes(ctx: AdminModuleContext): void {
  const { app, api, services } = ctx;
  const sourcesRead = requirePermission('sources:read');
  const sourcesWrite = requirePermission('sources:write');
  const identitiesRead = requirePermission('identities:read');
  const identitiesWrite = requirePermission('identities:write');
  const deps = agentAuthDeps(services);

  const requireSource = async (sourceId: string) => {
    const source = await getDataSourceBySourceId(services.db, sourceId);
    if (!source) throw notFound('data source');
    return source;
  };
  const requireIdentity = async (id: number) => {
    const identity = await getIdentityById(services.db, id);
    if (!identity) throw notFound('identity');
    return identity;
  };
  /** Identities holding the role: a role's rules are part of each holder's decision, so a change revokes their key sessions. */
  const roleHolders = async (sourceId: string, roleId: number) =>
    (await listGrantsForSource(services.db, sourceId)).filter((g) => g.role_id === roleId).map((g) => g.identity_id);

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/roles',
    summary: 'List the role records of a source',
    tags: ['roles'],
    preHandler: sourcesRead,
    params: sourceParams,
    response: z.array(roleResponse),
    handler: async ({ params }) => {
      await requireSource(params.source_id);
      return (await listSourceRoles(services.db, params.source_id)).map(presentRole);
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/:source_id/roles',
    summary: 'Create a role record on a source',
    tags: ['roles'],
    preHandler: sourcesWrite,
    params: sourceParams,
    body: roleCreateSchema,
    response: roleResponse,
    successStatus: 201,
    handler: async ({ params, body, req }) => {
      await requireSource(params.source_id);
      const role = await createSourceRole(services.db, { source_id: params.source_id, role_key: body.role_key, description: body.description, enabled: body.enabled, rules: body.rules as never });
      const out = presentRole(role);
      await audit(services, req, 'source_role.create', { type: 'source_role', id: role.id }, { after: out }, 201);
      return out;
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/:source_id/roles/defaults',
    summary: 'Create the default reader, writer and admin roles that the source does not have yet',
    tags: ['roles'],
    preHandler: sourcesWrite,
    params: sourceParams,
    response: z.array(roleResponse),
    handler: async ({ params, req }) => {
      const source = await requireSource(params.source_id);
      const created = await services.db.transaction().execute(async (tx) => {
        const made: SourceRole[] = [];
        for (const t of defaultRoles(source.source_type)) {
          if (await getSourceRoleByKey(tx, source.source_id, t.role_key)) continue;
          made.push(await createSourceRole(tx, { source_id: source.source_id, role_key: t.role_key, description: t.description, rules: t.rules as never }));
        }
        return made;
      });
      if (created.length > 0) await audit(services, req, 'source_role.create_defaults', { type: 'data_source', id: source.source_id }, { after: created.map(presentRole) });
      return (await listSourceRoles(services.db, source.source_id)).map(presentRole);
    },
  });

  api.route(app, {
    method: 'PATCH',
    url: '/api/data-sources/:source_id/roles/:role_id',
    summary: 'Update a role record (holders see the change at once: their grant version advances)',
    tags: ['roles'],
    preHandler: sourcesWrite,
    params: roleParams,
    body: roleUpdateSchema,
    response: roleResponse,
    handler: async ({ params, body, req }) => {
      const before = await getSourceRoleById(services.db, params.role_id);
      if (!before || before.source_id !== params.source_id) throw notFound('role');
      const role = await updateSourceRole(services.db, params.role_id, {
        ...(given(body.description) ? { description: body.description } : {}),
        ...(given(body.enabled) ? { enabled: body.enabled } : {}),
        ...(given(body.rules) ? { rules: body.rules as never } : {}),
      });
      if (!role) throw notFound('role');
      await revokeIdentityKeySessions(deps, await roleHolders(params.source_id, role.id));
      const out = presentRole(role);
      await audit(services, req, 'source_role.update', { type: 'source_role', id: role.id }, { before: presentRole(before), after: out });
      return out;
    },
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/data-sources/:source_id/roles/:role_id',
    summary: 'Delete a role record (its grants go with it)',
    tags: ['roles'],
    preHandler: sourcesWrite,
    params: roleParams,
    response: z.object({ deleted: z.boolean(), id: z.number().int() }),
    handler: async ({ params, req }) => {
      const before = await getSourceRoleById(services.db, params.role_id);
      if (!before || before.source_id !== params.source_id) throw notFound('role');
      const holders = await roleHolders(params.source_id, params.role_id);
      if (!(await deleteSourceRole(services.db, params.role_id))) throw notFound('role');
      await revokeIdentityKeySessions(deps, holders);
      await audit(services, req, 'source_role.delete', { type: 'source_role', id: params.role_id }, { before: presentRole(before) });
      return { deleted: true, id: params.role_id };
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/identities/:id/grants',
    summary: 'List the grants of an identity',
    tags: ['grants'],
    preHandler: identitiesRead,
    params: identityParams,
    response: z.array(grantResponse),
    handler: async ({ params }) => {
      await requireIdentity(params.id);
      return (await listGrantsForIdentity(services.db, params.id)).map(presentGrant);
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/identities/:id/grants',
    summary: 'Grant an identity a role on a source (role_id or role_key; optional expiry)',
    tags: ['grants'],
    preHandler: identitiesWrite,
    params: identityParams,
    body: grantCreateSchema,
    response: grantResponse,
    successStatus: 201,
    handler: async ({ params, body, req }) => {
      await requireIdentity(params.id);
      await requireSource(body.source_id);
      let role: SourceRole | undefined;
      if (given(body.role_id)) {
        role = await getSourceRoleById(services.db, body.role_id!);
        if (!role || role.source_id !== body.source_id) throw notFound('role on this data source');
        if (given(body.role_key) && body.role_key !== role.role_key) {
          throw validationError([{ loc: ['body', 'role_key'], msg: 'does not match the role named by role_id', type: 'value_error' }]);
        }
      } else {
        role = await getSourceRoleByKey(services.db, body.source_id, body.role_key!);
        if (!role) throw notFound('role on this data source');
      }
      const roleId = role.id;
      const grant = await createGrant(services.db, { identity_id: params.id, source_id: body.source_id, role_id: roleId, expires_at: body.expires_at ?? null, granted_by: req.admin?.id ?? null });
      await revokeIdentityKeySessions(deps, [params.id]);
      const out = presentGrant(grant);
      await audit(services, req, 'grant.create', { type: 'grant', id: grant.id }, { after: out }, 201);
      return out;
    },
  });

  api.route(app, {
    method: 'PATCH',
    url: '/api/identities/:id/grants/:grant_id',
    summary: 'Enable, disable or re-date a grant (expires_at: null removes the expiry)',
    tags: ['grants'],
    preHandler: identitiesWrite,
    params: grantParams,
    body: grantUpdateSchema,
    response: grantResponse,
    handler: async ({ params, body, req }) => {
      const before = await getGrantById(services.db, params.grant_id);
      if (!before || before.identity_id !== params.id) throw notFound('grant');
      const grant = await updateGrant(services.db, params.grant_id, {
        ...(given(body.enabled) ? { enabled: body.enabled } : {}),
        ...(body.expires_at !== undefined ? { expires_at: body.expires_at } : {}),
      });
      if (!grant) throw notFound('grant');
      await revokeIdentityKeySessions(deps, [params.id]);
      const out = presentGrant(grant);
      await audit(services, req, 'grant.update', { type: 'grant', id: grant.id }, { before: presentGrant(before), after: out });
      return out;
    },
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/identities/:id/grants/:grant_id',
    summary: 'Revoke a grant',
    tags: ['grants'],
    preHandler: identitiesWrite,
    params: grantParams,
    response: z.object({ deleted: z.boolean(), id: z.number().int() }),
    handler: async ({ params, req }) => {
      const before = await getGrantById(services.db, params.grant_id);
      if (!before || before.identity_id !== params.id) throw notFound('grant');
      if (!(await deleteGrant(services.db, params.grant_id, params.id))) throw notFound('grant');
      await revokeIdentityKeySessions(deps, [params.id]);
      await audit(services, req, 'grant.delete', { type: 'grant', id: params.grant_id }, { before: presentGrant(before) });
      return { deleted: true, id: params.grant_id };
    },
  });
}
