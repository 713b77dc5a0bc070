// The subject mapping endpoints (spec §4, §2, §8): 200/404/422/409 cases, audit, uniqueness per issuer, and the authorization-version bump that ends an open session.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import fc from 'fast-check';
import { startWorld, type World } from '../support/world.js';
import { AdminClient } from '../support/admin-client.js';

const ISSUER = 'https://idp.example.com/realms/gatehouse';
let world: World;

beforeAll(async () => {
  world = await startWorld({ env: { SERVICE_AUTH__OIDC__ISSUER_URL: ISSUER } });
});
afterAll(() => world.stop());

async function newAdmin(username: string, roles: string[] = ['viewer']): Promise<number> {
  const created = await world.admin('POST', '/api/admins', { username, password: 'a-long-enough-password-917', roles, must_change_password: false });
  expect(created.status).toBe(201);
  return created.json.id as number;
}

describe('PUT/DELETE /api/admin-auth/oidc/admins/{admin_id}', () => {
  test('maps, answers the mapping, audits it, and shows it on the admin', async () => {
    const id = await newAdmin('mapped-admin');
    const put = await world.admin('PUT', `/api/admin-auth/oidc/admins/${id}`, { subject: 'user-123', email: 'mapped@example.com' });
    expect(put.status).toBe(200);
    expect(put.json).toEqual({ admin_id: id, issuer: ISSUER, subject: 'user-123', email: 'mapped@example.com', auth_version_advanced: true });
    const shown = await world.admin('GET', `/api/admins/${id}`);
    expect(shown.json.oidc_subject).toBe('user-123');
    const event = world.audits.find((e) => e.action === 'oidc.admin_mapping.set' && e.target?.id === id);
    expect(event?.changes?.after).toEqual({ issuer: ISSUER, subject: 'user-123', email: 'mapped@example.com' });
    // The same mapping again changes nothing, so the authorization version stays.
    const again = await world.admin('PUT', `/api/admin-auth/oidc/admins/${id}`, { subject: 'user-123', email: 'other@example.com' });
    expect(again.json.auth_version_advanced).toBe(false);
    const del = await world.admin('DELETE', `/api/admin-auth/oidc/admins/${id}`);
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ admin_id: id, issuer: null, subject: null, email: null, auth_version_advanced: true });
    expect(world.audits.some((e) => e.action === 'oidc.admin_mapping.delete' && e.target?.id === id)).toBe(true);
  });

  test('a changed subject ends the admin\'s open session at its next request', async () => {
    const id = await newAdmin('session-admin');
    const client = await AdminClient.signIn(world.svc.adminUrl, 'session-admin', 'a-long-enough-password-917');
    expect((await client.request('GET', '/api/session')).status).toBe(200);
    expect((await world.admin('PUT', `/api/admin-auth/oidc/admins/${id}`, { subject: 'sess-sub' })).status).toBe(200);
    const after = await client.request('GET', '/api/session');
    expect(after.status).toBe(401);
    expect(after.json.message ?? after.json.detail).toMatch(/no longer valid/);
  });

  test('unknown admin: 404; non-integer id and bad bodies: 422 with the validation shape', async () => {
    expect((await world.admin('PUT', '/api/admin-auth/oidc/admins/999999', { subject: 'x' })).status).toBe(404);
    expect((await world.admin('DELETE', '/api/admin-auth/oidc/admins/999999')).status).toBe(404);
    const bad = await world.admin('PUT', '/api/admin-auth/oidc/admins/abc', { subject: 'x' });
    expect(bad.status).toBe(422);
    expect(bad.json.detail[0].loc).toEqual(['path', 'admin_id']);
    const id = await newAdmin('validation-admin');
    for (const body of [{}, { subject: '' }, { subject: 'x'.repeat(513) }, { subject: 'ok', email: 'e'.repeat(321) }, { subject: 5 }, { subject: 'ok', extra: 1 }]) {
      const r = await world.admin('PUT', `/api/admin-auth/oidc/admins/${id}`, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.json.detail[0]).toMatchObject({ loc: expect.arrayContaining(['body']), msg: expect.any(String), type: expect.any(String) });
    }
  });

  test('subject lengths 1..512 and emails up to 320 are accepted (property)', async () => {
    const id = await newAdmin('property-admin');
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1, maxLength: 512, unit: 'grapheme-ascii' }), fc.option(fc.string({ maxLength: 320, unit: 'grapheme-ascii' })), async (subject, email) => {
        const r = await world.admin('PUT', `/api/admin-auth/oidc/admins/${id}`, { subject, email });
        expect(r.status).toBe(200);
        expect(r.json.subject).toBe(subject);
      }),
      { numRuns: 25 },
    );
  });

  test('a subject is unique per issuer: a second admin with it is a 409', async () => {
    const a = await newAdmin('unique-a');
    const b = await newAdmin('unique-b');
    expect((await world.admin('PUT', `/api/admin-auth/oidc/admins/${a}`, { subject: 'shared-subject' })).status).toBe(200);
    const clash = await world.admin('PUT', `/api/admin-auth/oidc/admins/${b}`, { subject: 'shared-subject' });
    expect(clash.status).toBe(409);
  });
});

describe('PUT/DELETE /api/admin-auth/oidc/agents/{identity_id}', () => {
  test('maps and unmaps an identity, audited; 404 and 422 as for admins; unique per issuer', async () => {
    const agent = await world.agent('mapped-agent');
    const put = await world.admin('PUT', `/api/admin-auth/oidc/agents/${agent.id}`, { subject: 'client-abc' });
    expect(put.status).toBe(200);
    expect(put.json).toEqual({ identity_id: agent.id, issuer: ISSUER, subject: 'client-abc', email: null });
    expect(world.audits.some((e) => e.action === 'oidc.agent_mapping.set' && e.target?.id === agent.id)).toBe(true);
    const other = await world.agent('mapped-agent-2');
    expect((await world.admin('PUT', `/api/admin-auth/oidc/agents/${other.id}`, { subject: 'client-abc' })).status).toBe(409);
    expect((await world.admin('PUT', '/api/admin-auth/oidc/agents/999999', { subject: 'x' })).status).toBe(404);
    expect((await world.admin('PUT', `/api/admin-auth/oidc/agents/${agent.id}`, { subject: '' })).status).toBe(422);
    expect((await world.admin('PUT', '/api/admin-auth/oidc/agents/1.5', { subject: 'x' })).status).toBe(422);
    const del = await world.admin('DELETE', `/api/admin-auth/oidc/agents/${agent.id}`);
    expect(del.json).toEqual({ identity_id: agent.id, issuer: null, subject: null, email: null });
    expect((await world.admin('DELETE', '/api/admin-auth/oidc/agents/999999')).status).toBe(404);
  });
});
