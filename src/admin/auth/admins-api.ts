// Admin user management for owners (/api/admins) and each admin's own API tokens (/api/admin-tokens).
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import {
  createAdminUser,
  deleteAdminUser,
  getAdminUserById,
  listAdminUsers,
  lockEnabledOwners,
  setAdminPassword,
  updateAdminUser,
  type AdminUserPatch,
} from '../../store/repos/admin-users.js';
import { createAdminToken, deleteAdminToken, deleteAdminTokensOfUser, listAdminTokens } from '../../store/repos/admin-tokens.js';
import type { AdminToken, AdminUser } from '../../store/schema.js';
import type { Db } from '../../store/repos/util.js';
import { intId } from '../api/route.js';
import { validationError } from '../../http/validation.js';
import type { AdminModuleContext } from '../module.js';
import { adminRoles, hasPermission } from './permissions.js';
import { adminOf, requirePermission } from './principal.js';
import { hashPassword, passwordProblems } from './passwords.js';
import { generateAdminToken, hashAdminToken } from './tokens.js';
import { auditOf } from './routes.js';

/** An admin's username (the console's admin forms check the same rule). */
export const adminUsername = z.string().min(1).max(128).regex(/^[A-Za-z0-9._@+-]+$/, 'Use letters, digits and . _ @ + - only');
const roles = z.array(z.enum(adminRoles)).max(adminRoles.length);

const adminCreate = z.strictObject({
  username: adminUsername,
  password: z.string().min(1).max(1024),
  roles,
  enabled: z.boolean().default(true),
  /** A password chosen by an owner is temporary by default: the new admin sets its own at first sign-in. */
  must_change_password: z.boolean().default(true),
});

const adminUpdate = z.strictObject({
  username: adminUsername.optional(),
  roles: roles.optional(),
  enabled: z.boolean().optional(),
  password: z.string().min(1).max(1024).optional(),
  must_change_password: z.boolean().optional(),
});

const adminView = z.object({
  id: z.number(),
  username: z.string(),
  roles: z.array(z.string()),
  enabled: z.boolean(),
  must_change_password: z.boolean(),
  oidc_subject: z.string().nullable(),
  oidc_email: z.string().nullable(),
  created_at: z.date(),
  updated_at: z.date(),
  last_login_at: z.date().nullable(),
});

const tokenCreate = z.strictObject({
  name: z.string().trim().min(1).max(128),
  expires_at: z.iso.datetime({ offset: true }).optional(),
});

const tokenView = z.object({
  id: z.number(),
  name: z.string(),
  admin_user_id: z.number(),
  created_at: z.date(),
  last_used_at: z.date().nullable(),
  expires_at: z.date().nullable(),
});

const idParams = z.strictObject({ id: intId });

function viewAdmin(u: AdminUser): z.output<typeof adminView> {
  return {
    id: u.id,
    username: u.username,
    roles: u.roles,
    enabled: u.enabled,
    must_change_password: u.must_change_password,
    oidc_subject: u.oidc_subject,
    oidc_email: u.oidc_email,
    created_at: u.created_at,
    updated_at: u.updated_at,
    last_login_at: u.last_login_at,
  };
}

function viewToken(t: AdminToken): z.output<typeof tokenView> {
  return { id: t.id, name: t.name, admin_user_id: t.admin_user_id, created_at: t.created_at, last_used_at: t.last_used_at, expires_at: t.expires_at };
}

function checkPassword(password: string, name: string): void {
  const problems = passwordProblems(password, name);
  if (problems.length > 0) throw validationError([{ loc: ['body', 'password'], msg: `The password ${problems.join('; ')}`, type: 'value_error' }]);
}

/** 409 when the change would leave no enabled owner; call inside the transaction that makes the change. */
async function keepAnOwner(trx: Db, target: AdminUser, stillOwner: boolean): Promise<void> {
  const owners = await lockEnabledOwners(trx);
  const isEnabledOwner = target.enabled && target.roles.includes('owner');
  if (isEnabledOwner && !stillOwner && owners.filter((id) => id !== target.id).length === 0) {
    throw new GatehouseError('conflict', 'This is the last enabled owner; make another admin an owner first.');
  }
}

