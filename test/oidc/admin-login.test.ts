// Admin single sign-on against a real oidc-provider over HTTP (spec §5.4–5.6): the whole flow, group roles, and one test per refusal (state, replay, concurrency, nonce, expiry, audience, azp, unknown subject, disabled admin, unlisted group), key rotation, break-glass.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startWorld, type World } from '../support/world.js';
import { login, sessionCookie } from '../support/admin-client.js';
import { TestProvider } from '../support/oidc-provider.js';
import { ADMIN_CLIENT, CookieBrowser, REDIRECT_URI, oidcEnv, signInAtProvider } from './support.js';

const GROUP_MAP = JSON.stringify({ 'gatehouse-approvers': ['approver'], 'gatehouse-auditors': ['auditor'] });
let provider: TestProvider;
let world: World;

beforeAll(async () => {
  provider = await TestProvider.start({ adminClient: { ...ADMIN_CLIENT, redirect_uris: [REDIRECT_URI] } });
  world = await startWorld({ env: { ...oidcEnv(provider), SERVICE_AUTH__OIDC__ADMIN_GROUP_ROLE_MAP: GROUP_MAP } });
}, 60_000);
afterAll(async () => {
  await world?.stop();
  await provider?.stop();
});

async function mappedAdmin(username: string, subject: string, groups: string[], roles: string[] = ['viewer']): Promise<number> {
  const created = await world.admin('POST', '/api/admins', { username, password: 'a-long-enough-password-917', roles, must_change_password: false });
  expect(created.status).toBe(201);
  provider.addAccount({ sub: subject, email: `${username}@example.com`, groups });
  expect((await world.admin('PUT', `/api/admin-auth/oidc/admins/${created.json.id}`, { subject })).status).toBe(200);
  return created.json.id as number;
}

