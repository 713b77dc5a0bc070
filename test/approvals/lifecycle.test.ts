// Approvals end to end (spec §4 "Approvals", docs/approvals.md): write → 202 → approve → executed exactly once upstream with the Idempotency-Key → the agent reads the result; reject, expiry, concurrent approvals, revoked grants, crash recovery, admin shapes, and Slack on the side.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { adminToken, startWorld, answer, type World } from '../support/world.js';
import { startRecordingUpstream, sendJson, type RecordingUpstream } from '../gateway/proxy/support.js';
import { startFakeSlack, type FakeSlack } from '../notify/fake-slack.js';
import { approvalServiceFor } from '../../src/approvals/runtime.js';
import { notifierFor } from '../../src/notify/index.js';

const UPSTREAM_TOKEN = 'upstream-secret-token-4f1c9a';
const EMAIL = 'jane.doe@example.com';
const CARD = '4111 1111 1111 1111';

let world: World;
let upstream: RecordingUpstream;
let slack: FakeSlack;
let db: pg.Client;
let writer: { id: number; key: string };
let other: { id: number; key: string };

const writes = () => upstream.received.filter((r) => r.method === 'POST');

async function queue(path = '/orders', body: unknown = { item: 'book' }, key = writer.key): Promise<number> {
  const res = await world.proxy(key, 'POST', `/proxy/up${path}`, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  expect(res.status, res.text).toBe(202);
  expect(res.json).toMatchObject({ error: expect.any(String), approval_id: expect.any(Number), approval_state: 'pending' });
  return res.json.approval_id as number;
}

const services = () => world.svc.running.services;
const settleNotifications = () => notifierFor(services()).idle();

beforeAll(async () => {
  upstream = await startRecordingUpstream({
    '/base/orders': (_req, res) => sendJson(res, 201, { id: 77, contact: EMAIL, note: 'created' }),
  });
  slack = await startFakeSlack();
  world = await startWorld({
    privateSources: ['up'],
    env: {
      SERVICE_NOTIFICATIONS__ENABLED: 'true',
      SERVICE_NOTIFICATIONS__SLACK_WEBHOOK_URL_REF: 'env:TEST_SLACK_WEBHOOK',
      TEST_SLACK_WEBHOOK: `${slack.url}/services/T000/B000/hook-secret`,
      SERVICE_NOTIFICATIONS__ALLOW_PRIVATE_EGRESS: 'true',
      SERVICE_NOTIFICATIONS__APPROVAL_EVENTS: 'pending,approved,rejected,expired,failed',
      SERVICE_NOTIFICATIONS__ADMIN_BASE_URL: 'https://gatehouse-admin.example.test',
      SERVICE_NOTIFICATIONS__TIMEOUT_SECONDS: '0.5',
      SERVICE_NOTIFICATIONS__MAX_ATTEMPTS: '2',
      // The tests call the sweep and the recovery themselves on rows they prepare: the background loops must not
      // take those rows first (their first pass runs at start, before any row exists).
      SERVICE_WORKER__SWEEP_INTERVAL_SECONDS: '3600',
    },
  });
  await world.httpSource('up', `${upstream.base}/base/`, { token: UPSTREAM_TOKEN });
  await world.policy({ name: 'writes need approval', conditions: { source_ids: ['up'], methods: ['POST'] }, actions: { effect: 'require_approval' } });
  writer = await world.agent('writer-agent', [{ source_id: 'up', role_key: 'writer' }]);
  other = await world.agent('other-agent', [{ source_id: 'up', role_key: 'writer' }]);
  db = await world.svc.database!.connect();
});

afterAll(async () => {
  await db?.end();
  await world?.stop();
  await upstream?.close();
  await slack?.close();
});

beforeEach(() => {
  slack.mode = 'ok';
});

describe('the full life of an approval', () => {
  it('write → 202 → approve → upstream hit once with the Idempotency-Key → the agent reads the redacted result', async () => {
    const before = writes().length;
    const id = await queue('/orders', { item: 'book', email: EMAIL, card: CARD });
    expect(writes().length).toBe(before);

    const listed = await world.admin('GET', '/api/approvals?status=pending');
    expect(listed.status).toBe(200);
    const view = listed.json.find((a: { id: number }) => a.id === id);
    expect(Object.keys(view).sort()).toEqual(['approved_by', 'created_at', 'executed_at', 'expires_at', 'id', 'identity_id', 'request_metadata', 'risk_level', 'sql_text', 'source_id', 'status'].sort());
    expect(view).toMatchObject({ identity_id: writer.id, source_id: 'up', sql_text: 'POST /orders', status: 'pending', approved_by: null, executed_at: null });
    expect(JSON.stringify(listed.json)).not.toContain(EMAIL);
    expect(JSON.stringify(listed.json)).not.toContain('4111');

    const pending = await world.proxy(writer.key, 'GET', `/approvals/${id}`);
    expect(pending.status).toBe(200);
    expect(pending.json).toMatchObject({ id, status: 'pending', source_id: 'up', executed_at: null, result: null });

    const approved = await world.admin('POST', `/api/approvals/${id}/approve`);
    expect(approved.status, approved.text).toBe(200);
    expect(approved.json).toEqual({ id, status: 'executed', executed: true });

    const hits = writes().slice(before);
    expect(hits).toHaveLength(1);
    expect(hits[0]!.path).toBe('/base/orders');
    expect(hits[0]!.headers['idempotency-key']).toBe(`gatehouse-approval-${id}`);
    expect(hits[0]!.headers.authorization).toBe(`Bearer ${UPSTREAM_TOKEN}`);
    expect(JSON.parse(hits[0]!.body)).toEqual({ item: 'book', email: EMAIL, card: CARD });

    const read = await world.proxy(writer.key, 'GET', `/approvals/${id}`);
    expect(read.status).toBe(200);
    expect(read.json).toMatchObject({ id, status: 'executed', source_id: 'up', executed_at: expect.any(String) });
    expect(read.json.result).toMatchObject({ status: 201, headers: { 'content-type': 'application/json' }, truncated: false });
    expect(JSON.parse(read.json.result.body)).toMatchObject({ id: 77, contact: '[REDACTED:email]' });
    expect(read.text).not.toContain(EMAIL);

    const admin = await world.admin('GET', `/api/approvals/${id}`);
    expect(admin.json).toMatchObject({ status: 'executed', approved_by: 'admin', executed_at: expect.any(String) });

    // Notifications: pending and approved, with a link, and nothing secret or personal.
    // The identity name is looked up off the decision path, so the notice may still be on its way.
    await expect.poll(() => slack.requests.filter((r) => r.body.includes(`#${id} `)).length).toBeGreaterThanOrEqual(2);
    await settleNotifications();
    const texts = slack.requests.map((r) => r.body).filter((b) => b.includes(`#${id} `));
    expect(texts.some((t) => t.includes('waiting for a decision') && t.includes(`https://gatehouse-admin.example.test/dashboard/approvals/${id}`))).toBe(true);
    expect(texts.some((t) => t.includes('was approved'))).toBe(true);
    for (const r of slack.requests) {
      expect(r.body).not.toContain(EMAIL);
      expect(r.body).not.toContain('4111');
      expect(r.body).not.toContain(UPSTREAM_TOKEN);
      expect(r.body).not.toContain('hook-secret');
      expect(r.body).not.toContain(writer.key);
    }
  });

  it('the audit log records the execution as the approval, on the http channel', async () => {
    const id = await queue();
    await world.admin('POST', `/api/approvals/${id}/approve`);
    await expect
      .poll(async () => (await db.query(`select decision, approval_id, status from audit_entries where approval_id = $1 and channel = 'http' order by ts`, [id])).rows, { timeout: 5_000 })
      .toEqual([
        { decision: 'require_approval', approval_id: id, status: 202 },
        { decision: 'allow', approval_id: id, status: 201 },
      ]);
  });

  it('every agent read of an approval is audited: its own, another identity\'s and an anonymous one', async () => {
    const id = await queue();
    expect((await world.proxy(writer.key, 'GET', `/approvals/${id}`)).status).toBe(200);
    expect((await world.proxy(other.key, 'GET', `/approvals/${id}`)).status).toBe(404);
    expect((await world.proxy(null, 'GET', `/approvals/${id}`)).status).toBe(401);
    const reads = () =>
      db.query(
        `select identity_id, approval_id, source_id, status, decision, error_code from audit_entries
          where channel = 'http' and operation = 'get_approval' and path = $1 order by ts, id`,
        [`/approvals/${id}`],
      );
    await expect
      .poll(async () => (await reads()).rows, { timeout: 5_000 })
      .toEqual([
        { identity_id: writer.id, approval_id: id, source_id: 'up', status: 200, decision: 'allow', error_code: null },
        { identity_id: other.id, approval_id: id, source_id: null, status: 404, decision: 'error', error_code: 'not_found' },
        { identity_id: null, approval_id: null, source_id: null, status: 401, decision: 'deny', error_code: 'unauthenticated' },
      ]);
  });

  it('reject: the upstream is never hit, and a later approve answers 409', async () => {
    const before = writes().length;
    const id = await queue();
    const rejected = await world.admin('POST', `/api/approvals/${id}/reject`);
    expect(rejected.status).toBe(200);
    expect(rejected.json).toEqual({ id, status: 'rejected', executed: false });
    const again = await world.admin('POST', `/api/approvals/${id}/approve`);
    expect(again.status).toBe(409);
    expect(again.json).toMatchObject({ detail: expect.any(String), code: 'not_actionable' });
    expect((await world.admin('POST', `/api/approvals/${id}/reject`)).status).toBe(409);
    expect(writes().length).toBe(before);
    expect((await world.proxy(writer.key, 'GET', `/approvals/${id}`)).json).toMatchObject({ status: 'rejected', result: null });
  });

  it('expiry: past expires_at, approve answers 409 and marks it expired even before the sweeper runs; the sweeper expires the rest', async () => {
    const before = writes().length;
    const id = await queue();
    const swept = await queue();
    await db.query(`update approvals set expires_at = now() - interval '1 second' where id = any($1)`, [[id, swept]]);
    const late = await world.admin('POST', `/api/approvals/${id}/approve`);
    expect(late.status).toBe(409);
    expect(late.json.code).toBe('not_actionable');
    expect((await world.admin('GET', `/api/approvals/${id}`)).json.status).toBe('expired');

    const result = await (await approvalServiceFor(services())).sweep();
    expect(result.expired).toBeGreaterThanOrEqual(1);
    expect((await world.admin('GET', `/api/approvals/${swept}`)).json.status).toBe('expired');
    expect((await world.admin('POST', `/api/approvals/${swept}/approve`)).status).toBe(409);
    expect(writes().length).toBe(before);
    const expired = await world.admin('GET', '/api/approvals?status=expired');
    expect(expired.json.map((a: { id: number }) => a.id)).toEqual(expect.arrayContaining([id, swept]));
  });

  it('20 concurrent approve calls: exactly one executes (one upstream hit), 19 answer 409', async () => {
    const before = writes().length;
    const id = await queue();
    const answers = await Promise.all(Array.from({ length: 20 }, () => world.admin('POST', `/api/approvals/${id}/approve`)));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok).toHaveLength(1);
    expect(ok[0]!.json).toEqual({ id, status: 'executed', executed: true });
    expect(answers.filter((a) => a.status === 409)).toHaveLength(19);
    expect(writes().length - before).toBe(1);
  });

  it('a grant revoked before approval: failed, nothing sent', async () => {
    const agent = await world.agent('revoked-agent', [{ source_id: 'up', role_key: 'writer' }]);
    const id = await queue('/orders', { item: 'pen' }, agent.key);
    const grants = await world.admin('GET', `/api/identities/${agent.id}/grants`);
    for (const g of grants.json as Array<{ id: number }>) expect((await world.admin('DELETE', `/api/identities/${agent.id}/grants/${g.id}`)).status).toBeLessThan(300);
    const before = writes().length;
    const approved = await world.admin('POST', `/api/approvals/${id}/approve`);
    expect(approved.status).toBe(200);
    expect(approved.json).toEqual({ id, status: 'failed', executed: false });
    expect(writes().length).toBe(before);
    const read = await world.proxy(agent.key, 'GET', `/approvals/${id}`);
    expect(read.json).toMatchObject({ status: 'failed', result: { error: 'forbidden' } });
    await expect.poll(() => slack.requests.some((r) => r.body.includes(`#${id} failed to execute`))).toBe(true);
  });

  it('a disabled identity: failed, nothing sent', async () => {
    const agent = await world.agent('disabled-agent', [{ source_id: 'up', role_key: 'writer' }]);
    const id = await queue('/orders', { item: 'cup' }, agent.key);
    expect((await world.admin('PATCH', `/api/identities/${agent.id}`, { enabled: false })).status).toBe(200);
    const before = writes().length;
    const approved = await world.admin('POST', `/api/approvals/${id}/approve`);
    expect(approved.json).toEqual({ id, status: 'failed', executed: false });
    expect(writes().length).toBe(before);
  });
});

