// GET /api/audit on the admin listener: proxied requests and admin actions are searchable by auditors, refused to viewers, and bad filters answer 422.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminToken, startWorld, type World } from '../support/world.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';

let world: World;
let upstream: TestUpstream;

beforeAll(async () => {
  upstream = await startUpstream({});
  world = await startWorld({ privateSources: ['audited'] });
  await world.httpSource('audited', `http://127.0.0.1:${upstream.port}/`);
});

afterAll(async () => {
  await world?.stop();
  await upstream?.close();
});

describe('GET /api/audit', () => {
  it('finds the entry of a proxied request by request id, and admin actions on channel admin', async () => {
    const agent = await world.agent('audited-agent', [{ source_id: 'audited', role_key: 'reader' }]);
    const res = await world.proxy(agent.key, 'GET', '/proxy/audited/things');
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id')!;
    await world.svc.running.services.audit.flush();

    const found = await world.admin('GET', `/api/audit?request_id=${requestId}`);
    expect(found.status, found.text).toBe(200);
    expect(found.json.items).toHaveLength(1);
    expect(found.json.items[0]).toMatchObject({ channel: 'http', identity_id: agent.id, source_id: 'audited', decision: 'allow', status: 200, path: '/things' });

    const admin = await world.admin('GET', '/api/audit?channel=admin&limit=50');
    expect(admin.status).toBe(200);
    expect(admin.json.items.map((e: { action: string }) => e.action)).toContain('identity.create');
  });

  it('answers 422 with the query location for a bad filter', async () => {
    const bad = await world.admin('GET', '/api/audit?limit=100000');
    expect(bad.status).toBe(422);
    expect(bad.json.detail[0].loc).toEqual(['query', 'limit']);
  });

  it('is refused to a viewer and allowed to an auditor', async () => {
    for (const [username, role, expected] of [['viewer-1', 'viewer', 403], ['auditor-1', 'auditor', 200]] as const) {
      const password = `${username}-password-long-enough`;
      const created = await world.admin('POST', '/api/admins', { username, password, roles: [role], must_change_password: false });
      expect(created.status, created.text).toBe(201);
      const token = await adminToken(world.svc.adminUrl, username, password);
      const res = await fetch(`${world.svc.adminUrl}/api/audit`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(expected);
    }
  });
});
