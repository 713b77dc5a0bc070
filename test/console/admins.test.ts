// Admin-user and account pages: owners create and change admins (roles, state, password, single sign-on subject, tokens, delete) through forms with 422 at the field, CSRF and the last-owner rule; an admin's changed roles end its sessions; every admin manages its own API tokens (shown once) and signs out; non-owners get no buttons and are refused anyway.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { ConsoleClient, fieldError, inputValue, ownerAndViewer } from './support/pages.js';

const ISSUER = 'https://idp.example.com/realms/gatehouse';
const BASE = '/dashboard/admins';
let world: World;
let owner: ConsoleClient;
let viewer: ConsoleClient;

const admins = async () => (await world.admin('GET', '/api/admins')).json as Array<{ id: number; username: string; roles: string[]; enabled: boolean; must_change_password: boolean; oidc_subject: string | null; oidc_email: string | null }>;
const adminNamed = async (username: string) => (await admins()).find((a) => a.username === username);
const tokenOf = (html: string) => /<p class="secret" id="new-key">([^<]+)<\/p>/.exec(html)?.[1] ?? null;

beforeAll(async () => {
  world = await startWorld({ env: { SERVICE_AUTH__OIDC__ISSUER_URL: ISSUER } });
  ({ owner, viewer } = await ownerAndViewer(world, OWNER_PASSWORD));
});

afterAll(async () => {
  await world?.stop();
});