/** Starts at the admin's /auth/oidc/login and returns the provider's redirect back (not yet delivered to the admin). */
async function providerRedirect(subject: string, next?: string, browser = new CookieBrowser()): Promise<URL> {
  const start = await browser.get(`${world.svc.adminUrl}/auth/oidc/login${next ? `?next=${encodeURIComponent(next)}` : ''}`);
  expect(start.status).toBe(303);
  const authUrl = new URL(start.headers.get('location')!);
  expect(authUrl.origin).toBe(provider.issuer);
  expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
  expect(authUrl.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(authUrl.searchParams.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(authUrl.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(authUrl.searchParams.get('scope')).toBe('openid email groups');
  const redirect = await signInAtProvider(browser, authUrl.href, subject);
  browsers.set(redirect.href, browser);
  return redirect;
}

/** The browser each provider redirect was made in: its callback carries that browser's flow cookie. */
const browsers = new Map<string, CookieBrowser>();

/** Delivers the provider's redirect to the admin's callback, in the browser that started it unless another is given. */
async function callback(redirect: URL, browser = browsers.get(redirect.href) ?? new CookieBrowser()): Promise<Response> {
  return browser.get(`${world.svc.adminUrl}/auth/oidc/callback${redirect.search}`);
}

async function sessionOf(res: Response): Promise<{ status: number; roles?: string[]; cookie: string | null }> {
  const cookie = sessionCookie({ headers: res.headers });
  if (!cookie) return { status: 0, cookie };
  const s = await fetch(`${world.svc.adminUrl}/api/session`, { headers: { cookie } });
  const body = (await s.json()) as { roles?: string[] };
  return { status: s.status, roles: body.roles, cookie } as { status: number; roles?: string[]; cookie: string | null };
}

function lastAudit(action: string): { details?: Record<string, unknown>; status?: number } | undefined {
  return [...world.audits].reverse().find((e) => e.action === action) as { details?: Record<string, unknown>; status?: number } | undefined;
}

describe('the whole flow over HTTP', () => {
  test('provider sign-in → callback → overview, with local roles ∪ mapped group roles', async () => {
    await mappedAdmin('alice', 'alice-sub', ['gatehouse-approvers', 'not-mapped-group']);
    const res = await callback(await providerRedirect('alice-sub', '/dashboard/approvals'));
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/dashboard/approvals');
    const s = await sessionOf(res);
    expect(s.status).toBe(200);
    expect(s.roles).toEqual(['approver', 'viewer']);
    expect(lastAudit('auth.login')?.details).toMatchObject({ method: 'oidc', subject: 'alice-sub', group_roles: ['approver'] });
  });

  test('a group outside admin_group_role_map gives no role', async () => {
    await mappedAdmin('bob', 'bob-sub', ['gatehouse-admins-typo', 'Gatehouse-Approvers']);
    const s = await sessionOf(await callback(await providerRedirect('bob-sub')));
    expect(s.roles).toEqual(['viewer']);
  });

  test('group roles are recomputed at each sign-in; a change ends the sessions holding the old ones', async () => {
    await mappedAdmin('carol', 'carol-sub', ['gatehouse-auditors']);
    const first = await sessionOf(await callback(await providerRedirect('carol-sub')));
    expect(first.roles).toEqual(['auditor', 'viewer']);
    provider.addAccount({ sub: 'carol-sub', groups: [] });
    const second = await sessionOf(await callback(await providerRedirect('carol-sub')));
    expect(second.roles).toEqual(['viewer']);
    const old = await fetch(`${world.svc.adminUrl}/api/session`, { headers: { cookie: first.cookie! } });
    expect(old.status).toBe(401);
  });

  test('the ID token of a rotated provider key verifies (the new kid is fetched)', async () => {
    await mappedAdmin('dave', 'dave-sub', []);
    await provider.rotate('admin-key-2');
    const res = await callback(await providerRedirect('dave-sub'));
    expect(res.status, JSON.stringify(lastAudit('auth.oidc_refused'))).toBe(303);
  });
});

describe('refusals: a page that says why, an audit event, no session', () => {
  const refused = async (res: Response, status: number, reason: RegExp, page: RegExp = /./) => {
    expect(res.status, JSON.stringify(lastAudit('auth.oidc_refused'))).toBe(status);
    expect(sessionCookie({ headers: res.headers })).toBeNull();
    expect(res.headers.get('content-type')).toContain('text/html');
    expect(await res.text()).toMatch(page);
    expect(String(lastAudit('auth.oidc_refused')?.details?.reason)).toMatch(reason);
  };

  test('tampered state', async () => {
    await mappedAdmin('erin', 'erin-sub', []);
    const redirect = await providerRedirect('erin-sub');
    const state = redirect.searchParams.get('state')!;
    redirect.searchParams.set('state', `${state.slice(0, -2)}${state.endsWith('AA') ? 'BB' : 'AA'}`);
    await refused(await callback(redirect), 400, /state unknown/, /expired or was already used/);
  });

  test('a provider redirect delivered to another browser (login CSRF) signs no one in and burns the state', async () => {
    await mappedAdmin('csrf-attacker', 'csrf-sub', []);
    // The attacker signs in at the provider in their own browser and keeps the redirect back instead of following it.
    const redirect = await providerRedirect('csrf-sub');
    const victim = new CookieBrowser();
    await refused(await callback(redirect, victim), 400, /another browser/, /another browser/);
    expect(victim.jar.get(new URL(world.svc.adminUrl).origin)?.has('gatehouse_session') ?? false).toBe(false);
    // The state was consumed by that attempt: the attacker's own browser cannot use it afterwards either.
    await refused(await callback(redirect), 400, /state unknown/);
    // A browser that started a flow of its own cannot finish someone else's with its cookie.
    await providerRedirect('csrf-sub', undefined, victim);
    const other = await providerRedirect('csrf-sub');
    await refused(await callback(other, victim), 400, /another browser/);
  });

  test('replayed callback', async () => {
    await mappedAdmin('frank', 'frank-sub', []);
    const redirect = await providerRedirect('frank-sub');
    expect((await callback(redirect)).status, JSON.stringify(lastAudit('auth.oidc_refused'))).toBe(303);
    await refused(await callback(redirect), 400, /state unknown/);
  });

  test('two concurrent callbacks: exactly one wins', async () => {
    await mappedAdmin('grace', 'grace-sub', []);
    const redirect = await providerRedirect('grace-sub');
    const answers = await Promise.all([callback(redirect), callback(redirect), callback(redirect)]);
    expect(answers.map((a) => a.status).sort()).toEqual([303, 400, 400]);
  });

  test('wrong nonce', async () => {
    await mappedAdmin('heidi', 'heidi-sub', []);
    provider.tamperIdToken = (c) => ({ ...c, nonce: 'not-the-nonce' });
    try {
      await refused(await callback(await providerRedirect('heidi-sub')), 401, /nonce/, /could not be verified/);
    } finally {
      provider.tamperIdToken = null;
    }
  });

  test('expired ID token', async () => {
    await mappedAdmin('ivan', 'ivan-sub', []);
    const now = Math.floor(Date.now() / 1000);
    provider.tamperIdToken = (c) => ({ ...c, iat: now - 3600, exp: now - 600 });
    try {
      await refused(await callback(await providerRedirect('ivan-sub')), 401, /exp|expired/i);
    } finally {
      provider.tamperIdToken = null;
    }
  });

  test('wrong audience', async () => {
    await mappedAdmin('judy', 'judy-sub', []);
    provider.tamperIdToken = (c) => ({ ...c, aud: 'another-client' });
    try {
      await refused(await callback(await providerRedirect('judy-sub')), 401, /aud/);
    } finally {
      provider.tamperIdToken = null;
    }
  });

  test('several audiences without a matching azp', async () => {
    await mappedAdmin('ken', 'ken-sub', []);
    provider.tamperIdToken = (c) => {
      const { azp: _azp, ...rest } = c;
      return { ...rest, aud: [ADMIN_CLIENT.client_id, 'another-client'] };
    };
    try {
      await refused(await callback(await providerRedirect('ken-sub')), 401, /azp|audience/i);
    } finally {
      provider.tamperIdToken = null;
    }
  });

  test('a forged ID token signature', async () => {
    await mappedAdmin('leo', 'leo-sub', []);
    const { newSigningKey } = await import('../support/oidc-provider.js');
    // The tamper hook re-signs the provider's ID token with a stranger's key under the published kid.
    const stranger = await newSigningKey(provider.keys[0]!.kid);
    const sign = provider.sign.bind(provider);
    provider.tamperIdToken = (c) => c;
    provider.sign = (claims, _key, alg) => sign(claims, stranger, alg);
    try {
      await refused(await callback(await providerRedirect('leo-sub')), 401, /signature/);
    } finally {
      provider.tamperIdToken = null;
      provider.sign = sign;
    }
  });

  test('unknown subject: never provisioned, never matched by email', async () => {
    provider.addAccount({ sub: 'stranger-sub', email: 'alice@example.com', groups: ['gatehouse-approvers'] });
    await refused(await callback(await providerRedirect('stranger-sub')), 403, /subject not mapped/, /No Gatehouse admin is mapped to this single sign-on account \(subject (&quot;|&#34;)stranger-sub/);
  });

  test('disabled admin', async () => {
    const id = await mappedAdmin('mallory', 'mallory-sub', []);
    expect((await world.admin('PATCH', `/api/admins/${id}`, { enabled: false })).status).toBe(200);
    await refused(await callback(await providerRedirect('mallory-sub')), 403, /admin disabled/, /disabled/);
  });
});

describe('break-glass password sign-in', () => {
  test('on (default): owners and admins keep password sign-in, others are refused with the reason', async () => {
    const owner = await login(world.svc.adminUrl, 'admin', 'world-owner-password-0001');
    expect(owner.status).toBe(303);
    await world.admin('POST', '/api/admins', { username: 'viewer-pw', password: 'a-long-enough-password-917', roles: ['viewer'], must_change_password: false });
    const viewer = await login(world.svc.adminUrl, 'viewer-pw', 'a-long-enough-password-917');
    expect(viewer.status).toBe(403);
    expect(viewer.cookie).toBeNull();
    expect(viewer.text).toContain('password sign-in is kept for owners and admins only');
    // The sign-in page offers single sign-on.
    expect(await (await fetch(`${world.svc.adminUrl}/auth/login`)).text()).toContain('href="/auth/oidc/login"');
  });

  test('off: no password sign-in at all, the bootstrap owner included', async () => {
    const strict = await startWorld({ env: { ...oidcEnv(provider), SERVICE_AUTH__OIDC__LOCAL_BREAK_GLASS_ENABLED: 'false' } }).catch((err: unknown) => err as Error);
    // startWorld signs the owner in with a password: with break-glass off that is refused.
    expect(strict).toBeInstanceOf(Error);
    expect((strict as Error).message).toMatch(/sign-in of admin failed: 403/);
  });
});

