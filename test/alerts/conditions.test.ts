// Each alert condition fires and resolves on audit entries of real requests through the gateway (only first_seen's 30-day history is inserted), and a firing rule notifies once until it resolves.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../support/world.js';
import { sendJson, startRecordingUpstream, type RecordingUpstream } from '../gateway/proxy/support.js';
import { clock, testEvaluator, type TestEvaluator } from './support.js';

let world: World;
let up: RecordingUpstream;
let ev: TestEvaluator;
let reader: { id: number; key: string };
let writer: { id: number; key: string };
let stranger: { id: number; key: string };
const time = clock();

const SOURCES = ['al-err', 'al-deny', 'al-count', 'al-rl', 'al-appr', 'al-pii', 'al-slow', 'al-first-a', 'al-first-b', 'al-first-c', 'al-burst', 'al-dedup'];

beforeAll(async () => {
  up = await startRecordingUpstream({
    '/api/boom': (_q, res) => sendJson(res, 500, { error: 'boom' }),
    '/api/pii': (_q, res) => sendJson(res, 200, { customer: { email: 'jane@example.com', ssn: '078-05-1120' } }),
    '/api/slow': (_q, res) => void setTimeout(() => sendJson(res, 200, { ok: true }), 300),
  });
  world = await startWorld({ privateSources: SOURCES, env: { SERVICE_WORKER__ALERT_INTERVAL_SECONDS: '3600' } });
  for (const s of SOURCES) await world.httpSource(s, `${up.base}/api/`);
  reader = await world.agent('al-reader', SOURCES.filter((s) => s !== 'al-burst' && s !== 'al-first-c').map((source_id) => ({ source_id, role_key: 'reader' })));
  writer = await world.agent('al-writer', [{ source_id: 'al-appr', role_key: 'writer' }]);
  stranger = await world.agent('al-stranger', [{ source_id: 'al-first-c', role_key: 'reader' }]);
  await world.policy({ name: 'al throttle', conditions: { source_ids: ['al-rl'] }, actions: { effect: 'allow', rate_limit: '2/minute' } });
  await world.policy({ name: 'al queue writes', conditions: { source_ids: ['al-appr'], operations: ['write'] }, actions: { effect: 'require_approval' } });
  ev = testEvaluator(world);
});

afterAll(async () => {
  await ev?.close();
  await world?.stop();
  await up?.close();
});

async function rule(body: Record<string, unknown>): Promise<number> {
  const res = await world.admin('POST', '/api/alerts', body);
  expect(res.status, res.text).toBe(201);
  return res.json.id as number;
}

async function tickAt(nowMs: number) {
  await world.svc.running.services.audit.flush();
  const report = await ev.evaluator.tick(nowMs);
  expect(report.leader).toBe(true);
  await ev.evaluator.idle();
  return report;
}

async function stateOf(id: number): Promise<{ state: string; last_value: number; last_delivery_error: string | null }> {
  return (await world.admin('GET', `/api/alerts/${id}`)).json;
}

const alertLines = (id: number, kind: string) => ev.lines.filter((l) => (l.alert as { rule_id?: number } | undefined)?.rule_id === id && l.msg === `alert ${kind}`);

/** Fires now, stays firing without a second notification, then resolves once the window has passed (or `resolve` made it false). */
async function firesAndResolves(id: number, expectValue: (v: number) => void, resolve?: () => Promise<void>): Promise<void> {
  await tickAt(time.now());
  let s = await stateOf(id);
  expect(s.state, JSON.stringify(s)).toBe('firing');
  expectValue(s.last_value);
  await tickAt(time.now());
  expect((await stateOf(id)).state).toBe('firing');
  expect(alertLines(id, 'firing')).toHaveLength(1);
  if (resolve) {
    await resolve();
    await tickAt(time.now());
  } else {
    // Time passes beyond the window: nothing in it any more.
    await tickAt(time.later(11 * 60_000));
  }
  s = await stateOf(id);
  expect(s.state).toBe('resolved');
  expect(alertLines(id, 'resolved')).toHaveLength(1);
  const history = (await world.admin('GET', `/api/alerts/${id}/history`)).json as Array<{ kind: string; delivery_status: string }>;
  expect(history.map((h) => h.kind)).toEqual(['resolved', 'firing']);
  expect(history.every((h) => h.delivery_status === 'delivered')).toBe(true);
}

