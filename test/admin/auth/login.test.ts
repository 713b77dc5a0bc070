// Sign-in: success and failure, safe `next`, no session fixation, logout, disabled admins, and throttling with Retry-After and audit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminAuditEvent } from '../../../src/admin/audit-events.js';
import { startTestService, type TestService } from '../../support/service.js';
import { AdminClient, captureAudit, login } from '../../support/admin-client.js';
import { OWNER_PASSWORD } from '../../support/world.js';

describe('admin sign-in', () => {
  let svc: TestService;
  let audit: AdminAuditEvent[];
  beforeAll(async () => {
    svc = await startTestService({
      env: {
        SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
        SERVICE_ADMIN__LOGIN_THROTTLE__MAX_ATTEMPTS_PER_USERNAME: '3',
        SERVICE_ADMIN__LOGIN_THROTTLE__MAX_ATTEMPTS_PER_ADDRESS: '7',
        SERVICE_ADMIN__LOGIN_THROTTLE__WINDOW_SECONDS: '600',
      },
    });
    audit = captureAudit(svc);
  });
  afterAll(() => svc?.stop());

  it('answers 401 with the form again for a wrong password or unknown user, 303 with the cookie on success', async () => {
    const page = await fetch(`${svc.adminUrl}/auth/login?next=/dashboard/x`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('name="password"');

    const wrong = await login(svc.adminUrl, 'admin', 'not-the-password');
    expect(wrong.status).toBe(401);
    expect(wrong.cookie).toBeNull();
    expect(wrong.text).toContain('Invalid username or password.');
    expect(wrong.text).toContain('action="/auth/login"');
    const unknown = await login(svc.adminUrl, '<script>x</script>', 'whatever');
    expect(unknown.status).toBe(401);
    expect(unknown.text).toContain('value="&lt;script>x&lt;/script>"');
    expect(unknown.text).not.toContain('<script>x');
    expect(audit.filter((e) => e.action === 'auth.login_failed')).toHaveLength(2);

    const ok = await login(svc.adminUrl, 'admin', OWNER_PASSWORD, { next: '/dashboard/approvals?status=pending' });
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/dashboard/approvals?status=pending');
    const setCookie = ok.headers.getSetCookie().join('\n');
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Path=\//);
    expect(audit.some((e) => e.action === 'auth.login' && e.outcome === 'success')).toBe(true);

    for (const evil of ['//evil.example/x', 'https://evil.example/', '/\\evil.example']) {
      const r = await login(svc.adminUrl, 'admin', OWNER_PASSWORD, { next: evil });
      expect(r.headers.get('location'), evil).toBe('/dashboard/overview');
    }
  });

  it('rotates the session id at sign-in and deletes the session at logout', async () => {
    const first = await AdminClient.signIn(svc.adminUrl, 'admin', OWNER_PASSWORD);
    const again = await login(svc.adminUrl, 'admin', OWNER_PASSWORD, {});
    const relogin = await fetch(`${svc.adminUrl}/auth/login`, {
      method: 'POST',
      body: new URLSearchParams({ username: 'admin', password: OWNER_PASSWORD }),
      headers: { cookie: first.cookie },
      redirect: 'manual',
    });
    expect(relogin.status).toBe(303);
    // The session the browser carried into sign-in is gone; the other one is untouched.
    expect((await first.request('GET', '/api/session')).status).toBe(401);
    const second = new AdminClient(svc.adminUrl, again.cookie!, '');
    const s = await second.request('GET', '/api/session');
    expect(s.status).toBe(200);
    second.csrf = s.json.csrf_token;

    const out = await second.request('POST', '/auth/logout');
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe('/auth/login');
    expect((await second.request('GET', '/api/session')).status).toBe(401);
    const anonymous = await fetch(`${svc.adminUrl}/api/session`);
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ detail: expect.any(String) });
  });

  it('refuses a disabled admin with the same answer as a wrong password', async () => {
    const owner = await AdminClient.signIn(svc.adminUrl, 'admin', OWNER_PASSWORD);
    const created = await owner.request('POST', '/api/admins', {
      json: { username: 'carol', password: 'carol-password-123', roles: ['viewer'], enabled: false, must_change_password: false },
    });
    expect(created.status).toBe(201);
    const r = await login(svc.adminUrl, 'carol', 'carol-password-123');
    expect(r.status).toBe(401);
    expect(r.cookie).toBeNull();
  });

  it('throttles per username and per address with 429, Retry-After and an audit record', async () => {
    // Failures so far from this address: 3 (admin, <script>, carol). The username budget is 3.
    for (let i = 0; i < 3; i++) expect((await login(svc.adminUrl, 'admin', `wrong-${i}`)).status).toBe(401);
    const throttled = await login(svc.adminUrl, 'admin', OWNER_PASSWORD);
    expect(throttled.status).toBe(429);
    expect(throttled.cookie).toBeNull();
    const retryAfter = Number(throttled.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(500);
    expect(retryAfter).toBeLessThanOrEqual(600);
    const event = audit.find((e) => e.action === 'auth.login_throttled');
    expect(event).toMatchObject({ outcome: 'denied', status: 429, details: { username: 'admin', scope: 'username' } });

    // Another username still has budget until the address budget (7) is spent.
    expect((await login(svc.adminUrl, 'dave', 'x')).status).toBe(401);
    const byAddress = await login(svc.adminUrl, 'erin', 'x');
    expect(byAddress.status).toBe(429);
    expect(audit.filter((e) => e.action === 'auth.login_throttled').at(-1)?.details).toMatchObject({ scope: 'address' });
  });
});
