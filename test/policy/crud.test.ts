// Policy CRUD through the admin API: shapes, engine-schema 422 locations, name conflicts, audit, and the versioned compiled set.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminAuditEvent } from '../../src/admin/audit-events.js';
import type { TestService } from '../support/service.js';
import { AdminClient } from '../support/admin-client.js';
import { OWNER_PASSWORD, ownerApi, startPolicyService, type PolicyApi } from './support.js';

let svc: TestService;
let api: PolicyApi;
let audit: AdminAuditEvent[];

beforeAll(async () => {
  ({ svc, api, audits: audit } = await startPolicyService());
}, 60_000);
afterAll(async () => svc?.stop());

const policies = () => svc.running.services.policies;

describe('policy CRUD', () => {
  it('creates with defaults, compiles the new version at once, and audits', async () => {
    const before = policies().version()!;
    const res = await api.send('POST', '/api/policies', { name: 'deny-hr', conditions: { tables: ['hr.*'] }, actions: { effect: 'deny' } });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({ name: 'deny-hr', priority: 0, enabled: true, conditions: { tables: ['hr.*'] }, actions: { effect: 'deny' } });
    expect(typeof res.json.id).toBe('number');
    expect(typeof res.json.created_at).toBe('string');
    expect(policies().version()).toBe(before + 1);
    expect(policies().current().policies.map((p) => p.name)).toContain('deny-hr');
    const event = audit.find((e) => e.action === 'policy.create' && e.target?.id === res.json.id);
    expect(event?.changes?.before).toBeNull();
    expect(event?.changes?.after).toMatchObject({ name: 'deny-hr' });
  });

  it('reads, lists in evaluation order, patches and deletes', async () => {
    const a = (await api.send('POST', '/api/policies', { name: 'low', priority: 1, conditions: {}, actions: { rate_limit: '10/second' } })).json;
    const b = (await api.send('POST', '/api/policies', { name: 'high', priority: 50, conditions: { source_ids: ['crm'] }, actions: {} })).json;
    const list = await api.send('GET', '/api/policies');
    const names = list.json.map((p: { name: string }) => p.name);
    expect(names.indexOf('high')).toBeLessThan(names.indexOf('low'));
    expect((await api.send('GET', `/api/policies/${a.id}`)).json.name).toBe('low');

    const v = policies().version()!;
    const patched = await api.send('PATCH', `/api/policies/${b.id}`, { enabled: false, name: null, priority: null });
    expect(patched.status).toBe(200);
    expect(patched.json).toMatchObject({ name: 'high', priority: 50, enabled: false });
    expect(policies().version()).toBe(v + 1);
    expect(policies().current().policies.some((p) => p.id === b.id)).toBe(false);
    const upd = audit.find((e) => e.action === 'policy.update' && e.target?.id === b.id);
    expect(upd?.changes).toMatchObject({ before: { enabled: true }, after: { enabled: false } });

    expect((await api.send('DELETE', `/api/policies/${a.id}`)).status).toBe(204);
    expect((await api.send('GET', `/api/policies/${a.id}`)).status).toBe(404);
    expect((await api.send('DELETE', `/api/policies/${a.id}`)).status).toBe(404);
    expect(audit.find((e) => e.action === 'policy.delete' && e.target?.id === a.id)?.changes?.after).toBeNull();
  });

  it.each([
    [{ name: 'x', conditions: {}, actions: { rate_limit: 'lots' } }, ['body', 'actions', 'rate_limit']],
    [{ name: 'x', conditions: {}, actions: { effect: 'maybe' } }, ['body', 'actions', 'effect']],
    [{ name: 'x', conditions: { tables: [] }, actions: {} }, ['body', 'conditions', 'tables']],
    [{ name: 'x', conditions: { source_id: 'crm' }, actions: {} }, ['body', 'conditions']],
    [{ name: 'x', conditions: { paths: ['v1/x'] }, actions: {} }, ['body', 'conditions', 'paths', 0]],
    [{ name: 'x', conditions: { operations: ['drop'] }, actions: {} }, ['body', 'conditions', 'operations', 0]],
    [{ name: 'x', conditions: {}, actions: { pii_mode: 'loud' } }, ['body', 'actions', 'pii_mode']],
    [{ name: 'x', conditions: {}, actions: {}, priority: 1.5 }, ['body', 'priority']],
    [{ conditions: {}, actions: {} }, ['body', 'name']],
    [{ name: 'x', actions: {} }, ['body', 'conditions']],
    [{ name: 'x', conditions: [], actions: {} }, ['body', 'conditions']],
    [{ name: 'x', conditions: {}, actions: {}, colour: 'red' }, ['body', 'colour']],
  ])('422 with the exact location for %j', async (body, loc) => {
    const v = policies().version();
    const res = await api.send('POST', '/api/policies', body);
    expect(res.status).toBe(422);
    expect(res.json.detail.map((d: { loc: unknown }) => d.loc)).toContainEqual(loc);
    expect(policies().version()).toBe(v);
  });

  it('422 on a patch that would make the policy invalid, and nothing changes', async () => {
    const p = (await api.send('POST', '/api/policies', { name: 'patch-me', conditions: {}, actions: {} })).json;
    const res = await api.send('PATCH', `/api/policies/${p.id}`, { actions: { rate_limit: '5/fortnight' } });
    expect(res.status).toBe(422);
    expect(res.json.detail[0].loc).toEqual(['body', 'actions', 'rate_limit']);
    expect((await api.send('GET', `/api/policies/${p.id}`)).json.actions).toEqual({});
    expect((await api.send('PATCH', '/api/policies/abc', {})).status).toBe(422);
    expect((await api.send('PATCH', '/api/policies/999999', { priority: 3 })).status).toBe(404);
  });

  it('409 on a duplicate name, on create and on rename', async () => {
    await api.send('POST', '/api/policies', { name: 'unique-one', conditions: {}, actions: {} });
    const other = (await api.send('POST', '/api/policies', { name: 'unique-two', conditions: {}, actions: {} })).json;
    const v = policies().version();
    expect((await api.send('POST', '/api/policies', { name: 'unique-one', conditions: {}, actions: {} })).status).toBe(409);
    expect((await api.send('PATCH', `/api/policies/${other.id}`, { name: 'unique-one' })).status).toBe(409);
    expect(policies().version()).toBe(v);
  });

  it('is described in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${svc.adminUrl}/api/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths['/api/policies/{id}'] ?? {}).sort()).toEqual(['delete', 'get', 'patch']);
    expect(doc.paths['/api/policies/dry-run']?.post).toBeDefined();
    expect(doc.paths['/api/policies/import/apply']?.post).toBeDefined();
  });

  it('with a browser session, writes need the CSRF token (header or form field)', async () => {
    const { cookie, csrf: csrf_token } = await AdminClient.signIn(svc.adminUrl, 'admin', OWNER_PASSWORD);
    const body = JSON.stringify({ name: 'via-session', conditions: {}, actions: {} });
    const post = (headers: Record<string, string>) => fetch(`${svc.adminUrl}/api/policies`, { method: 'POST', headers: { cookie, 'content-type': 'application/json', ...headers }, body });
    expect((await post({})).status).toBe(403);
    expect((await post({ 'x-csrf-token': csrf_token })).status).toBe(201);
    const form = (fields: Record<string, string>) => fetch(`${svc.adminUrl}/dashboard/policies/create`, { method: 'POST', headers: { cookie }, body: new URLSearchParams(fields) });
    expect((await form({ name: 'form-session' })).status).toBe(403);
    expect((await form({ name: 'form-session', csrf_token })).status).toBe(201);
  });

  it('a viewer may read and dry-run but not write', async () => {
    const made = await api.send('POST', '/api/admins', { username: 'viewer1', password: 'viewer-password-for-tests-1', roles: ['viewer'], must_change_password: false });
    expect(made.status).toBe(201);
    const viewer = await ownerApi(svc.adminUrl, 'viewer1', 'viewer-password-for-tests-1');
    expect((await viewer.send('GET', '/api/policies')).status).toBe(200);
    expect((await viewer.send('POST', '/api/policies/import/preview', [])).status).toBe(200);
    expect((await viewer.send('POST', '/api/policies', { name: 'viewer-made', conditions: {}, actions: {} })).status).toBe(403);
    expect((await viewer.send('POST', '/api/policies/import/apply', [])).status).toBe(403);
    expect((await viewer.form('/dashboard/policies/create', { name: 'viewer-made' })).status).toBe(403);
  });

  it('refuses anonymous callers', async () => {
    const res = await fetch(`${svc.adminUrl}/api/policies`);
    expect(res.status).toBe(401);
  });
});
