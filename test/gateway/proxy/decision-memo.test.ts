// Remembered HTTP role and policy decisions (docs/decisions/0028-proxy-hot-path.md) never outlive what they were made from:
// a policy change, a grant's expiry, a disabled grant and a changed role each apply to the very next request.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../../support/world.js';
import { startRecordingUpstream, type RecordingUpstream } from './support.js';

let world: World;
let up: RecordingUpstream;

beforeAll(async () => {
  up = await startRecordingUpstream();
  world = await startWorld({ privateSources: ['up'], env: { SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
  await world.httpSource('up', `${up.base}/api/`);
});

afterAll(async () => {
  await world?.stop();
  await up?.close();
});

/** Two allowed answers in a row, so the second one was decided from the memo. */
async function allowedTwice(key: string, path: string): Promise<void> {
  for (let i = 0; i < 2; i++) expect((await world.proxy(key, 'GET', `${path}?i=${i}`)).status).toBe(200);
}

describe('remembered HTTP decisions', () => {
  it('a policy added afterwards applies to the next request', async () => {
    const agent = await world.agent('policy-agent', [{ source_id: 'up', role_key: 'reader' }]);
    await allowedTwice(agent.key, '/proxy/up/memo-policy/x');
    await world.policy({ name: 'deny memo-policy', conditions: { source_ids: ['up'], paths: ['/memo-policy/**'] }, actions: { effect: 'deny' } });
    const denied = await world.proxy(agent.key, 'GET', '/proxy/up/memo-policy/x?i=2');
    expect(denied.status, denied.text).toBe(403);
  });

  it('a grant that expires ends access at its expiry, although its verdict was remembered', async () => {
    const expiresAt = Date.now() + 2_500;
    const agent = await world.agent('expiring-agent', [{ source_id: 'up', role_key: 'reader', expires_at: new Date(expiresAt).toISOString() }]);
    await allowedTwice(agent.key, '/proxy/up/memo-expiry/x');
    await new Promise((r) => setTimeout(r, expiresAt - Date.now() + 50));
    const denied = await world.proxy(agent.key, 'GET', '/proxy/up/memo-expiry/x?i=2');
    expect(denied.status, denied.text).toBe(403);
  });

  it('a disabled grant ends access at once', async () => {
    const agent = await world.agent('disabled-grant-agent', [{ source_id: 'up', role_key: 'reader' }]);
    await allowedTwice(agent.key, '/proxy/up/memo-grant/x');
    const grants = await world.admin('GET', `/api/identities/${agent.id}/grants`);
    const grantId = (grants.json.items ?? grants.json)[0].id as number;
    expect((await world.admin('PATCH', `/api/identities/${agent.id}/grants/${grantId}`, { enabled: false })).status).toBe(200);
    const denied = await world.proxy(agent.key, 'GET', '/proxy/up/memo-grant/x?i=2');
    expect(denied.status, denied.text).toBe(403);
  });

  it("a role's rules changed take the remembered verdict with them", async () => {
    const created = await world.admin('POST', '/api/data-sources/up/roles', { role_key: 'memo-narrow', description: 'memo test', rules: { http: [{ methods: ['GET'], paths: ['/memo-role/**'] }] } });
    expect(created.status, created.text).toBe(201);
    const agent = await world.agent('role-rules-agent', [{ source_id: 'up', role_key: 'memo-narrow' }]);
    await allowedTwice(agent.key, '/proxy/up/memo-role/x');
    const narrowed = await world.admin('PATCH', `/api/data-sources/up/roles/${created.json.id as number}`, { rules: { http: [{ methods: ['GET'], paths: ['/elsewhere/**'] }] } });
    expect(narrowed.status, narrowed.text).toBe(200);
    const denied = await world.proxy(agent.key, 'GET', '/proxy/up/memo-role/x?i=2');
    expect(denied.status, denied.text).toBe(403);
  });

  it("an identity's roles changed apply to the next request under a policy on identity roles", async () => {
    await world.policy({ name: 'deny quarantined', conditions: { source_ids: ['up'], identity_roles: ['quarantined'], paths: ['/memo-identity-roles/**'] }, actions: { effect: 'deny' } });
    const agent = await world.agent('identity-roles-agent', [{ source_id: 'up', role_key: 'reader' }]);
    await allowedTwice(agent.key, '/proxy/up/memo-identity-roles/x');
    expect((await world.admin('PATCH', `/api/identities/${agent.id}`, { roles: ['quarantined'] })).status).toBe(200);
    const denied = await world.proxy(agent.key, 'GET', '/proxy/up/memo-identity-roles/x?i=2');
    expect(denied.status, denied.text).toBe(403);
  });

  it('the same path is decided per method and per identity', async () => {
    const reader = await world.agent('memo-reader', [{ source_id: 'up', role_key: 'reader' }]);
    const writer = await world.agent('memo-writer', [{ source_id: 'up', role_key: 'writer' }]);
    await allowedTwice(reader.key, '/proxy/up/memo-method/x');
    // The reader's remembered GET says nothing of its POST, nor of another identity's.
    expect((await world.proxy(reader.key, 'POST', '/proxy/up/memo-method/x')).status).toBe(403);
    expect((await world.proxy(writer.key, 'POST', '/proxy/up/memo-method/x')).status).toBe(200);
  });
});