describe('crash recovery (docs/approvals.md)', () => {
  it('approved with a claim but no outcome: marked failed, never executed', async () => {
    const id = await queue();
    await db.query(`update approvals set status = 'approved', approved_by = 'admin', decided_at = now() - interval '2 hours', execution_started_at = now() - interval '2 hours' where id = $1`, [id]);
    const before = writes().length;
    const service = await approvalServiceFor(services());
    const swept = await service.sweep();
    expect(swept.failed).toBeGreaterThanOrEqual(1);
    expect(await service.recoverUnclaimed(0)).toBe(0);
    expect(writes().length).toBe(before);
    const row = (await db.query('select status, result, executed_at from approvals where id = $1', [id])).rows[0];
    expect(row.status).toBe('failed');
    expect(row.result).toEqual({ error: 'outcome_unknown', message: 'Outcome unknown after a crash; not retried.' });
    expect(row.executed_at).not.toBeNull();
  });

  it('approved without a claim: recovery executes it exactly once', async () => {
    const id = await queue();
    await db.query(`update approvals set status = 'approved', approved_by = 'admin', decided_at = now() - interval '5 minutes' where id = $1`, [id]);
    const before = writes().length;
    const service = await approvalServiceFor(services());
    const [a, b] = await Promise.all([service.recoverUnclaimed(0), service.recoverUnclaimed(0)]);
    expect(a + b).toBe(1);
    expect(await service.recoverUnclaimed(0)).toBe(0);
    expect(writes().length - before).toBe(1);
    expect(writes().at(-1)!.headers['idempotency-key']).toBe(`gatehouse-approval-${id}`);
    expect((await db.query('select status from approvals where id = $1', [id])).rows[0].status).toBe('executed');
  });

  it('a recent approval without a claim is left to its decider (grace period)', async () => {
    const id = await queue();
    await db.query(`update approvals set status = 'approved', approved_by = 'admin', decided_at = now() where id = $1`, [id]);
    const service = await approvalServiceFor(services());
    const before = writes().length;
    expect(await service.recoverUnclaimed(60_000)).toBe(0);
    expect(writes().length).toBe(before);
    expect(await service.recoverUnclaimed(0)).toBe(1);
  });
});

