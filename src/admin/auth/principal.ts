// The authenticated admin of a request (`req.admin`) and the permission preHandler every admin route uses.
import type { FastifyRequest, preHandlerHookHandler } from 'fastify';
import { GatehouseError } from '../../errors/registry.js';
import { hasPermission, type AdminRole, type Permission } from './permissions.js';

/** Who is acting: set by the auth guard on every guarded route, before any route preHandler runs. */
export interface AdminPrincipal {
  id: number;
  username: string;
  /** The admin's roles as read from the database on this very request. */
  roles: AdminRole[];
  /** How the request authenticated: a browser session (CSRF-checked) or an admin API token. */
  via: 'session' | 'token';
  /** The API token id when `via` is 'token'. */
  tokenId?: number;
  /** The initial password must still be changed: only the change-password routes are open (as read on this request). */
  mustChangePassword: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** null on the unguarded routes (/health, /ready, /auth/login, /api/openapi.json, GET /). */
    admin: AdminPrincipal | null;
  }
}

/** The acting admin; throws 401 when the route was not guarded (a programming error caught as unauthenticated). */
export function adminOf(req: FastifyRequest): AdminPrincipal {
  if (!req.admin) throw new GatehouseError('unauthenticated');
  return req.admin;
}

/** Route preHandler: 403 `forbidden` unless one of the admin's roles grants `permission` (src/admin/auth/permissions.ts). */
export function requirePermission(permission: Permission): preHandlerHookHandler {
  return async function checkPermission(req) {
    const admin = adminOf(req);
    if (!hasPermission(admin.roles, permission)) {
      throw new GatehouseError('forbidden', `This action needs the permission ${permission}, which none of your roles (${admin.roles.join(', ') || 'none'}) grants.`);
    }
  };
}
