// /api/alerts on the admin listener: rules are created, read, updated, enabled, deleted and audited; every input outside spec §2's fields and values answers 422; permissions alerts:read / alerts:write hold.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminToken, startWorld, type World } from '../support/world.js';
import { bearer } from '../support/admin-client.js';

let world: World;
let agentId: number;

beforeAll(async () => {
  world = await startWorld({ env: { SERVICE_WORKER__ALERT_INTERVAL_SECONDS: '3600' } });
  agentId = (await world.agent('alert-api-agent')).id;
  await world.httpSource('alert-api-src', 'http://127.0.0.1:9/');
});

afterAll(async () => {
  await world?.stop();
});

const valid = { name: 'errors-high', condition_type: 'error_rate', threshold: 0.2 };

describe('alert rule CRUD', () => {
  it('creates with the spec defaults (comparator >, channel log, window 300), reads, updates, disables, enables and deletes, each change audited', async () => {
    const created = await world.admin('POST', '/api/alerts', valid);
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({
      name: 'errors-high', condition_type: 'error_rate', threshold: 0.2, comparator: '>', description: '', identity_id: null, source_id: null,
      notification_channel: 'log', notification_target: '', window_seconds: 300, enabled: true, state: 'ok', webhook_secret_set: false,
    });
    expect(created.json.webhook_secret).toBeUndefined();
    const id = created.json.id as number;

    expect((await world.admin('GET', `/api/alerts/${id}`)).json.name).toBe('errors-high');
    expect((await world.admin('GET', '/api/alerts')).json.map((r: { id: number }) => r.id)).toContain(id);

    const patched = await world.admin('PATCH', `/api/alerts/${id}`, { threshold: 0.5, identity_id: String(agentId), source_id: 'alert-api-src', comparator: '>=' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json).toMatchObject({ threshold: 0.5, identity_id: String(agentId), source_id: 'alert-api-src', comparator: '>=' });
    const cleared = await world.admin('PATCH', `/api/alerts/${id}`, { identity_id: null, source_id: '' });
    expect(cleared.json).toMatchObject({ identity_id: null, source_id: null });

    expect((await world.admin('POST', `/api/alerts/${id}/disable`)).json.enabled).toBe(false);
    expect((await world.admin('POST', `/api/alerts/${id}/enable`)).json.enabled).toBe(true);
    expect((await world.admin('GET', `/api/alerts/${id}/history`)).json).toEqual([]);
    expect((await world.admin('DELETE', `/api/alerts/${id}`)).json).toEqual({ deleted: true, id });
    expect((await world.admin('GET', `/api/alerts/${id}`)).status).toBe(404);

    const actions = world.audits.filter((e) => e.target?.type === 'alert_rule' && e.target.id === id).map((e) => e.action);
    expect(actions).toEqual(['alert.create', 'alert.update', 'alert.update', 'alert.disable', 'alert.enable', 'alert.delete']);
  });

  it('gives a webhook rule a signing secret shown once, never in reads or in the audit', async () => {
    const created = await world.admin('POST', '/api/alerts', { ...valid, name: 'hook-rule', notification_channel: 'webhook', notification_target: 'https://hooks.example.com/in?token=abc' });
    expect(created.status, created.text).toBe(201);
    const secret = created.json.webhook_secret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(created.json.notification_target).toBe('https://hooks.example.com/in?…');
    const read = await world.admin('GET', `/api/alerts/${created.json.id}`);
    expect(read.text).not.toContain(secret);
    expect(read.json.webhook_secret_set).toBe(true);
    expect(JSON.stringify(world.audits)).not.toContain(secret);
    expect(JSON.stringify(world.audits)).not.toContain('token=abc');
    const rotated = await world.admin('POST', `/api/alerts/${created.json.id}/rotate-secret`);
    expect(rotated.json.webhook_secret).toMatch(/^whsec_/);
    expect(rotated.json.webhook_secret).not.toBe(secret);
  });

  it('is in the OpenAPI document', async () => {
    const doc = (await world.admin('GET', '/api/openapi.json')).json as { paths: Record<string, Record<string, unknown>> };
    for (const p of ['/api/alerts', '/api/alerts/{id}', '/api/alerts/{id}/enable', '/api/alerts/{id}/history', '/api/alerts/dry-run']) expect(doc.paths[p], p).toBeDefined();
  });
});

describe('422 for anything outside the spec fields and values', () => {
  const cases: Array<[string, Record<string, unknown>, Array<string | number>]> = [
    ['missing name', { condition_type: 'error_rate', threshold: 0.1 }, ['body', 'name']],
    ['missing condition_type', { name: 'x', threshold: 0.1 }, ['body', 'condition_type']],
    ['missing threshold', { name: 'x', condition_type: 'error_rate' }, ['body', 'threshold']],
    ['unknown condition_type', { ...valid, condition_type: 'cpu_load' }, ['body', 'condition_type']],
    ['unknown comparator', { ...valid, comparator: '!=' }, ['body', 'comparator']],
    ['comparator =>', { ...valid, comparator: '=>' }, ['body', 'comparator']],
    ['unknown channel', { ...valid, notification_channel: 'email' }, ['body', 'notification_channel']],
    ['threshold as text', { ...valid, threshold: '0.1' }, ['body', 'threshold']],
    ['rate above 1', { ...valid, threshold: 1.5 }, ['body', 'threshold']],
    ['negative count', { ...valid, condition_type: 'request_count', threshold: -1 }, ['body', 'threshold']],
    ['window below a minute', { ...valid, window_seconds: 59 }, ['body', 'window_seconds']],
    ['window above a day', { ...valid, window_seconds: 86_401 }, ['body', 'window_seconds']],
    ['fractional window', { ...valid, window_seconds: 300.5 }, ['body', 'window_seconds']],
    ['unknown field', { ...valid, severity: 'high' }, ['body']],
    ['identity_id not a number', { ...valid, identity_id: 'abc' }, ['body', 'identity_id']],
    ['identity that does not exist', { ...valid, identity_id: '999999' }, ['body', 'identity_id']],
    ['source id malformed', { ...valid, source_id: 'Bad Source' }, ['body', 'source_id']],
    ['source that does not exist', { ...valid, source_id: 'nowhere' }, ['body', 'source_id']],
    ['webhook without target', { ...valid, notification_channel: 'webhook' }, ['body', 'notification_target']],
    ['webhook target not a URL', { ...valid, notification_channel: 'webhook', notification_target: 'hooks.example.com' }, ['body', 'notification_target']],
    ['webhook target ftp', { ...valid, notification_channel: 'webhook', notification_target: 'ftp://hooks.example.com/' }, ['body', 'notification_target']],
    ['webhook target with credentials', { ...valid, notification_channel: 'webhook', notification_target: 'https://u:p@hooks.example.com/' }, ['body', 'notification_target']],
    ['slack target not a channel', { ...valid, notification_channel: 'slack', notification_target: 'https://slack.com' }, ['body', 'notification_target']],
    ['log with a target', { ...valid, notification_target: 'somewhere' }, ['body', 'notification_target']],
    ['empty name', { ...valid, name: '' }, ['body', 'name']],
  ];
  it.each(cases)('%s', async (_what, body, loc) => {
    const res = await world.admin('POST', '/api/alerts', body);
    expect(res.status, res.text).toBe(422);
    const locs = (res.json.detail as Array<{ loc: unknown[]; msg: string; type: string }>).map((d) => d.loc);
    expect(locs.some((l) => JSON.stringify(l).startsWith(JSON.stringify(loc).slice(0, -1)))).toBe(true);
  });

  it('a duplicate name, a bad path id, a bad patch and a bad dry-run body', async () => {
    expect((await world.admin('POST', '/api/alerts', { ...valid, name: 'dup' })).status).toBe(201);
    expect((await world.admin('POST', '/api/alerts', { ...valid, name: 'dup' })).status).toBe(422);
    expect((await world.admin('GET', '/api/alerts/abc')).json.detail[0].loc).toEqual(['path', 'id']);
    const id = (await world.admin('GET', '/api/alerts')).json.find((r: { name: string }) => r.name === 'dup').id;
    expect((await world.admin('PATCH', `/api/alerts/${id}`, { comparator: 'gt' })).status).toBe(422);
    expect((await world.admin('PATCH', `/api/alerts/${id}`, { notification_channel: 'webhook' })).json.detail[0].loc).toEqual(['body', 'notification_target']);
    expect((await world.admin('PATCH', `/api/alerts/${id}`, { threshold: 2 })).json.detail[0].loc).toEqual(['body', 'threshold']);
    expect((await world.admin('POST', '/api/alerts/dry-run', { condition_type: 'nope' })).status).toBe(422);
    expect((await world.admin('POST', '/api/alerts/dry-run', { window_seconds: 10 })).status).toBe(422);
  });
});

describe('permissions', () => {
  it('a viewer reads alert rules but cannot change them', async () => {
    const password = 'alert-viewer-password-long';
    expect((await world.admin('POST', '/api/admins', { username: 'alert-viewer', password, roles: ['viewer'], must_change_password: false })).status).toBe(201);
    const token = await adminToken(world.svc.adminUrl, 'alert-viewer', password);
    expect((await bearer(world.svc.adminUrl, token, 'GET', '/api/alerts')).status).toBe(200);
    expect((await bearer(world.svc.adminUrl, token, 'POST', '/api/alerts', { ...valid, name: 'viewer-made' })).status).toBe(403);
  });
});

describe('POST /api/alerts/dry-run', () => {
  it('answers with the spec defaults for an empty body and stores nothing', async () => {
    const before = (await world.admin('GET', '/api/alerts')).json.length;
    const client = await world.svc.database!.connect();
    const countAll = async () =>
      (await client.query(`select (select count(*) from alert_rollups)::int as rollups, (select watermark from alert_rollup_state) as watermark, (select count(*) from alert_events)::int as events, (select count(*) from alert_reach)::int as reach`)).rows[0];
    const stored = await countAll();
    const res = await world.admin('POST', '/api/alerts/dry-run', {});
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ name: 'unsaved-rule', condition_type: 'error_rate', threshold: 0.1, comparator: '>', window_seconds: 300, notification_channel: 'log', would_fire: false });
    expect(res.json.sparkline).toHaveLength(24);
    expect((await world.admin('GET', '/api/alerts')).json.length).toBe(before);
    try {
      expect(await countAll()).toEqual(stored);
    } finally {
      await client.end();
    }
  });
});
