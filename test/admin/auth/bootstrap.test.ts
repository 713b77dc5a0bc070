// The bootstrap owner: configured password (no forced change), the built-in default (change first), one owner under concurrent starts, CLI reset.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../../support/service.js';
import { withMigratedStore, type MigratedStore } from '../../support/pg.js';
import { DEFAULT_INITIAL_PASSWORD } from '../../../src/admin/auth/passwords.js';
import { ensureBootstrapOwner, resetAdminPassword } from '../../../src/admin/auth/bootstrap.js';
import { listAdminUsers } from '../../../src/store/repos/admin-users.js';
import { AdminClient, login, postForm } from '../../support/admin-client.js';
import { OWNER_PASSWORD } from '../../support/world.js';

describe('bootstrap with admin.bootstrap_password configured', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ env: { SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD } });
  });
  afterAll(() => svc?.stop());

  it('signs in as admin with the configured password and needs no change', async () => {
    expect((await login(svc.adminUrl, 'admin', DEFAULT_INITIAL_PASSWORD)).status).toBe(401);
    const owner = await AdminClient.signIn(svc.adminUrl, 'admin', OWNER_PASSWORD);
    const session = await owner.request('GET', '/api/session');
    expect(session.json).toMatchObject({ username: 'admin', roles: ['owner'], must_change_password: false });
    expect((await owner.request('GET', '/api/admins')).status).toBe(200);
  });
});

describe('bootstrap with the built-in initial password', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(() => svc?.stop());

  it('allows only session, change-password and logout until the password is changed', async () => {
    const owner = await AdminClient.signIn(svc.adminUrl, 'admin', DEFAULT_INITIAL_PASSWORD);
    expect((await owner.request('GET', '/api/session')).json.must_change_password).toBe(true);

    for (const [method, path, json] of [
      ['GET', '/api/admins', undefined],
      ['GET', '/api/admin-tokens', undefined],
      ['POST', '/api/admin-tokens', { name: 'ci' }],
    ] as const) {
      const r = await owner.request(method, path, { json });
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.json.code).toBe('password_change_required');
      expect(r.json.detail).toMatch(/change/i);
    }
    // A browser page answers 403 with the change form itself.
    const page = await owner.request('GET', '/dashboard/overview');
    expect(page.status).toBe(403);
    expect(page.text).toContain('action="/auth/change-password"');

    // The new password must be acceptable: too short, and not the built-in one.
    const weak = await owner.request('POST', '/auth/change-password', {
      json: { current_password: DEFAULT_INITIAL_PASSWORD, new_password: 'short', confirm_password: 'short' },
    });
    expect(weak.status).toBe(422);
    expect(weak.json.detail[0].loc).toEqual(['body', 'new_password']);

    // The form post (with the CSRF form field) changes it and rotates the session.
    const oldCookie = owner.cookie;
    const changed = await postForm(
      svc.adminUrl,
      '/auth/change-password',
      { current_password: DEFAULT_INITIAL_PASSWORD, new_password: OWNER_PASSWORD, confirm_password: OWNER_PASSWORD, csrf_token: owner.csrf },
      { cookie: owner.cookie },
    );
    expect(changed.status).toBe(303);
    const renewed = changed.headers.getSetCookie().find((c) => c.startsWith('gatehouse_session='))!.split(';')[0]!;
    expect(renewed).not.toBe(oldCookie);
    owner.cookie = renewed;
    expect((await owner.request('GET', '/api/admins')).status).toBe(200);
    expect((await owner.request('GET', '/api/session')).json.must_change_password).toBe(false);
    // The session that existed before the change is gone.
    expect((await new AdminClient(svc.adminUrl, oldCookie, '').request('GET', '/api/session')).status).toBe(401);
    // The default no longer opens anything.
    expect((await login(svc.adminUrl, 'admin', DEFAULT_INITIAL_PASSWORD)).status).toBe(401);
  });
});

describe('bootstrap functions on the store', () => {
  let m: MigratedStore;
  beforeAll(async () => {
    m = await withMigratedStore({ poolMax: 6 });
  });
  afterAll(() => m.cleanup());

  it('creates exactly one owner when replicas start together, and reset-password ends the forced change', async () => {
    const outcomes = await Promise.all(Array.from({ length: 4 }, () => ensureBootstrapOwner(m.store.db, null)));
    expect(outcomes.filter((o) => o === 'created_with_default_password')).toHaveLength(1);
    const users = await listAdminUsers(m.store.db);
    expect(users.map((u) => [u.username, u.roles, u.must_change_password])).toEqual([['admin', ['owner'], true]]);
    expect(users[0]!.password_hash).toMatch(/^\$argon2id\$/);

    await expect(resetAdminPassword(m.store.db, 'admin', 'short')).rejects.toThrow(TypeError);
    await expect(resetAdminPassword(m.store.db, 'nobody', OWNER_PASSWORD)).rejects.toMatchObject({ code: 'not_found' });
    const reset = await resetAdminPassword(m.store.db, 'admin', OWNER_PASSWORD);
    expect(reset.must_change_password).toBe(false);
    expect(reset.auth_version).toBe(users[0]!.auth_version + 1);
    expect(await ensureBootstrapOwner(m.store.db, 'ignored-now-password')).toBe('exists');
  });
});

describe('embedded development mode (PGlite and in-process coordination)', () => {
  it('bootstraps the owner and keeps sessions and CSRF working', async () => {
    const svc = await startTestService({ embedded: true });
    try {
      const owner = await AdminClient.signIn(svc.adminUrl, 'admin', DEFAULT_INITIAL_PASSWORD);
      const changed = await owner.request('POST', '/auth/change-password', {
        json: { current_password: DEFAULT_INITIAL_PASSWORD, new_password: OWNER_PASSWORD, confirm_password: OWNER_PASSWORD },
      });
      expect(changed.status).toBe(200);
      owner.csrf = changed.json.csrf_token;
      expect((await owner.request('POST', '/api/admin-tokens', { json: { name: 'x' }, csrf: null })).status).toBe(403);
      expect((await owner.request('POST', '/api/admin-tokens', { json: { name: 'x' } })).status).toBe(201);
    } finally {
      await svc.stop();
    }
    // PGlite's first start (WASM compile, migrations) takes 30–45 s on a loaded two-core machine: a guard, not a target.
  }, 120_000);
});
