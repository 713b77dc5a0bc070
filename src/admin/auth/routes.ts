// Sign-in, change-password, logout and the session description: /auth/login, /auth/change-password, /auth/logout, /api/session.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import { getAdminUserById, getAdminUserByUsername, recordAdminLogin, setAdminPassword } from '../../store/repos/admin-users.js';
import type { AdminModuleContext } from '../module.js';
import type { AdminAuditEvent } from '../audit-events.js';
import { validationError } from '../../http/validation.js';
import { adminOf } from './principal.js';
import { sessionOf } from './guard.js';
import { hashPassword, passwordProblems, verifyPassword } from './passwords.js';
import { changePasswordPage, loginPage as plainLoginPage, safeNext } from './pages.js';
// Form posts get redirects and pages; API clients (JSON body, or asking for JSON only) get JSON.
import { pageContext, sendPage, wantsJson } from '../console/context.js';
import { registerFormPage } from '../console/forms.js';
import type { AdminSessions } from './sessions.js';
import type { LoginThrottle } from './throttle.js';

export interface AuthRouteDeps extends AdminModuleContext {
  sessions: AdminSessions;
  throttle: LoginThrottle;
}

const loginForm = z.object({
  username: z.string().min(1).max(128),
  password: z.string().min(1).max(1024),
  next: z.string().max(2048).optional(),
});

const changePasswordForm = z.object({
  current_password: z.string().min(1).max(1024),
  new_password: z.string().min(1).max(1024),
  confirm_password: z.string().min(1).max(1024),
  next: z.string().max(2048).optional(),
  csrf_token: z.string().max(256).optional(),
});

const sessionResponse = z.object({
  username: z.string(),
  roles: z.array(z.string()),
  csrf_token: z.string().nullable(),
  must_change_password: z.boolean(),
});

export function auditOf(req: FastifyRequest, event: Omit<AdminAuditEvent, 'request_id' | 'client_ip' | 'admin_user_id'> & { admin_user_id?: number | null }): AdminAuditEvent {
  return { request_id: req.id, client_ip: req.ip, admin_user_id: req.admin?.id ?? null, ...event };
}

