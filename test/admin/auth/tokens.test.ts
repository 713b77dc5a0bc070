// Admin API tokens (shown once, hashed at rest, CSRF-exempt, deleted → 401) and the 422 shapes of the auth JSON bodies.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../../support/service.js';
import { getAdminTokenById } from '../../../src/store/repos/admin-tokens.js';
import { AdminClient, bearer } from '../../support/admin-client.js';
import { OWNER_PASSWORD } from '../../support/world.js';

describe('admin API tokens', () => {
  let svc: TestService;
  let owner: AdminClient;
  beforeAll(async () => {
    svc = await startTestService({ env: { SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD } });
    owner = await AdminClient.signIn(svc.adminUrl, 'admin', OWNER_PASSWORD);
  });
  afterAll(() => svc?.stop());

  it('creates a token shown once, stores only its hash, works without CSRF and dies when deleted', async () => {
    const created = await owner.request('POST', '/api/admin-tokens', { json: { name: 'deploy bot' } });
    expect(created.status).toBe(201);
    const { id, name, token } = created.json as { id: number; name: string; token: string };
    expect(name).toBe('deploy bot');
    expect(token).toMatch(/^gha_[A-Za-z0-9_-]{43}$/);

    const listed = await owner.request('GET', '/api/admin-tokens');
    expect(listed.json.map((t: { id: number }) => t.id)).toEqual([id]);
    expect(listed.text).not.toContain(token);
    const row = await getAdminTokenById(svc.running.services.db, id);
    expect(row!.token_hash).toBe(createHash('sha256').update(token).digest('hex'));

    // Bearer requests need no CSRF token and act with the admin's current roles.
    const session = await bearer(svc.adminUrl, token, 'GET', '/api/session');
    expect(session.json).toMatchObject({ username: 'admin', roles: ['owner'], csrf_token: null });
    const made = await bearer(svc.adminUrl, token, 'POST', '/api/admins', { username: 'ops', password: 'ops-password-1234', roles: ['viewer'] });
    expect(made.status).toBe(201);
    expect(made.text).not.toContain('ops-password-1234');
    expect(made.json).not.toHaveProperty('password_hash');
    expect((await getAdminTokenById(svc.running.services.db, id))!.last_used_at).toBeInstanceOf(Date);

    expect((await bearer(svc.adminUrl, `${token.slice(0, -2)}AA`, 'GET', '/api/session')).status).toBe(401);
    expect((await bearer(svc.adminUrl, 'gha_short', 'GET', '/api/session')).status).toBe(401);

    expect((await bearer(svc.adminUrl, token, 'DELETE', `/api/admin-tokens/${id}`)).status).toBe(204);
    const after = await bearer(svc.adminUrl, token, 'GET', '/api/session');
    expect(after.status).toBe(401);
    expect(after.json).toEqual({ detail: expect.any(String), code: 'unauthenticated' });
    expect((await owner.request('DELETE', `/api/admin-tokens/${id}`)).status).toBe(404);
  });

  it('refuses an expired token', async () => {
    const created = await owner.request('POST', '/api/admin-tokens', { json: { name: 'short-lived', expires_at: new Date(Date.now() + 1500).toISOString() } });
    expect(created.status).toBe(201);
    expect((await bearer(svc.adminUrl, created.json.token, 'GET', '/api/session')).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1600));
    expect((await bearer(svc.adminUrl, created.json.token, 'GET', '/api/session')).status).toBe(401);
  });

  it('answers invalid bodies and ids with 422 and exact locations', async () => {
    const expectLocs = async (method: string, path: string, json: unknown, locs: unknown[][]) => {
      const r = await owner.request(method, path, { json });
      expect(r.status, `${method} ${path}`).toBe(422);
      expect(r.json.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual(locs);
      for (const d of r.json.detail) expect(d).toEqual({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) });
    };
    await expectLocs('POST', '/api/admin-tokens', {}, [['body', 'name']]);
    await expectLocs('POST', '/api/admin-tokens', { name: 'x', expires_at: 'tomorrow' }, [['body', 'expires_at']]);
    await expectLocs('POST', '/api/admin-tokens', { name: 'x', scope: 'all' }, [['body', 'scope']]);
    await expectLocs('DELETE', '/api/admin-tokens/abc', undefined, [['path', 'id']]);
    await expectLocs('PATCH', '/api/admins/1.5', { roles: ['owner'] }, [['path', 'id']]);
    await expectLocs('POST', '/api/admins', { username: 'u', password: 'long-enough-password', roles: ['owner', 'root'] }, [['body', 'roles', 1]]);
    await expectLocs('POST', '/api/admins', { username: 'u', password: 'short', roles: [] }, [['body', 'password']]);
    await expectLocs('POST', '/auth/change-password', { current_password: OWNER_PASSWORD, new_password: 'new-password-123', confirm_password: 'new-password-124' }, [
      ['body', 'confirm_password'],
    ]);
    await expectLocs('POST', '/auth/change-password', { current_password: 'wrong-password-1', new_password: 'new-password-123', confirm_password: 'new-password-123' }, [
      ['body', 'current_password'],
    ]);
    expect((await owner.request('GET', '/api/admins/999999')).status).toBe(404);
    const openapi = (await (await fetch(`${svc.adminUrl}/api/openapi.json`)).json()) as { info: { version: string }; paths: Record<string, unknown> };
    expect(openapi.info.version).toBe('1.0.0rc13');
    expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining(['/api/admin-tokens', '/api/admin-tokens/{id}', '/api/admins/{id}', '/api/session']));
    // Anonymous callers get 401 before any validation.
    const anon = await fetch(`${svc.adminUrl}/api/admin-tokens/abc`, { method: 'DELETE' });
    expect(anon.status).toBe(401);
  });
});
