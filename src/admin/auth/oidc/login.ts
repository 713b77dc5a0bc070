// Admin single sign-on (spec §5.4, §5.6): /auth/oidc/login starts an authorization-code flow with PKCE S256, state and nonce; /auth/oidc/callback verifies the ID token and signs in the pre-provisioned admin mapped to its subject.
import type { FastifyReply, FastifyRequest } from 'fastify';
import * as client from 'openid-client';
import { errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import { z } from 'zod';
import { recordAdminLogin } from '../../../store/repos/admin-users.js';
import { getAdminBySubject } from '../../../store/repos/oidc-subjects.js';
import { AGENT_JWT_ALGORITHMS } from '../../../identity/index.js';
import { JWKS_COOLDOWN_MS, type OidcProvider } from '../../../oidc/index.js';
import type { AdminModuleContext } from '../../module.js';
import { auditOf } from '../routes.js';
import { oidcRefusalPage, safeNext } from '../pages.js';
import { pageContext, sendPage } from '../../console/context.js';
import { adminRoles, type AdminRole } from '../permissions.js';
import type { AdminSessions } from '../sessions.js';
import { OidcFlows, sameBrowser } from './flow.js';

/** The cookie binding a sign-in flow to the browser that started it (flow.ts); SameSite=Lax, as the provider's redirect back is a cross-site navigation. */
const FLOW_COOKIE = 'gatehouse_oidc_flow';
const FLOW_COOKIE_PATH = '/auth/oidc/';

export interface OidcLoginDeps extends AdminModuleContext {
  sessions: AdminSessions;
  provider: OidcProvider;
}

/** A refused sign-in: the page the browser sees (status, one clear sentence) and the audit reason. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly userMessage: string,
    readonly reason: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(reason);
  }
}


/** Exact IdP group names → allowlisted admin roles (auth.oidc.admin_group_role_map); unknown groups give nothing. */
export function rolesFromGroups(groups: unknown, map: Readonly<Record<string, readonly AdminRole[]>>): AdminRole[] {
  if (!Array.isArray(groups)) return [];
  const roles = new Set<AdminRole>();
  for (const g of groups) {
    if (typeof g !== 'string' || !Object.hasOwn(map, g)) continue;
    for (const r of map[g]!) if ((adminRoles as readonly string[]).includes(r)) roles.add(r);
  }
  return adminRoles.filter((r) => roles.has(r));
}

function jwtReason(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'ID token expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `ID token claim ${err.claim} invalid`;
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return 'ID token algorithm not allowed';
  if (err instanceof joseErrors.JWSSignatureVerificationFailed || err instanceof joseErrors.JWKSNoMatchingKey) return 'ID token signature invalid';
  return 'ID token invalid';
}

/** openid-client's errors name the check that failed (never a token); bounded for the audit entry. */
function clientReason(err: unknown): string {
  type Layer = { code?: unknown; message?: unknown; error?: unknown; claim?: unknown; cause?: Layer };
  const e = err as Layer;
  const code = typeof e.code === 'string' ? e.code : typeof e.error === 'string' ? e.error : 'error';
  // openid-client wraps oauth4webapi's error, whose message names the check ('unexpected ID Token "nonce" claim value').
  const inner = e.cause && typeof e.cause.message === 'string' ? e.cause : e;
  const message = typeof inner.message === 'string' ? inner.message.slice(0, 200) : '';
  const claimOf = (l: Layer | undefined) => (typeof l?.claim === 'string' ? l.claim : undefined);
  const claim = claimOf(inner.cause) ?? claimOf(e.cause);
  return `${code}: ${message}${claim ? ` (claim ${claim.slice(0, 32)})` : ''}`;
}

export function registerOidcLogin(deps: OidcLoginDeps): void {
  const { app, api, services, sessions, provider } = deps;
  const { config, db, coord, adminAudit } = services;
  const settings = config.auth.oidc;
  const clientId = settings.admin_client_id!;
  const redirectUri = settings.admin_redirect_uri!;
  const flows = new OidcFlows(coord, settings.flow_ttl_seconds);
  const cookie = config.admin.cookie;
  const secret = services.secrets.oidcClientSecret() ?? '';

  let configuration: client.Configuration | null = null;
  /** openid-client's view of the provider, from the checked discovery document (no second discovery request). */
  const clientConfig = (): client.Configuration | null => {
    if (configuration) return configuration;
    const metadata = provider.metadata;
    if (!metadata) return null;
    const c = new client.Configuration(metadata as client.ServerMetadata, clientId, { client_secret: secret, [client.clockTolerance]: settings.clock_tolerance_seconds }, client.ClientSecretBasic(secret));
    c[client.customFetch] = (url, options) => provider.fetch(url, options as RequestInit);
    // Plain HTTP only where the operator allowed it (never in production; config/invariants.ts).
    if (settings.allow_insecure_endpoints) client.allowInsecureRequests(c);
    configuration = c;
    return c;
  };

  const refuse = async (req: FastifyRequest, reply: FastifyReply, r: Refusal): Promise<FastifyReply> => {
    await adminAudit.record(auditOf(req, { action: 'auth.oidc_refused', outcome: 'denied', status: r.status, details: { reason: r.reason, ...r.details } }));
    return sendPage(reply.header('cache-control', 'no-store'), oidcRefusalPage({ ctx: pageContext(req), message: r.userMessage }), r.status);
  };

  api.describe({ method: 'GET', url: '/auth/oidc/login', summary: 'Start single sign-on: 303 to the provider with PKCE S256, state and nonce', tags: ['auth'], query: z.object({ next: z.string().optional() }), produces: ['text/html'] });
  app.get('/auth/oidc/login', async (req, reply) => {
    const c = clientConfig();
    if (!c) return sendPage(reply.header('cache-control', 'no-store'), oidcRefusalPage({ ctx: pageContext(req), message: 'The identity provider cannot be reached right now; try again shortly.' }), 503);
    const flow = await flows.start(safeNext((req.query as Record<string, unknown>).next));
    const url = client.buildAuthorizationUrl(c, {
      redirect_uri: redirectUri,
      scope: settings.scopes.join(' '),
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(flow.verifier),
      code_challenge_method: 'S256',
      state: flow.state,
      nonce: flow.nonce,
    });
    void reply.setCookie(FLOW_COOKIE, flow.browserBinding, { path: FLOW_COOKIE_PATH, httpOnly: true, secure: cookie.secure, sameSite: 'lax', maxAge: settings.flow_ttl_seconds });
    return reply.header('cache-control', 'no-store').redirect(url.href, 303);
  });

  api.describe({ method: 'GET', url: '/auth/oidc/callback', summary: 'The provider\'s redirect back: verifies the answer and the ID token, signs in the mapped admin (303) or shows why not', tags: ['auth'], produces: ['text/html'] });
  app.get('/auth/oidc/callback', async (req, reply) => {
    try {
      const query = req.query as Record<string, unknown>;
      // Consumed first, whatever follows: a state is good for one attempt only.
      const flow = await flows.consume(query.state);
      if (!flow) throw new Refusal(400, 'This sign-in attempt has expired or was already used. Start again from the sign-in page.', 'state unknown, expired or already used');
      const binding = req.cookies[FLOW_COOKIE];
      void reply.clearCookie(FLOW_COOKIE, { path: FLOW_COOKIE_PATH });
      if (!sameBrowser(flow, binding)) throw new Refusal(400, 'This sign-in attempt was started in another browser. Start again from the sign-in page.', 'state started in another browser');
      if (typeof query.error === 'string') throw new Refusal(401, 'The identity provider did not sign you in.', `provider error: ${query.error.slice(0, 100)}`);
      const c = clientConfig();
      if (!c) throw new Refusal(503, 'The identity provider cannot be reached right now; try again shortly.', 'provider not discovered');
      const currentUrl = new URL(redirectUri);
      currentUrl.search = new URL(req.url, 'http://callback.invalid').search;
      let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
      try {
        tokens = await client.authorizationCodeGrant(c, currentUrl, { pkceCodeVerifier: flow.verifier, expectedNonce: flow.nonce, expectedState: query.state as string, idTokenExpected: true });
      } catch (err) {
        throw new Refusal(401, 'The identity provider\'s answer could not be verified.', clientReason(err));
      }
      const claims = await verifyIdToken(tokens.id_token!, flow.nonce);
      const subject = claims.sub!;
      const admin = await getAdminBySubject(db, provider.issuer, subject);
      // Never provisioned, never found by email: only an owner's mapping makes a subject an admin (spec §5.4).
      if (!admin) throw new Refusal(403, `No Gatehouse admin is mapped to this single sign-on account (subject "${subject.slice(0, 128)}"). Ask an owner to map it.`, 'subject not mapped', { subject: subject.slice(0, 512) });
      if (!admin.enabled) throw new Refusal(403, 'This Gatehouse admin account is disabled.', 'admin disabled', { subject: subject.slice(0, 512), admin_user_id: admin.id });
      const ssoRoles = rolesFromGroups(claims.groups, settings.admin_group_role_map);
      const current = await applyGroupRoles(admin.id, admin.auth_version, ssoRoles);
      const previous = sessions.verifyCookie(req.cookies[cookie.name]);
      if (previous) await sessions.destroy(previous);
      const { cookieValue } = await sessions.create({ id: admin.id, auth_version: current }, { sso_roles: ssoRoles });
      void reply.setCookie(cookie.name, cookieValue, { path: '/', httpOnly: true, secure: cookie.secure, sameSite: cookie.same_site, maxAge: config.admin.session_ttl_seconds });
      await recordAdminLogin(db, admin.id);
      await adminAudit.record(
        auditOf(req, { action: 'auth.login', outcome: 'success', status: 303, admin_user_id: admin.id, details: { username: admin.username, method: 'oidc', subject: subject.slice(0, 512), group_roles: ssoRoles } }),
      );
      return reply.header('cache-control', 'no-store').redirect(safeNext(flow.next), 303);
    } catch (err) {
      if (err instanceof Refusal) return refuse(req, reply, err);
      throw err;
    }
  });

  /** The ID token checked again by Gatehouse itself: signature from the discovered JWKS (rotation handled), iss, aud, azp, exp, nonce. */
  async function verifyIdToken(idToken: string, nonce: string): Promise<JWTPayload> {
    const keys = provider.keys();
    if (!keys) throw new Refusal(503, 'The identity provider cannot be reached right now; try again shortly.', 'provider keys unavailable');
    const verify = () =>
      jwtVerify(idToken, keys, {
        issuer: provider.issuer,
        audience: clientId,
        algorithms: [...AGENT_JWT_ALGORITHMS],
        clockTolerance: settings.clock_tolerance_seconds,
        requiredClaims: ['exp', 'iat', 'sub'],
      });
    let payload: JWTPayload;
    try {
      try {
        ({ payload } = await verify());
      } catch (err) {
        // A key the provider just rotated in, met within the key-set cooldown: a person is waiting, so wait the cooldown
        // out (at most JWKS_COOLDOWN_MS) and try once more, instead of refusing a genuine sign-in.
        if (!(err instanceof joseErrors.JWKSNoMatchingKey) || !provider.jwksCoolingDown) throw err;
        const deadline = Date.now() + JWKS_COOLDOWN_MS + 500;
        while (provider.jwksCoolingDown && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        ({ payload } = await verify());
      }
    } catch (err) {
      throw new Refusal(401, 'The identity provider\'s answer could not be verified.', jwtReason(err));
    }
    if (Array.isArray(payload.aud) && payload.aud.length > 1 && payload.azp !== clientId) throw new Refusal(401, 'The identity provider\'s answer could not be verified.', 'ID token has several audiences without a matching azp');
    if (payload.azp !== undefined && payload.azp !== clientId) throw new Refusal(401, 'The identity provider\'s answer could not be verified.', 'ID token azp is another client');
    if (payload.nonce !== nonce) throw new Refusal(401, 'The identity provider\'s answer could not be verified.', 'ID token nonce mismatch');
    return payload;
  }

  /**
   * The group-derived roles are recomputed at every sign-in; when they differ from the previous sign-in's (or that is not
   * known), the admin's authorization version advances, so sessions holding the old roles end (spec §5.3, §5.5).
   */
  async function applyGroupRoles(adminId: number, authVersion: number, roles: AdminRole[]): Promise<number> {
    const key = `oidc:group-roles:${adminId}`;
    const value = JSON.stringify(roles);
    const previous = await coord.get(key);
    let version = authVersion;
    if (previous !== value) {
      const row = await db.updateTable('admin_users').set((eb) => ({ auth_version: eb('auth_version', '+', 1) })).where('id', '=', adminId).returning('auth_version').executeTakeFirst();
      version = row?.auth_version ?? authVersion;
    }
    // Outlives every session made with these roles (the absolute session lifetime).
    await coord.set(key, value, { ttlMs: config.admin.session_ttl_seconds * 1000 });
    return version;
  }
}