export function registerAuthRoutes(deps: AuthRouteDeps): void {
  const { app, api, services, sessions, throttle } = deps;
  const { db, adminAudit } = services;
  const cookie = services.config.admin.cookie;
  const cookieOptions = {
    path: '/',
    httpOnly: true,
    secure: cookie.secure,
    sameSite: cookie.same_site,
    maxAge: services.config.admin.session_ttl_seconds,
  } as const;

  const oidc = services.config.auth.oidc;
  // With single sign-on on, the sign-in page offers it (docs/admin-auth.md "Admin sign-in with single sign-on").
  const loginPage = (opts: Parameters<typeof plainLoginPage>[0]) => plainLoginPage({ ...opts, sso: oidc.enabled });

  const startSession = async (reply: FastifyReply, admin: { id: number; auth_version: number }) => {
    const { cookieValue, session } = await sessions.create(admin);
    void reply.setCookie(cookie.name, cookieValue, cookieOptions);
    return session;
  };

  // A browser's invalid form comes back as its page with the messages at the fields (spec §2 "Console form bodies").
  registerFormPage(app, 'POST', '/auth/login', (_req, ctx, form) => loginPage({ ctx, form }));
  registerFormPage(app, 'POST', '/auth/change-password', (_req, ctx, form) => changePasswordPage({ ctx, form }));

  api.describe({ method: 'GET', url: '/auth/login', summary: 'The sign-in form', tags: ['auth'], query: z.object({ next: z.string().optional() }), produces: ['text/html'] });
  app.get('/auth/login', async (req, reply) => {
    const next = (req.query as Record<string, unknown>).next;
    return sendPage(reply, loginPage({ ctx: pageContext(req), next: safeNext(next, '') }));
  });

  api.route(app, {
    method: 'POST',
    url: '/auth/login',
    summary: 'Sign in with username and password (form); 303 to `next` with the session cookie',
    tags: ['auth'],
    body: loginForm,
    successStatus: 303,
    handler: async ({ body, req, reply }) => {
      const address = req.ip;
      // Break-glass (spec §5.5): with single sign-on on, password sign-in exists only when local_break_glass_enabled.
      if (oidc.enabled && !oidc.local_break_glass_enabled) {
        await adminAudit.record(auditOf(req, { action: 'auth.login_refused', outcome: 'denied', status: 403, details: { username: body.username, reason: 'password sign-in off (single sign-on only)' } }));
        const message = 'Password sign-in is turned off: this Gatehouse uses single sign-on only (auth.oidc.local_break_glass_enabled is false). Use "Sign in with single sign-on".';
        if (wantsJson(req)) throw new GatehouseError('forbidden', message);
        return sendPage(reply, loginPage({ ctx: pageContext(req), next: safeNext(body.next, ''), form: { values: {}, errors: {}, message } }), 403);
      }
      const verdict = await throttle.check(body.username, address);
      if (verdict.throttled) {
        await adminAudit.record(auditOf(req, { action: 'auth.login_throttled', outcome: 'denied', status: 429, details: { username: body.username, scope: verdict.scope } }));
        const message = 'Too many failed sign-in attempts; try again later.';
        if (wantsJson(req)) throw new GatehouseError('rate_limited', message, { retryAfterSeconds: verdict.retryAfterSeconds });
        void reply.header('retry-after', String(verdict.retryAfterSeconds));
        return sendPage(reply, loginPage({ ctx: pageContext(req), next: safeNext(body.next, ''), form: { values: { username: body.username }, errors: {}, message: `${message} (in ${verdict.retryAfterSeconds} s)` } }), 429);
      }
      const admin = await getAdminUserByUsername(db, body.username);
      const passwordOk = await verifyPassword(admin?.password_hash, body.password);
      if (!admin || !passwordOk || !admin.enabled) {
        await throttle.recordFailure(body.username, address);
        const reason = !admin ? 'unknown_user' : !passwordOk ? 'wrong_password' : 'disabled';
        await adminAudit.record(auditOf(req, { action: 'auth.login_failed', outcome: 'failure', status: 401, admin_user_id: admin?.id ?? null, details: { username: body.username, reason } }));
        // One message for every cause, so the page does not tell which usernames exist or are disabled.
        return sendPage(reply, loginPage({ ctx: pageContext(req), next: safeNext(body.next, ''), form: { values: { username: body.username }, errors: {}, message: 'Invalid username or password.' } }), 401);
      }
      // Break-glass is for local owners and admins only; checked after the password, so it reveals nothing of others' roles.
      if (oidc.enabled && !admin.roles.some((r) => r === 'owner' || r === 'admin')) {
        await adminAudit.record(auditOf(req, { action: 'auth.login_refused', outcome: 'denied', status: 403, admin_user_id: admin.id, details: { username: body.username, reason: 'break-glass password sign-in is for owners and admins only' } }));
        const message = 'While single sign-on is on, password sign-in is kept for owners and admins only (break-glass). Use "Sign in with single sign-on".';
        if (wantsJson(req)) throw new GatehouseError('forbidden', message);
        return sendPage(reply, loginPage({ ctx: pageContext(req), next: safeNext(body.next, ''), form: { values: { username: body.username }, errors: {}, message } }), 403);
      }
      await throttle.reset(body.username);
      // No fixation: a session the browser already carried is ended and a new id issued.
      const previous = sessions.verifyCookie(req.cookies[cookie.name]);
      if (previous) await sessions.destroy(previous);
      await startSession(reply, admin);
      await recordAdminLogin(db, admin.id);
      await adminAudit.record(auditOf(req, { action: 'auth.login', outcome: 'success', status: 303, admin_user_id: admin.id, details: { username: admin.username, must_change_password: admin.must_change_password } }));
      return reply.redirect(safeNext(body.next), 303);
    },
  });

  api.describe({ method: 'GET', url: '/auth/change-password', summary: 'The change-password form (carries the CSRF token)', tags: ['auth'], produces: ['text/html'] });
  app.get('/auth/change-password', async (req, reply) => {
    const next = (req.query as Record<string, unknown>).next;
    return sendPage(reply, changePasswordPage({ ctx: pageContext(req), next: safeNext(next, '') }));
  });

  api.route(app, {
    method: 'POST',
    url: '/auth/change-password',
    summary: 'Change the signed-in admin\'s password (form or JSON); ends every other session of the admin',
    tags: ['auth'],
    body: changePasswordForm,
    handler: async ({ body, req, reply }) => {
      const principal = adminOf(req);
      if (body.new_password !== body.confirm_password) {
        throw validationError([{ loc: ['body', 'confirm_password'], msg: 'The new password and its confirmation differ', type: 'value_error' }]);
      }
      const problems = passwordProblems(body.new_password, principal.username);
      if (body.new_password === body.current_password) problems.push('must differ from the current password');
      if (problems.length > 0) throw validationError([{ loc: ['body', 'new_password'], msg: `The new password ${problems.join('; ')}`, type: 'value_error' }]);
      const verdict = await throttle.check(principal.username, req.ip);
      if (verdict.throttled) {
        await adminAudit.record(auditOf(req, { action: 'auth.password_change_throttled', outcome: 'denied', status: 429, target: { type: 'admin_user', id: principal.id } }));
        throw new GatehouseError('rate_limited', 'Too many failed attempts; try again later.', { retryAfterSeconds: verdict.retryAfterSeconds });
      }
      const admin = await getAdminUserById(db, principal.id);
      if (!admin || !(await verifyPassword(admin.password_hash, body.current_password))) {
        await throttle.recordFailure(principal.username, req.ip);
        await adminAudit.record(auditOf(req, { action: 'auth.password_change_failed', outcome: 'failure', status: 422, target: { type: 'admin_user', id: principal.id } }));
        throw validationError([{ loc: ['body', 'current_password'], msg: 'The current password is incorrect', type: 'value_error' }]);
      }
      // The new hash and the auth_version advance land together: every other session of this admin ends.
      const updated = await setAdminPassword(db, admin.id, await hashPassword(body.new_password), false);
      if (!updated) throw new GatehouseError('unauthenticated');
      await adminAudit.record(auditOf(req, { action: 'auth.password_change', outcome: 'success', status: 200, target: { type: 'admin_user', id: admin.id } }));
      let csrfToken: string | null = null;
      const current = sessionOf(req);
      if (current) {
        await sessions.destroy(current.id);
        csrfToken = (await startSession(reply, updated)).record.csrf_token;
      }
      if (!wantsJson(req)) return reply.redirect(safeNext(body.next), 303);
      return { detail: 'Password changed.', csrf_token: csrfToken };
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/auth/logout',
    summary: 'End the current session',
    tags: ['auth'],
    handler: async ({ req, reply }) => {
      const current = sessionOf(req);
      if (current) await sessions.destroy(current.id);
      void reply.clearCookie(cookie.name, { path: '/' });
      await adminAudit.record(auditOf(req, { action: 'auth.logout', outcome: 'success', status: 200 }));
      if (!wantsJson(req)) return reply.redirect('/auth/login', 303);
      return { detail: 'Signed out.' };
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/session',
    summary: 'The signed-in admin, its roles and the CSRF token for mutating requests',
    tags: ['auth'],
    response: sessionResponse,
    handler: async ({ req }) => {
      const principal = adminOf(req);
      return {
        username: principal.username,
        roles: principal.roles,
        csrf_token: sessionOf(req)?.record.csrf_token ?? null,
        must_change_password: principal.mustChangePassword,
      };
    },
  });
}