describe('admin users (owners)', () => {
  it('creates an admin with several roles through the form; the initial password must be changed', async () => {
    const res = await owner.post(`${BASE}/create`, { username: 'ops.anna', password: 'anna-initial-password-1', roles: ['approver', 'auditor'], must_change_password: 'on' });
    expect(res.status, res.text).toBe(303);
    const made = (await adminNamed('ops.anna'))!;
    expect(made).toMatchObject({ roles: ['approver', 'auditor'], enabled: true, must_change_password: true });
    expect(res.headers.get('location')).toBe(`${BASE}/${made.id}`);
    const list = await owner.get(BASE);
    expect(list.text).toContain('>ops.anna</a>');
    expect(list.text).toContain('approver, auditor');
    // The new admin is sent to the forced change first.
    const anna = await ConsoleClient.signIn(world.svc.adminUrl, 'ops.anna', 'anna-initial-password-1');
    const overview = await anna.get('/dashboard/overview');
    expect(overview.status).toBe(403);
    expect(overview.text).toContain('Choose a new one before continuing');
  });

  it('answers invalid forms with 422 at the field, the values kept and the password never echoed', async () => {
    const res = await owner.post(`${BASE}/create`, { username: 'bad name!', password: 'short', roles: ['viewer', 'root'] });
    expect(res.status).toBe(422);
    expect(fieldError(res.text, 'username')).not.toBeNull();
    expect(fieldError(res.text, 'roles')).toMatch(/Choose among/);
    expect(inputValue(res.text, 'username')).toBe('bad name!');
    expect(res.text).toMatch(/<input id="f-roles-viewer" name="roles" type="checkbox" value="viewer" checked/);
    expect(res.text).not.toContain('value="short"');

    const weak = await owner.post(`${BASE}/create`, { username: 'weak.one', password: 'weak.one', roles: ['viewer'] });
    expect(weak.status).toBe(422);
    expect(fieldError(weak.text, 'password')).toMatch(/^The password/);
    expect(await adminNamed('weak.one')).toBeUndefined();

    const missing = await owner.post(`${BASE}/create`, {});
    expect(missing.status).toBe(422);
    expect(fieldError(missing.text, 'username')).toBe('This field is required.');
    expect(fieldError(missing.text, 'password')).toBe('This field is required.');

    const json = await owner.post(`${BASE}/create`, { username: 'x' }, { accept: 'application/json' });
    expect(json.status).toBe(422);
    expect(json.json.detail).toContainEqual(expect.objectContaining({ loc: ['body', 'password'] }));

    const dup = await owner.post(`${BASE}/create`, { username: 'ops.anna', password: 'another-password-123', roles: ['viewer'] });
    expect(dup.status).toBe(409);
    expect(dup.text).toMatch(/<p class="form-error" role="alert">[^<]+<\/p>/);
  });

  it('changes roles and state (ending the admin\'s sessions), sets a password, and keeps the last owner', async () => {
    await world.admin('POST', '/api/admins', { username: 'ops.ben', password: 'ben-password-000001', roles: ['viewer'], must_change_password: false });
    const ben = (await adminNamed('ops.ben'))!;
    const benBrowser = await ConsoleClient.signIn(world.svc.adminUrl, 'ops.ben', 'ben-password-000001');
    expect((await benBrowser.get('/dashboard/overview')).status).toBe(200);

    const res = await owner.post(`${BASE}/${ben.id}/update`, { username: 'ops.ben', roles: ['viewer', 'approver'], enabled: 'on' });
    expect(res.status, res.text).toBe(303);
    expect(await adminNamed('ops.ben')).toMatchObject({ roles: ['viewer', 'approver'], enabled: true });
    // The changed role set advanced the authorization version: Ben's open session is over.
    const after = await benBrowser.get('/dashboard/overview');
    expect(after.status).toBe(303);
    expect(after.headers.get('location')).toMatch(/^\/auth\/login/);

    const disabled = await owner.post(`${BASE}/${ben.id}/update`, { username: 'ops.ben', roles: ['viewer'] });
    expect(disabled.status).toBe(303);
    expect((await adminNamed('ops.ben'))!.enabled).toBe(false);

    const pw = await owner.post(`${BASE}/${ben.id}/password`, { password: 'ben-new-password-0002', must_change_password: 'on' });
    expect(pw.status).toBe(303);
    expect((await adminNamed('ops.ben'))!.must_change_password).toBe(true);
    const weakPw = await owner.post(`${BASE}/${ben.id}/password`, { password: 'ops.ben' });
    expect(weakPw.status).toBe(422);
    expect(fieldError(weakPw.text, 'password')).toMatch(/^The password/);

    const me = (await adminNamed('admin'))!;
    const lastOwner = await owner.post(`${BASE}/${me.id}/update`, { username: 'admin', roles: ['admin'], enabled: 'on' });
    expect(lastOwner.status).toBe(409);
    expect(lastOwner.text).toMatch(/<p class="form-error" role="alert">This is the last enabled owner[^<]*<\/p>/);
    expect((await adminNamed('admin'))!.roles).toContain('owner');
    expect((await owner.post(`${BASE}/${me.id}/delete`, {})).status).toBe(409);
  });

  it('maps the admin to a single sign-on subject (422 at the field, audited) and removes it', async () => {
    const anna = (await adminNamed('ops.anna'))!;
    const page = `${BASE}/${anna.id}`;
    expect((await owner.get(page)).text).toContain('not mapped');
    const empty = await owner.post(`${page}/oidc`, { subject: '', email: '' });
    expect(empty.status).toBe(422);
    expect(fieldError(empty.text, 'subject')).toBe('This field is required.');
    const long = await owner.post(`${page}/oidc`, { subject: 's'.repeat(513), email: 'x@example.com' });
    expect(long.status).toBe(422);
    expect(fieldError(long.text, 'subject')).not.toBeNull();
    expect(inputValue(long.text, 'email')).toBe('x@example.com');

    const saved = await owner.post(`${page}/oidc`, { subject: 'anna-sub-1', email: 'anna@example.com' });
    expect(saved.status, saved.text).toBe(303);
    const shown = (await owner.get(page)).text;
    expect(shown).toContain(`anna-sub-1 (${ISSUER})`);
    expect(shown).toContain('anna@example.com');
    expect(world.audits.some((e) => e.action === 'oidc.admin_mapping.set' && e.target?.id === anna.id)).toBe(true);

    // The same subject for a second admin is refused (unique per issuer), as the form's message.
    const ben = (await adminNamed('ops.ben'))!;
    const taken = await owner.post(`${BASE}/${ben.id}/oidc`, { subject: 'anna-sub-1', email: '' });
    expect(taken.status).toBe(409);
    expect(taken.text).toMatch(/<p class="form-error" role="alert">[^<]+<\/p>/);

    expect((await owner.post(`${page}/oidc/remove`, {})).status).toBe(303);
    expect((await adminNamed('ops.anna'))!.oidc_subject).toBeNull();
    expect((await owner.post(`${BASE}/999999/oidc`, { subject: 'x' })).status).toBe(404);
  });

  it('refuses forms without the CSRF token and changes nothing', async () => {
    const anna = (await adminNamed('ops.anna'))!;
    expect((await owner.post(`${BASE}/create`, { username: 'no.csrf', password: 'no-csrf-password-001', roles: ['viewer'] }, { csrf: false })).status).toBe(403);
    expect((await owner.post(`${BASE}/${anna.id}/update`, { username: 'renamed', roles: ['owner'], enabled: 'on' }, { csrf: false })).status).toBe(403);
    expect((await owner.post(`${BASE}/${anna.id}/oidc`, { subject: 'x' }, { csrf: false })).status).toBe(403);
    expect((await owner.post(`${BASE}/${anna.id}/delete`, {}, { csrf: false })).status).toBe(403);
    expect(await adminNamed('no.csrf')).toBeUndefined();
    expect(await adminNamed('ops.anna')).toMatchObject({ roles: ['approver', 'auditor'] });
  });

  it('deletes an admin', async () => {
    const ben = (await adminNamed('ops.ben'))!;
    const res = await owner.post(`${BASE}/${ben.id}/delete`, {});
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(BASE);
    expect(await adminNamed('ops.ben')).toBeUndefined();
    expect((await owner.get(`${BASE}/${ben.id}`)).status).toBe(404);
  });
});

