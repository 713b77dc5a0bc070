// POST /api/policies/dry-run and its console form: HTTP and SQL requests, the source-role decision first, and nothing changed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestService } from '../support/service.js';
import { seedWorld, startPolicyService, type PolicyApi, type World } from './support.js';

let svc: TestService;
let api: PolicyApi;
let world: World;

beforeAll(async () => {
  ({ svc, api } = await startPolicyService());
  world = await seedWorld(svc);
  const create = async (body: unknown) => {
    const res = await api.send('POST', '/api/policies', body);
    if (res.status !== 201) throw new Error(res.text);
  };
  await create({ name: 'crm secrets denied', priority: 10, conditions: { source_ids: ['crm'], paths: ['/v1/customers/*/secrets/**'] }, actions: { effect: 'deny' } });
  await create({ name: 'crm allow everything high', priority: 100, conditions: { source_ids: ['crm'], methods: ['POST'] }, actions: { effect: 'allow' } });
  await create({ name: 'support rate', priority: 0, conditions: { identity_roles: ['support'] }, actions: { rate_limit: '100/minute', pii_mode: 'deep' } });
  await create({ name: 'mask emails', priority: 5, conditions: { source_ids: ['warehouse'], columns: ['email'] }, actions: { redact_columns: ['email'] } });
  await create({ name: 'salaries need approval', priority: 20, conditions: { tables: ['public.salaries'] }, actions: { effect: 'require_approval' } });
}, 60_000);
afterAll(async () => svc?.stop());

const dry = (body: Record<string, unknown>) => api.send('POST', '/api/policies/dry-run', { identity_id: world.identityId, ...body });

describe('dry-run over HTTP requests', () => {
  it('allows a GET the role allows and reports obligations and the trace', async () => {
    const res = await dry({ source_id: 'crm', method: 'GET', path: '/v1/customers/42' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ effect: 'allow', operation: 'read', tables: [] });
    expect(res.json.trace[0]).toMatchObject({ kind: 'source_role', allowed: true });
    expect(res.json.matched_policies.map((p: { name: string }) => p.name)).toEqual(['support rate']);
    expect(res.json.obligations).toMatchObject({ pii_mode: 'deep', strictest_rate_limit: { points: 100, durationSec: 60 } });
    expect(res.json.policy_version).toBe(svc.running.services.policies.version());
  });

  it('a deny policy denies, naming the policy and the failed conditions of the others', async () => {
    const res = await dry({ source_id: 'crm', method: 'GET', path: '/v1/customers/42/secrets/key' });
    expect(res.json.effect).toBe('deny');
    expect(res.json.matched_policies.map((p: { name: string }) => p.name)).toContain('crm secrets denied');
    const other = res.json.trace.find((t: { name?: string }) => t.name === 'crm allow everything high');
    expect(other).toMatchObject({ matched: false, failed_condition: 'methods', expected: ['POST'] });
  });

  it('a role deny stays a deny even when a higher-priority policy allows (spec §4 rule 1)', async () => {
    const res = await dry({ source_id: 'crm', method: 'POST', path: '/v1/customers/42' });
    expect(res.json).toMatchObject({ effect: 'deny', operation: 'write', deciding_policy_id: null });
    expect(res.json.trace[0]).toMatchObject({ kind: 'source_role', allowed: false });
    expect(res.json.source_role.allowed).toBe(false);
    expect(res.json.reasons.join(' ')).toMatch(/cannot create source access/);
    const stranger = await api.send('POST', '/api/policies/dry-run', { identity_id: world.otherIdentityId, source_id: 'crm', method: 'GET', path: '/v1/customers/1' });
    expect(stranger.json.effect).toBe('deny');
    expect(stranger.json.trace[0].reason).toMatch(/no active grant/);
  });
});

