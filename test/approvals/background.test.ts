// The background paths through the real roles: the worker's approvals-sweep task expires pending approvals on its own (and notifies), and the admin's recovery loop executes an approved-but-never-claimed request once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { startWorld, type World } from '../support/world.js';
import { startRecordingUpstream, type RecordingUpstream } from '../gateway/proxy/support.js';
import { startFakeSlack, type FakeSlack } from '../notify/fake-slack.js';

let world: World;
let upstream: RecordingUpstream;
let slack: FakeSlack;
let db: pg.Client;
let writer: { id: number; key: string };

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  slack = await startFakeSlack();
  world = await startWorld({
    privateSources: ['up'],
    env: {
      SERVICE_APPROVALS__EXPIRY_SECONDS: '1',
      SERVICE_WORKER__SWEEP_INTERVAL_SECONDS: '1',
      SERVICE_NOTIFICATIONS__ENABLED: 'true',
      SERVICE_NOTIFICATIONS__SLACK_WEBHOOK_URL_REF: 'env:TEST_SLACK_WEBHOOK',
      TEST_SLACK_WEBHOOK: `${slack.url}/hook`,
      SERVICE_NOTIFICATIONS__ALLOW_PRIVATE_EGRESS: 'true',
      SERVICE_NOTIFICATIONS__APPROVAL_EVENTS: 'expired',
    },
  });
  await world.httpSource('up', `${upstream.base}/base/`);
  await world.policy({ name: 'writes need approval', conditions: { source_ids: ['up'], methods: ['PUT'] }, actions: { effect: 'require_approval' } });
  writer = await world.agent('writer-agent', [{ source_id: 'up', role_key: 'writer' }]);
  db = await world.svc.database!.connect();
});

afterAll(async () => {
  await db?.end();
  await world?.stop();
  await upstream?.close();
  await slack?.close();
});

const status = async (id: number) => (await db.query('select status from approvals where id = $1', [id])).rows[0]?.status as string;

describe('background approval work', () => {
  it('the worker expires a pending approval past approvals.expiry_seconds and sends the expired notification', async () => {
    const res = await world.proxy(writer.key, 'PUT', '/proxy/up/doc', { body: '{"v":1}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(202);
    const id = res.json.approval_id as number;
    await expect.poll(() => status(id), { timeout: 6_000, interval: 200 }).toBe('expired');
    expect((await world.admin('POST', `/api/approvals/${id}/approve`)).status).toBe(409);
    await slack.waitFor(1);
    expect(slack.requests.some((r) => r.body.includes(`Approval #${id} expired without a decision.`))).toBe(true);
    expect(upstream.received.filter((r) => r.method === 'PUT')).toHaveLength(0);
  });

  it("the admin's recovery loop executes an approved row that was never claimed, once", async () => {
    const res = await world.proxy(writer.key, 'PUT', '/proxy/up/doc2', { body: '{"v":2}', headers: { 'content-type': 'application/json' } });
    const id = res.json.approval_id as number;
    // As if the deciding admin process died right after committing its decision (before claiming).
    await db.query(`update approvals set status = 'approved', approved_by = 'admin', decided_at = now() - interval '2 minutes' where id = $1`, [id]);
    await expect.poll(() => status(id), { timeout: 6_000, interval: 200 }).toBe('executed');
    await new Promise((r) => setTimeout(r, 1_500));
    const hits = upstream.received.filter((r) => r.method === 'PUT' && r.path === '/base/doc2');
    expect(hits).toHaveLength(1);
    expect(hits[0]!.headers['idempotency-key']).toBe(`gatehouse-approval-${id}`);
  });
});