describe('non-owners', () => {
  it('a viewer sees no admin pages (admins:read) and is refused the forms', async () => {
    expect((await viewer.get(BASE)).status).toBe(403);
    expect((await viewer.get('/dashboard/overview')).text).not.toContain('href="/dashboard/admins"');
    const anna = (await adminNamed('ops.anna'))!;
    expect((await viewer.post(`${BASE}/create`, { username: 'viewer.made', password: 'viewer-made-password1', roles: ['owner'] })).status).toBe(403);
    expect((await viewer.post(`${BASE}/${anna.id}/update`, { username: 'ops.anna', roles: ['owner'], enabled: 'on' })).status).toBe(403);
    expect(await adminNamed('viewer.made')).toBeUndefined();
  });

  it('an admin (role) reads the admins but gets no buttons and cannot change them', async () => {
    await world.admin('POST', '/api/admins', { username: 'ops.carl', password: 'carl-password-000001', roles: ['admin'], must_change_password: false });
    const carl = await ConsoleClient.signIn(world.svc.adminUrl, 'ops.carl', 'carl-password-000001');
    const list = await carl.get(BASE);
    expect(list.status).toBe(200);
    expect(list.text).not.toContain('New admin');
    const anna = (await adminNamed('ops.anna'))!;
    const detail = await carl.get(`${BASE}/${anna.id}`);
    expect(detail.status).toBe(200);
    expect(detail.text).not.toMatch(/Save changes|Set password|Save mapping|Delete admin/);
    expect((await carl.get(`${BASE}/new`)).status).toBe(403);
    expect((await carl.post(`${BASE}/${anna.id}/update`, { username: 'ops.anna', roles: ['owner'], enabled: 'on' })).status).toBe(403);
    expect((await carl.post(`${BASE}/${anna.id}/oidc`, { subject: 'carl-made' })).status).toBe(403);
    expect((await adminNamed('ops.anna'))!.roles).toEqual(['approver', 'auditor']);
  });
});

