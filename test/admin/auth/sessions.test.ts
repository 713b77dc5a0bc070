// Session integrity: CSRF refuses and changes nothing, role/enabled changes revoke at once, the last owner stays, a new signing secret ends every session.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../../support/service.js';
import { createTestDatabase } from '../../support/pg.js';
import { getAdminUserByUsername } from '../../../src/store/repos/admin-users.js';
import { listAdminTokens } from '../../../src/store/repos/admin-tokens.js';
import { AdminClient, bearer, postForm } from '../../support/admin-client.js';
import { OWNER_PASSWORD } from '../../support/world.js';
import { dropRedisPrefix } from '../../support/redis.js';

describe('sessions, CSRF and the authorization version', () => {
  let svc: TestService;
  let owner: AdminClient;
  beforeAll(async () => {
    svc = await startTestService({ env: { SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD } });
    owner = await AdminClient.signIn(svc.adminUrl, 'admin', OWNER_PASSWORD);
  });
  afterAll(() => svc?.stop());
  const db = () => svc.running.services.db;

  it('refuses a mutation with a missing or wrong CSRF token and changes nothing', async () => {
    const body = { username: 'mallory', password: 'mallory-password-1', roles: ['owner'], must_change_password: false };
    const missing = await owner.request('POST', '/api/admins', { json: body, csrf: null });
    expect(missing.status).toBe(403);
    expect(missing.json.code).toBe('csrf_failed');
    const wrong = await owner.request('POST', '/api/admins', { json: body, csrf: `${owner.csrf.slice(0, -1)}x` });
    expect(wrong.status).toBe(403);
    expect(await getAdminUserByUsername(db(), 'mallory')).toBeUndefined();

    // The form field is checked too (a cross-site form post carries the cookie but not the token).
    const admin = await getAdminUserByUsername(db(), 'admin');
    const form = await postForm(
      svc.adminUrl,
      '/auth/change-password',
      { current_password: OWNER_PASSWORD, new_password: 'another-password-1', confirm_password: 'another-password-1', csrf_token: 'forged' },
      { cookie: owner.cookie },
    );
    expect(form.status).toBe(403);
    expect((await getAdminUserByUsername(db(), 'admin'))!.password_hash).toBe(admin!.password_hash);
    const logout = await owner.request('POST', '/auth/logout', { csrf: null });
    expect(logout.status).toBe(403);
    expect((await owner.request('GET', '/api/session')).status).toBe(200);

    expect((await owner.request('POST', '/api/admins', { json: body })).status).toBe(201);
    expect(await getAdminUserByUsername(db(), 'mallory')).toBeDefined();
  });

  it('revokes a second admin\'s session on its next request after the owner changes its roles', async () => {
    const created = await owner.request('POST', '/api/admins', {
      json: { username: 'bob', password: 'bob-password-1234', roles: ['admin'], must_change_password: false },
    });
    const bob = await AdminClient.signIn(svc.adminUrl, 'bob', 'bob-password-1234');
    expect((await bob.request('GET', '/api/admin-tokens')).status).toBe(200);
    // bob (admin) may read admins but never manage them.
    expect((await bob.request('GET', '/api/admins')).status).toBe(200);
    const denied = await bob.request('PATCH', `/api/admins/${created.json.id}`, { json: { roles: ['owner'] } });
    expect(denied.status).toBe(403);
    expect(denied.json.code).toBe('forbidden');

    const demoted = await owner.request('PATCH', `/api/admins/${created.json.id}`, { json: { roles: ['viewer'] } });
    expect(demoted.status).toBe(200);
    expect(demoted.json.roles).toEqual(['viewer']);
    const next = await bob.request('GET', '/api/session');
    expect(next.status).toBe(401);
    // Revoked, not merely refused once: the cookie stays dead.
    expect((await bob.request('GET', '/api/session')).status).toBe(401);

    // A PATCH that changes nothing relevant keeps sessions.
    const bob2 = await AdminClient.signIn(svc.adminUrl, 'bob', 'bob-password-1234');
    expect((await owner.request('PATCH', `/api/admins/${created.json.id}`, { json: { roles: ['viewer'] } })).status).toBe(200);
    expect((await bob2.request('GET', '/api/session')).status).toBe(200);
  });

  it('disabling an admin ends its sessions and removes its tokens', async () => {
    const created = await owner.request('POST', '/api/admins', {
      json: { username: 'trent', password: 'trent-password-12', roles: ['admin'], must_change_password: false },
    });
    const trent = await AdminClient.signIn(svc.adminUrl, 'trent', 'trent-password-12');
    const token = await trent.request('POST', '/api/admin-tokens', { json: { name: 'ci' } });
    expect(token.status).toBe(201);
    expect((await bearer(svc.adminUrl, token.json.token, 'GET', '/api/session')).status).toBe(200);

    expect((await owner.request('PATCH', `/api/admins/${created.json.id}`, { json: { enabled: false } })).status).toBe(200);
    expect((await trent.request('GET', '/api/session')).status).toBe(401);
    expect((await bearer(svc.adminUrl, token.json.token, 'GET', '/api/session')).status).toBe(401);
    expect(await listAdminTokens(db(), created.json.id)).toEqual([]);
  });

  it('keeps the last enabled owner', async () => {
    const me = (await getAdminUserByUsername(db(), 'admin'))!;
    const mallory = (await getAdminUserByUsername(db(), 'mallory'))!;
    expect((await owner.request('DELETE', `/api/admins/${mallory.id}`)).status).toBe(204);
    for (const json of [{ roles: ['admin'] }, { enabled: false }]) {
      const r = await owner.request('PATCH', `/api/admins/${me.id}`, { json });
      expect(r.status).toBe(409);
      expect(r.json.detail).toMatch(/last enabled owner/);
    }
    expect((await owner.request('DELETE', `/api/admins/${me.id}`)).status).toBe(409);
    expect((await getAdminUserByUsername(db(), 'admin'))!.roles).toEqual(['owner']);
  });
});

describe('the admin signing secret', () => {
  it('ends every session when it changes, and only then', async () => {
    const database = await createTestDatabase();
    const prefix = `ghtest:sig-${Date.now().toString(36)}:`;
    const env = (ref: string) => ({
      SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
      SERVICE_ADMIN__SIGNING_SECRET_REF: `env:${ref}`,
      GH_TEST_SIGNING_A: 'a'.repeat(40),
      GH_TEST_SIGNING_B: 'b'.repeat(40),
      SERVICE_REDIS__KEY_PREFIX: prefix,
    });
    try {
      let svc = await startTestService({ database, env: env('GH_TEST_SIGNING_A') });
      const client = await AdminClient.signIn(svc.adminUrl, 'admin', OWNER_PASSWORD);
      await svc.stop();

      // Same secret, new process: the session survives (the store holds it, not the process).
      svc = await startTestService({ database, env: env('GH_TEST_SIGNING_A') });
      const same = new AdminClient(svc.adminUrl, client.cookie, '');
      expect((await same.request('GET', '/api/session')).status).toBe(200);
      await svc.stop();

      svc = await startTestService({ database, env: env('GH_TEST_SIGNING_B') });
      const other = new AdminClient(svc.adminUrl, client.cookie, '');
      expect((await other.request('GET', '/api/session')).status).toBe(401);
      expect((await AdminClient.signIn(svc.adminUrl, 'admin', OWNER_PASSWORD)).cookie).toBeTruthy();
      await svc.stop();
    } finally {
      await database.drop();
      await dropRedisPrefix(prefix);
    }
  });
});
