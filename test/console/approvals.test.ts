// The approvals inbox: a write through /proxy queues, the inbox lists it (pending, oldest first), the detail shows the request and trace, approval needs a confirmation step and executes once; a viewer sees no buttons and is refused; a missing CSRF token changes nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { startRecordingUpstream, sendJson, type RecordingUpstream } from '../gateway/proxy/support.js';
import { ConsoleClient } from './support/pages.js';

let world: World;
let upstream: RecordingUpstream;
let owner: ConsoleClient;
let viewer: ConsoleClient;
let key: string;

beforeAll(async () => {
  upstream = await startRecordingUpstream({ '/base/orders': (_req, res) => sendJson(res, 201, { id: 1 }) });
  world = await startWorld({ privateSources: ['up'] });
  await world.httpSource('up', `${upstream.base}/base/`);
  key = (await world.agent('inbox-agent', [{ source_id: 'up', role_key: 'writer' }])).key;
  await world.policy({ name: 'writes need approval', conditions: { source_ids: ['up'], methods: ['POST'] }, actions: { effect: 'require_approval' } });
  owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
  expect((await world.admin('POST', '/api/admins', { username: 'viewer3', password: 'viewer-password-0003', roles: ['viewer'], must_change_password: false })).status).toBe(201);
  viewer = await ConsoleClient.signIn(world.svc.adminUrl, 'viewer3', 'viewer-password-0003');
});

afterAll(async () => {
  await world?.stop();
  await upstream?.close();
});

const queue = async (note: string) => {
  const res = await world.proxy(key, 'POST', '/proxy/up/orders', { body: JSON.stringify({ note }), headers: { 'content-type': 'application/json' } });
  expect(res.status, res.text).toBe(202);
  return res.json.approval_id as number;
};

describe('approvals inbox', () => {
  it('lists pending oldest first, confirms, approves and shows the executed request', async () => {
    const first = await queue('<script>alert(1)</script>');
    const second = await queue('second');
    const inbox = await owner.get('/dashboard/approvals');
    expect(inbox.status).toBe(200);
    expect(inbox.text.indexOf(`>#${first}<`)).toBeLessThan(inbox.text.indexOf(`>#${second}<`));
    expect(inbox.text).toMatch(/\d+ min old · expires in \d+ min/);

    const detail = await owner.get(`/dashboard/approvals/${first}`);
    expect(detail.text).toContain('/orders');
    expect(detail.text).not.toContain('<script>alert');
    expect(detail.text).toContain('Approve…');
    const confirm = await owner.get(`/dashboard/approvals/${first}?confirm=approve`);
    expect(confirm.text).toContain('Yes, approve and execute');

    expect((await owner.post(`/dashboard/approvals/${first}/approve`, {}, { csrf: false })).status).toBe(403);
    expect(upstream.received.filter((r) => r.method === 'POST')).toHaveLength(0);

    const approved = await owner.post(`/dashboard/approvals/${first}/approve`, {});
    expect(approved.status, approved.text).toBe(303);
    expect((await world.admin('GET', `/api/approvals/${first}`)).json.status).toBe('executed');
    expect(upstream.received.filter((r) => r.method === 'POST')).toHaveLength(1);
    const after = await owner.get(`/dashboard/approvals/${first}`);
    expect(after.text).toContain('<span class="badge ok">executed</span>');
    expect(after.text).not.toContain('Approve…');

    expect((await owner.post(`/dashboard/approvals/${second}/reject`, {})).status).toBe(303);
    expect((await owner.get('/dashboard/approvals?status=rejected')).text).toContain(`>#${second}<`);
    expect((await owner.get('/dashboard/approvals?status=executed')).text).toContain(`>#${first}<`);
    expect((await owner.get('/dashboard/approvals/99999')).status).toBe(404);
  });

  it('shows a viewer no decision buttons and refuses its decisions', async () => {
    const id = await queue('viewer');
    const page = await viewer.get(`/dashboard/approvals/${id}`);
    expect(page.status).toBe(200);
    expect(page.text).not.toMatch(/Approve…|Reject…/);
    expect((await viewer.get(`/dashboard/approvals/${id}?confirm=approve`)).text).not.toContain('Yes, approve');
    expect((await viewer.post(`/dashboard/approvals/${id}/approve`, {})).status).toBe(403);
    expect((await world.admin('GET', `/api/approvals/${id}`)).json.status).toBe('pending');
  });
});