describe('Slack failures change nothing', () => {
  for (const mode of ['fail500', 'hang'] as const) {
    it(`a Slack that ${mode === 'hang' ? 'times out' : 'answers 500'}: the request is queued and the decision executes as usual`, async () => {
      slack.mode = mode;
      const seen = slack.requests.length;
      const started = Date.now();
      const id = await queue();
      // Delivery is fire-and-forget: the 202 does not wait for Slack's timeout or retries (two 0.5 s attempts, ≥ 1 s).
      expect(Date.now() - started).toBeLessThan(900);
      const before = writes().length;
      const approved = await world.admin('POST', `/api/approvals/${id}/approve`);
      expect(approved.json).toEqual({ id, status: 'executed', executed: true });
      expect(writes().length - before).toBe(1);
      // pending and approved, each tried max_attempts (2) times.
      await expect.poll(() => slack.requests.length - seen, { timeout: 5_000 }).toBe(4);
      await settleNotifications();
      expect(slack.requests.length - seen).toBe(4);
    });
  }
});

describe('admin API shapes', () => {
  it('422 for a bad status or id, 404 for an unknown id', async () => {
    const bad = await world.admin('GET', '/api/approvals?status=bogus');
    expect(bad.status).toBe(422);
    expect(bad.json.detail[0]).toMatchObject({ loc: ['query', 'status'], msg: expect.any(String), type: expect.any(String) });
    const badId = await world.admin('GET', '/api/approvals/abc');
    expect(badId.status).toBe(422);
    expect(badId.json.detail[0].loc).toEqual(['path', 'approval_id']);
    expect((await world.admin('POST', '/api/approvals/1.5/approve')).json.detail[0].loc).toEqual(['path', 'approval_id']);
    expect((await world.admin('GET', '/api/approvals/999999')).status).toBe(404);
    expect((await world.admin('POST', '/api/approvals/999999/approve')).status).toBe(404);
    expect((await world.admin('POST', '/api/approvals/999999/reject')).status).toBe(404);
    const all = await world.admin('GET', '/api/approvals');
    expect(all.status).toBe(200);
    expect(JSON.stringify(all.json)).not.toMatch(/request_payload|body_b64/);
  });

  it('a session without the CSRF header cannot decide; an anonymous caller gets 401', async () => {
    const id = await queue();
    const login = await fetch(`${world.svc.adminUrl}/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'admin', password: 'world-owner-password-0001' }), redirect: 'manual' });
    const cookie = login.headers.getSetCookie().map((l) => l.split(';')[0]!).find((p) => p.startsWith('gatehouse_session='))!;
    const noCsrf = await answer(await fetch(`${world.svc.adminUrl}/api/approvals/${id}/approve`, { method: 'POST', headers: { cookie } }));
    expect(noCsrf.status).toBe(403);
    expect((await answer(await fetch(`${world.svc.adminUrl}/api/approvals/${id}/approve`, { method: 'POST' }))).status).toBe(401);
    expect((await world.admin('GET', `/api/approvals/${id}`)).json.status).toBe('pending');
  });

  it('a viewer may read approvals but not decide them; an approver may decide', async () => {
    const id = await queue();
    const tokens: Record<string, string> = {};
    for (const role of ['viewer', 'approver'] as const) {
      const username = `${role}-approvals`;
      const password = `${role}-approvals-password-long`;
      const created = await world.admin('POST', '/api/admins', { username, password, roles: [role], must_change_password: false });
      expect(created.status, created.text).toBe(201);
      tokens[role] = await adminToken(world.svc.adminUrl, username, password);
    }
    const as = (role: string, method: string, path: string) => fetch(`${world.svc.adminUrl}${path}`, { method, headers: { authorization: `Bearer ${tokens[role]}` } }).then(answer);
    expect((await as('viewer', 'GET', `/api/approvals/${id}`)).status).toBe(200);
    const refused = await as('viewer', 'POST', `/api/approvals/${id}/approve`);
    expect(refused.status).toBe(403);
    expect((await as('viewer', 'POST', `/api/approvals/${id}/reject`)).status).toBe(403);
    expect((await world.admin('GET', `/api/approvals/${id}`)).json.status).toBe('pending');
    const rejected = await as('approver', 'POST', `/api/approvals/${id}/reject`);
    expect(rejected.status, rejected.text).toBe(200);
    expect(rejected.json).toMatchObject({ id, status: 'rejected' });
  });
});

describe('agent side', () => {
  it("another identity's approval is 404, a non-integer id 400, no key 401", async () => {
    const id = await queue();
    const foreign = await world.proxy(other.key, 'GET', `/approvals/${id}`);
    expect(foreign.status).toBe(404);
    expect((await world.proxy(other.key, 'GET', '/approvals/99999999')).json.error).toBe(foreign.json.error);
    expect((await world.proxy(writer.key, 'GET', '/approvals/abc')).status).toBe(400);
    expect((await world.proxy(null, 'GET', `/approvals/${id}`)).status).toBe(401);
  });
});