describe('your account', () => {
  it('creates an API token shown once, lists it without the secret, and revokes it', async () => {
    const page = await viewer.get('/dashboard/account');
    expect(page.status).toBe(200);
    expect(page.text).toContain('No API tokens.');
    const bad = await viewer.post('/dashboard/account/tokens', { name: '', expires_at: 'tomorrow' });
    expect(bad.status).toBe(422);
    expect(fieldError(bad.text, 'name')).toBe('This field is required.');
    const past = await viewer.post('/dashboard/account/tokens', { name: 'old', expires_at: '2001-01-01T00:00:00Z' });
    expect(past.status).toBe(422);
    expect(fieldError(past.text, 'expires_at')).toMatch(/future/);
    expect(inputValue(past.text, 'name')).toBe('old');

    const made = await viewer.post('/dashboard/account/tokens', { name: 'ci pipeline', expires_at: '2099-01-01T00:00:00Z' });
    expect(made.status, made.text).toBe(201);
    const token = tokenOf(made.text)!;
    expect(token.length).toBeGreaterThan(20);
    // The token works as the viewer (Bearer) and is never shown again.
    const session = await fetch(`${world.svc.adminUrl}/api/session`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await session.json()) as { username: string }).username).toBe('viewer1');
    const listed = await viewer.get('/dashboard/account');
    expect(listed.text).toContain('<td data-label="Name">ci pipeline</td>');
    expect(listed.text).not.toContain(token);

    // Another admin's token id is not the viewer's to revoke.
    const ownerToken = (await owner.admin.request('POST', '/api/admin-tokens', { json: { name: 'owner-own' } })).json;
    expect((await viewer.post(`/dashboard/account/tokens/${ownerToken.id}/revoke`, {})).status).toBe(404);
    expect((await fetch(`${world.svc.adminUrl}/api/session`, { headers: { authorization: `Bearer ${ownerToken.token}` } })).status).toBe(200);

    const id = /action="\/dashboard\/account\/tokens\/(\d+)\/revoke"/.exec(listed.text)![1];
    expect((await viewer.post(`/dashboard/account/tokens/${id}/revoke`, {}, { csrf: false })).status).toBe(403);
    const revoked = await viewer.post(`/dashboard/account/tokens/${id}/revoke`, {});
    expect(revoked.status).toBe(303);
    expect((await fetch(`${world.svc.adminUrl}/api/session`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
  });

  it('an owner revokes another admin\'s token on that admin\'s page', async () => {
    const anna = (await adminNamed('ops.anna'))!;
    const annaBrowser = await ConsoleClient.signIn(world.svc.adminUrl, 'ops.anna', 'anna-initial-password-1');
    const changed = await annaBrowser.post('/auth/change-password', { current_password: 'anna-initial-password-1', new_password: 'anna-chosen-password-2', confirm_password: 'anna-chosen-password-2' });
    expect(changed.status).toBe(303);
    const anna2 = await ConsoleClient.signIn(world.svc.adminUrl, 'ops.anna', 'anna-chosen-password-2');
    const made = await anna2.post('/dashboard/account/tokens', { name: 'anna-token' });
    const token = tokenOf(made.text)!;
    const page = await owner.get(`${BASE}/${anna.id}`);
    expect(page.text).toContain('<td data-label="Name">anna-token</td>');
    const id = new RegExp(`action="/dashboard/admins/${anna.id}/tokens/(\\d+)/revoke"`).exec(page.text)![1];
    expect((await owner.post(`${BASE}/${anna.id}/tokens/${id}/revoke`, {})).status).toBe(303);
    expect((await fetch(`${world.svc.adminUrl}/api/session`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
  });

  it('signs out from the account page', async () => {
    const carl = await ConsoleClient.signIn(world.svc.adminUrl, 'ops.carl', 'carl-password-000001');
    const page = await carl.get('/dashboard/account');
    expect(page.text).toContain('action="/auth/logout"');
    expect(page.text).toContain('href="/auth/change-password"');
    const out = await carl.post('/auth/logout', {});
    expect(out.status).toBe(303);
    expect((await carl.get('/dashboard/account')).status).toBe(303);
  });
});
