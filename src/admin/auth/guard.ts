// The admin request guard: authenticates every admin route by session cookie or admin API token, revokes stale sessions, enforces the forced password change and CSRF.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatehouseError } from '../../errors/registry.js';
import { getAdminUserById } from '../../store/repos/admin-users.js';
import type { Db } from '../../store/repos/util.js';
import type { AdminPrincipal } from './principal.js';
import { adminRoles } from './permissions.js';
import { csrfTokenMatches, type AdminSessions, type LoadedSession } from './sessions.js';
import { authenticateAdminToken } from './tokens.js';
import { changePasswordPage } from './pages.js';
import { pageContext, sendPage } from '../console/context.js';
import { ASSET_ROUTE } from '../console/assets.js';

/** Routes anyone may call: liveness, readiness, the sign-in page and form, the API description, the root redirect and the console's static assets. */
const PUBLIC_ROUTES = new Set(['GET /health', 'GET /ready', 'GET /auth/login', 'POST /auth/login', 'GET /auth/oidc/login', 'GET /auth/oidc/callback', 'GET /api/openapi.json', 'GET /', `GET ${ASSET_ROUTE}`]);

/** What an admin who must still change the initial password may reach. */
const DURING_PASSWORD_CHANGE = new Set(['GET /auth/change-password', 'POST /auth/change-password', 'POST /auth/logout', 'GET /api/session']);

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface GuardOptions {
  db: Db;
  sessions: AdminSessions;
  cookieName: string;
  /** observability.public_stats_enabled: GET /metrics needs no sign-in. */
  publicMetrics?: boolean;
}

/** The session behind a session-authenticated request (for CSRF, logout and rotation). */
const sessionsByRequest = new WeakMap<FastifyRequest, LoadedSession>();

export function sessionOf(req: FastifyRequest): LoadedSession | undefined {
  return sessionsByRequest.get(req);
}

function routeKey(req: FastifyRequest): string {
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  return `${method} ${req.routeOptions.url ?? ''}`;
}

function isPageRequest(req: FastifyRequest): boolean {
  // /metrics is read by scrapers, not browsers: a refusal is a 401, not a redirect to the sign-in page.
  return (req.method === 'GET' || req.method === 'HEAD') && !req.url.startsWith('/api/') && req.routeOptions.url !== '/metrics';
}

/**
 * Installs the guard as root hooks: authentication in onRequest (before any body is parsed, so an
 * anonymous caller never reaches validation), CSRF in preHandler (after form bodies are parsed;
 * STACK-NOTES), both before any route-level preHandler such as requirePermission.
 */
export function installAdminGuard(app: FastifyInstance, opts: GuardOptions): void {
  app.decorateRequest('admin', null);

  app.addHook('onRequest', async (req, reply) => {
    const key = routeKey(req);
    if (PUBLIC_ROUTES.has(key) || (opts.publicMetrics === true && key === 'GET /metrics')) return;
    const authorization = req.headers.authorization;
    let principal: AdminPrincipal;
    if (authorization !== undefined) {
      const match = /^Bearer ([^\s]+)$/.exec(authorization);
      const found = match ? await authenticateAdminToken(opts.db, match[1]!) : null;
      if (!found) throw new GatehouseError('unauthenticated', 'Missing or invalid admin API token.');
      const { admin } = found;
      principal = { id: admin.id, username: admin.username, roles: admin.roles, via: 'token', tokenId: found.token.id, mustChangePassword: admin.must_change_password };
    } else {
      const session = await opts.sessions.load(req.cookies[opts.cookieName]);
      if (!session) return unauthenticated(req, reply, 'Sign in first.');
      const admin = await getAdminUserById(opts.db, session.record.admin_user_id);
      if (!admin || !admin.enabled || admin.auth_version !== session.record.auth_version) {
        // spec §5.3: a changed username, role set, enabled state or SSO subject revokes the session at once.
        await opts.sessions.destroy(session.id);
        void reply.clearCookie(opts.cookieName, { path: '/' });
        return unauthenticated(req, reply, 'Your session is no longer valid; sign in again.');
      }
      sessionsByRequest.set(req, session);
      // A single sign-on session adds the roles its IdP groups gave at sign-in to the local ones; the local password
      // change does not concern it (docs/admin-auth.md "Admin sign-in with single sign-on").
      const sso = session.record.sso_roles;
      const roles = sso === undefined ? admin.roles : adminRoles.filter((r) => admin.roles.includes(r) || sso.includes(r));
      principal = { id: admin.id, username: admin.username, roles, via: 'session', mustChangePassword: admin.must_change_password && sso === undefined };
    }
    req.admin = principal;
    if (principal.mustChangePassword && !DURING_PASSWORD_CHANGE.has(routeKey(req))) {
      const message = 'The initial password must be changed before anything else: POST /auth/change-password with current_password, new_password and confirm_password.';
      if (isPageRequest(req)) {
        return sendPage(reply, changePasswordPage({ ctx: pageContext(req), next: req.url }), 403);
      }
      throw new GatehouseError('password_change_required', message);
    }
  });

  app.addHook('preHandler', async (req) => {
    if (!MUTATING.has(req.method)) return;
    const session = sessionOf(req);
    // Bearer-token requests carry nothing ambient a browser could forge, so only sessions need the token.
    if (!session || req.admin?.via !== 'session') return;
    const header = req.headers['x-csrf-token'];
    const body = req.body as Record<string, unknown> | null | undefined;
    const presented = typeof header === 'string' ? header : body && typeof body === 'object' ? body.csrf_token : undefined;
    if (!csrfTokenMatches(presented, session.record.csrf_token)) throw new GatehouseError('csrf_failed');
  });
}

async function unauthenticated(req: FastifyRequest, reply: FastifyReply, message: string): Promise<FastifyReply> {
  if (isPageRequest(req)) {
    return reply.redirect(`/auth/login?next=${encodeURIComponent(req.url)}`, 303);
  }
  throw new GatehouseError('unauthenticated', message);
}