describe('dry-run over SQL', () => {
  it('classifies the statement: operation, tables and columns drive roles and policies', async () => {
    const res = await dry({ source_id: 'warehouse', sql: 'SELECT u.email, u.id FROM public.users u WHERE u.id = 1' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ effect: 'allow', operation: 'read', tables: ['public.users'] });
    expect(res.json.obligations.redact_columns).toEqual(['email']);
    expect(res.json.sql).toMatchObject({ ok: true, multi_statement: false });
  });

  it('require_approval from a table policy', async () => {
    const res = await dry({ source_id: 'warehouse', sql: 'select * from salaries' });
    expect(res.json).toMatchObject({ effect: 'require_approval', tables: ['public.salaries'] });
  });

  it('a write the role does not allow is denied whatever the policies say', async () => {
    const res = await dry({ source_id: 'warehouse', sql: 'WITH gone AS (DELETE FROM public.users RETURNING id) SELECT * FROM gone' });
    expect(res.json).toMatchObject({ effect: 'deny', operation: 'write' });
    expect(res.json.trace[0].allowed).toBe(false);
    const other = await dry({ source_id: 'warehouse', sql: 'SELECT * FROM public.users JOIN hr.pay p ON true' });
    expect(other.json.effect).toBe('deny');
    expect(other.json.trace[0].reason).toMatch(/hr\.pay/);
  });

  it('calls off the built-in allowlist, DO and unknown statement kinds are denied as the front doors deny them', async () => {
    const ok = await dry({ source_id: 'warehouse', sql: 'SELECT lower(email) FROM public.users' });
    expect(ok.json.trace[0].allowed).toBe(true);
    const stat = await dry({ source_id: 'warehouse', sql: "SELECT * FROM ts_stat('select to_tsvector(secret) from hr.pay')" });
    expect(stat.json.effect).toBe('deny');
    expect(stat.json.trace[0].reason).toMatch(/call of ts_stat /);
    const block = await dry({ source_id: 'warehouse', sql: 'DO $$ BEGIN PERFORM 1; END $$' });
    expect(block.json.effect).toBe('deny');
    expect(block.json.trace[0].reason).toMatch(/DO blocks are not allowed/);
  });

  it('unparseable SQL is denied with a reason, never guessed', async () => {
    const res = await dry({ source_id: 'warehouse', sql: 'SELEKT * FROM users' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ effect: 'deny', operation: null, sql: { ok: false } });
    expect(res.json.reasons[0]).toMatch(/SQL not understood/);
  });

  it('an operation with tables and no SQL is decided as such', async () => {
    const res = await dry({ source_id: 'warehouse', operation: 'read', tables: ['public.orders'], columns: ['public.orders.email'] });
    expect(res.json).toMatchObject({ effect: 'allow', operation: 'read', tables: ['public.orders'] });
    expect(res.json.obligations.redact_columns).toEqual(['email']);
  });
});

describe('dry-run input and side effects', () => {
  it('changes nothing', async () => {
    const before = await api.send('GET', '/api/policies');
    const version = svc.running.services.policies.version();
    await dry({ source_id: 'crm', method: 'DELETE', path: '/v1/customers/1' });
    expect((await api.send('GET', '/api/policies')).json).toEqual(before.json);
    expect(svc.running.services.policies.version()).toBe(version);
  });

  it('422 for contradictory or incomplete input, 404 for unknown identity or source', async () => {
    expect((await dry({ source_id: 'crm', method: 'GET' })).json.detail[0].loc).toEqual(['body', 'path']);
    expect((await dry({ source_id: 'crm', method: 'GET', path: '/x', sql: 'select 1' })).status).toBe(422);
    expect((await dry({ source_id: 'crm', operation: 'drop' })).json.detail[0].loc).toEqual(['body', 'operation']);
    expect((await api.send('POST', '/api/policies/dry-run', { source_id: 'crm' })).json.detail[0].loc).toEqual(['body', 'identity_id']);
    expect((await api.send('POST', '/api/policies/dry-run', { identity_id: 999999, source_id: 'crm' })).status).toBe(404);
    expect((await dry({ source_id: 'nope' })).status).toBe(404);
  });

  it('the console form answers the same decision', async () => {
    const res = await api.form('/dashboard/policies/dry-run', { identity_id: String(world.identityId), source_id: 'warehouse', sql: 'select email from users', tables: '', operation: 'read' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ effect: 'allow', operation: 'read', tables: ['public.users'] });
    const http = await api.form('/dashboard/policies/dry-run', { identity_id: String(world.identityId), source_id: 'crm', method: 'post', path: '/v1/customers/1' });
    expect(http.json).toMatchObject({ effect: 'deny', operation: 'write' });
    const bad = await api.form('/dashboard/policies/dry-run', { identity_id: 'abc', source_id: 'crm' });
    expect(bad.status).toBe(422);
    expect(bad.json.detail[0].loc).toEqual(['body', 'identity_id']);
  });
});