describe('condition types over real gateway traffic', () => {
  it('error_rate: 5xx answers over requests; resolves as successful requests dilute it', async () => {
    const id = await rule({ name: 'c-error-rate', condition_type: 'error_rate', threshold: 0.4, source_id: 'al-err' });
    for (let i = 0; i < 3; i++) expect((await world.proxy(reader.key, 'GET', '/proxy/al-err/boom')).status).toBe(500);
    expect((await world.proxy(reader.key, 'GET', '/proxy/al-err/ok')).status).toBe(200);
    await firesAndResolves(id, (v) => expect(v).toBe(0.75), async () => {
      for (let i = 0; i < 6; i++) expect((await world.proxy(reader.key, 'GET', '/proxy/al-err/ok')).status).toBe(200);
    });
  });

  it('denial_rate: 403 denials over requests', async () => {
    const id = await rule({ name: 'c-denial-rate', condition_type: 'denial_rate', threshold: 0.5, comparator: '>=', source_id: 'al-deny' });
    expect((await world.proxy(reader.key, 'GET', '/proxy/al-deny/ok')).status).toBe(200);
    expect((await world.proxy(reader.key, 'POST', '/proxy/al-deny/ok', { body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(403);
    await firesAndResolves(id, (v) => expect(v).toBe(0.5));
  });

  it('request_count (with <): fires while the source is quiet, resolves when traffic arrives', async () => {
    const id = await rule({ name: 'c-request-count', condition_type: 'request_count', threshold: 3, comparator: '<', source_id: 'al-count', identity_id: String(reader.id) });
    expect((await world.proxy(reader.key, 'GET', '/proxy/al-count/ok')).status).toBe(200);
    await firesAndResolves(id, (v) => expect(v).toBe(1), async () => {
      for (let i = 0; i < 2; i++) expect((await world.proxy(reader.key, 'GET', '/proxy/al-count/ok')).status).toBe(200);
      // An agent out of scope does not count.
      expect((await world.proxy(stranger.key, 'GET', '/proxy/al-count/ok')).status).toBe(403);
    });
    expect((await stateOf(id)).last_value).toBe(3);
  });

  it('rate_limited_count: 429 answers', async () => {
    const id = await rule({ name: 'c-rate-limited', condition_type: 'rate_limited_count', threshold: 1, comparator: '>=', source_id: 'al-rl' });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await world.proxy(reader.key, 'GET', '/proxy/al-rl/ok')).status);
    expect(statuses).toEqual([200, 200, 429, 429]);
    await firesAndResolves(id, (v) => expect(v).toBe(2));
  });

  it('approval_backlog: pending approvals in scope; resolves when they are decided', async () => {
    const id = await rule({ name: 'c-backlog', condition_type: 'approval_backlog', threshold: 2, comparator: '>=', source_id: 'al-appr' });
    const ids: number[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await world.proxy(writer.key, 'POST', '/proxy/al-appr/ok', { body: '{}', headers: { 'content-type': 'application/json' } });
      expect(res.status, res.text).toBe(202);
      ids.push(res.json.approval_id as number);
    }
    await firesAndResolves(id, (v) => expect(v).toBe(2), async () => {
      expect((await world.admin('POST', `/api/approvals/${ids[0]}/reject`)).status).toBe(200);
    });
  });

  it('redaction_count: personal-data values redacted in responses', async () => {
    const id = await rule({ name: 'c-redactions', condition_type: 'redaction_count', threshold: 2, comparator: '>=', source_id: 'al-pii' });
    for (let i = 0; i < 2; i++) {
      const res = await world.proxy(reader.key, 'GET', '/proxy/al-pii/pii');
      expect(res.status).toBe(200);
      expect(res.text).not.toContain('jane@example.com');
    }
    await firesAndResolves(id, (v) => expect(v).toBeGreaterThanOrEqual(2));
  });

  it('latency_p95_ms: the 95th percentile of request durations', async () => {
    const id = await rule({ name: 'c-latency', condition_type: 'latency_p95_ms', threshold: 250, source_id: 'al-slow' });
    for (let i = 0; i < 3; i++) expect((await world.proxy(reader.key, 'GET', '/proxy/al-slow/slow')).status).toBe(200);
    await firesAndResolves(id, (v) => {
      expect(v).toBeGreaterThanOrEqual(300);
      // Two buckets above the upstream's 300 ms, and room for a loaded machine's own time per request.
      expect(v).toBeLessThan(300 * 1.25 * 1.25 + 600);
    });
  });

  it('first_seen: a source reached for the first time in 30 days (history of earlier reaches inserted)', async () => {
    const client = await world.svc.database!.connect();
    try {
      // Reached al-first-a ten days ago (still known); al-first-b forty days ago (forgotten).
      await client.query(`insert into alert_reach (identity_id, source_id, object, new_since, last_seen) values
        ($1, 'al-first-a', '', now() - interval '60 days', now() - interval '10 days'),
        ($1, 'al-first-b', '', now() - interval '90 days', now() - interval '40 days')`, [reader.id]);
    } finally {
      await client.end();
    }
    const id = await rule({ name: 'c-first-seen', condition_type: 'first_seen', threshold: 0, identity_id: String(reader.id) });
    // A new tick baseline: everything the reader reached earlier in this file is first seen too, so the rule scopes by source below.
    const idB = await rule({ name: 'c-first-seen-b', condition_type: 'first_seen', threshold: 0, identity_id: String(reader.id), source_id: 'al-first-b' });
    const idA = await rule({ name: 'c-first-seen-a', condition_type: 'first_seen', threshold: 0, identity_id: String(reader.id), source_id: 'al-first-a' });
    expect((await world.proxy(reader.key, 'GET', '/proxy/al-first-a/ok')).status).toBe(200);
    expect((await world.proxy(reader.key, 'GET', '/proxy/al-first-b/ok')).status).toBe(200);
    await firesAndResolves(idB, (v) => expect(v).toBe(1));
    // al-first-a was reached 10 days ago: not new, never fired.
    expect((await stateOf(idA)).state).toBe('ok');
    expect((await stateOf(idA)).last_value).toBe(0);
    expect((await stateOf(id)).state).toBe('resolved');
  });

  it('denied_burst: the same identity denied N times in the window (probing)', async () => {
    const id = await rule({ name: 'c-burst', condition_type: 'denied_burst', threshold: 4, comparator: '>=', source_id: 'al-burst' });
    for (let i = 0; i < 4; i++) expect((await world.proxy(stranger.key, 'GET', `/proxy/al-burst/probe-${i}`)).status).toBe(403);
    // Another identity's single denial does not add to the stranger's burst.
    expect((await world.proxy(reader.key, 'GET', '/proxy/al-burst/x')).status).toBe(403);
    await firesAndResolves(id, (v) => expect(v).toBe(4));
    const firing = (await world.admin('GET', `/api/alerts/${id}/history`)).json.find((h: { kind: string }) => h.kind === 'firing');
    expect(firing.details).toEqual({ identity_id: stranger.id });
  });
});

describe('deduplication and repeats', () => {
  it('a firing rule notifies once, again only after the repeat interval, and again after it resolved and fires anew', async () => {
    const repeating = testEvaluator(world, { repeatMs: 5 * 60_000 });
    try {
      const id = await rule({ name: 'd-repeat', condition_type: 'error_rate', threshold: 0.5, window_seconds: 900, source_id: 'al-dedup' });
      const call = async (path: string, status: number) => expect((await world.proxy(reader.key, 'GET', `/proxy/al-dedup/${path}`)).status).toBe(status);
      const lines = () => repeating.lines.filter((l) => (l.alert as { rule_id?: number } | undefined)?.rule_id === id).map((l) => l.msg);
      const tick = async (at: number) => {
        await world.svc.running.services.audit.flush();
        expect((await repeating.evaluator.tick(at)).leader).toBe(true);
        await repeating.evaluator.idle();
      };
      await call('boom', 500);
      await call('boom', 500);
      const t0 = Date.now() + 1_000;
      for (const dt of [0, 60_000, 120_000, 240_000]) await tick(t0 + dt);
      expect(lines()).toEqual(['alert firing']);
      await tick(t0 + 301_000);
      expect(lines()).toEqual(['alert firing', 'alert repeat']);
      await tick(t0 + 302_000);
      expect(lines()).toEqual(['alert firing', 'alert repeat']);
      for (let i = 0; i < 4; i++) await call('ok', 200);
      await tick(t0 + 303_000);
      expect(lines()).toEqual(['alert firing', 'alert repeat', 'alert resolved']);
      for (let i = 0; i < 4; i++) await call('boom', 500);
      await tick(t0 + 304_000);
      expect(lines()).toEqual(['alert firing', 'alert repeat', 'alert resolved', 'alert firing']);
      const history = (await world.admin('GET', `/api/alerts/${id}/history`)).json as Array<{ kind: string }>;
      expect(history.map((h) => h.kind)).toEqual(['firing', 'resolved', 'repeat', 'firing']);
      expect((await stateOf(id)).state).toBe('firing');
    } finally {
      await repeating.close();
    }
  });
});