export function registerAdminUserRoutes({ app, api, services }: AdminModuleContext): void {
  const { db, adminAudit } = services;

  api.route(app, {
    method: 'GET',
    url: '/api/admins',
    summary: 'List admin users',
    tags: ['admins'],
    response: z.array(adminView),
    preHandler: requirePermission('admins:read'),
    handler: async () => (await listAdminUsers(db)).map(viewAdmin),
  });

  api.route(app, {
    method: 'GET',
    url: '/api/admins/:id',
    summary: 'One admin user',
    tags: ['admins'],
    params: idParams,
    response: adminView,
    preHandler: requirePermission('admins:read'),
    handler: async ({ params }) => {
      const admin = await getAdminUserById(db, params.id);
      if (!admin) throw new GatehouseError('not_found', 'Admin user not found.');
      return viewAdmin(admin);
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/admins',
    summary: 'Create an admin user (owners)',
    tags: ['admins'],
    body: adminCreate,
    response: adminView,
    successStatus: 201,
    preHandler: requirePermission('admins:manage'),
    handler: async ({ body, req }) => {
      checkPassword(body.password, body.username);
      const created = await createAdminUser(db, {
        username: body.username,
        password_hash: await hashPassword(body.password),
        roles: body.roles,
        enabled: body.enabled,
        must_change_password: body.must_change_password,
      });
      const after = viewAdmin(created);
      await adminAudit.record(auditOf(req, { action: 'admin_user.create', outcome: 'success', status: 201, target: { type: 'admin_user', id: created.id }, changes: { after } }));
      return after;
    },
  });

  api.route(app, {
    method: 'PATCH',
    url: '/api/admins/:id',
    summary: 'Change an admin user (owners); a changed username, role set or enabled state ends its sessions at once',
    tags: ['admins'],
    params: idParams,
    body: adminUpdate,
    response: adminView,
    preHandler: requirePermission('admins:manage'),
    handler: async ({ params, body, req }) => {
      const passwordHash = body.password === undefined ? undefined : await hashPassword(body.password);
      const { before, after } = await db.transaction().execute(async (trx) => {
        const current = await getAdminUserById(trx, params.id);
        if (!current) throw new GatehouseError('not_found', 'Admin user not found.');
        if (body.password !== undefined) checkPassword(body.password, body.username ?? current.username);
        const stillOwner = (body.enabled ?? current.enabled) && (body.roles ?? current.roles).includes('owner');
        await keepAnOwner(trx, current, stillOwner);
        const patch: AdminUserPatch = {};
        if (body.username !== undefined) patch.username = body.username;
        if (body.roles !== undefined) patch.roles = body.roles;
        if (body.enabled !== undefined) patch.enabled = body.enabled;
        if (body.must_change_password !== undefined) patch.must_change_password = body.must_change_password;
        // updateAdminUser advances auth_version in the same UPDATE when username, roles or enabled change (spec §5.3).
        let updated = await updateAdminUser(trx, current.id, patch);
        if (updated && passwordHash !== undefined) {
          // A password set by an owner also ends the admin's sessions (setAdminPassword advances auth_version).
          updated = await setAdminPassword(trx, current.id, passwordHash, body.must_change_password ?? updated.must_change_password);
        }
        if (!updated) throw new GatehouseError('not_found', 'Admin user not found.');
        // A disabled admin keeps no automation credentials either.
        if (current.enabled && !updated.enabled) await deleteAdminTokensOfUser(trx, current.id);
        return { before: current, after: updated };
      });
      const view = viewAdmin(after);
      await adminAudit.record(
        auditOf(req, {
          action: 'admin_user.update',
          outcome: 'success',
          status: 200,
          target: { type: 'admin_user', id: after.id },
          changes: { before: viewAdmin(before), after: view },
          details: { password_changed: body.password !== undefined, auth_version_advanced: after.auth_version !== before.auth_version },
        }),
      );
      return view;
    },
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/admins/:id',
    summary: 'Delete an admin user and its API tokens (owners)',
    tags: ['admins'],
    params: idParams,
    successStatus: 204,
    preHandler: requirePermission('admins:manage'),
    handler: async ({ params, req, reply }) => {
      const before = await db.transaction().execute(async (trx) => {
        const current = await getAdminUserById(trx, params.id);
        if (!current) throw new GatehouseError('not_found', 'Admin user not found.');
        await keepAnOwner(trx, current, false);
        await deleteAdminUser(trx, current.id);
        return current;
      });
      await adminAudit.record(auditOf(req, { action: 'admin_user.delete', outcome: 'success', status: 204, target: { type: 'admin_user', id: before.id }, changes: { before: viewAdmin(before) } }));
      return reply.code(204).send();
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/admin-tokens',
    summary: 'The signed-in admin\'s API tokens (never the tokens themselves)',
    tags: ['admin-tokens'],
    response: z.array(tokenView),
    handler: async ({ req }) => (await listAdminTokens(db, adminOf(req).id)).map(viewToken),
  });

  api.route(app, {
    method: 'POST',
    url: '/api/admin-tokens',
    summary: 'Create an API token for the signed-in admin; the token is shown in this response only',
    tags: ['admin-tokens'],
    body: tokenCreate,
    response: tokenView.extend({ token: z.string() }),
    successStatus: 201,
    handler: async ({ body, req }) => {
      const admin = adminOf(req);
      let expiresAt: Date | null = null;
      if (body.expires_at !== undefined) {
        expiresAt = new Date(body.expires_at);
        if (expiresAt.getTime() <= Date.now()) throw validationError([{ loc: ['body', 'expires_at'], msg: 'Must be in the future', type: 'value_error' }]);
      }
      const token = generateAdminToken();
      const created = await createAdminToken(db, { admin_user_id: admin.id, name: body.name, token_hash: hashAdminToken(token), expires_at: expiresAt });
      const view = viewToken(created);
      await adminAudit.record(auditOf(req, { action: 'admin_token.create', outcome: 'success', status: 201, target: { type: 'admin_token', id: created.id }, changes: { after: view } }));
      return { ...view, token };
    },
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/admin-tokens/:id',
    summary: 'Delete an API token (one\'s own; owners may delete any)',
    tags: ['admin-tokens'],
    params: idParams,
    successStatus: 204,
    handler: async ({ params, req, reply }) => {
      const admin = adminOf(req);
      const anyToken = hasPermission(admin.roles, 'admins:manage');
      const deleted = await deleteAdminToken(db, params.id, anyToken ? undefined : admin.id);
      if (!deleted) throw new GatehouseError('not_found', 'Admin token not found.');
      await adminAudit.record(auditOf(req, { action: 'admin_token.delete', outcome: 'success', status: 204, target: { type: 'admin_token', id: params.id } }));
      return reply.code(204).send();
    },
  });
}
