// Policy import: preview categories, atomic apply (one invalid → nothing changes, one version step), YAML, bounds, compat translation and the console forms.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminAuditEvent } from '../../src/admin/audit-events.js';
import type { TestService } from '../support/service.js';
import { startPolicyService, type PolicyApi } from './support.js';

let svc: TestService;
let api: PolicyApi;
let audit: AdminAuditEvent[];

beforeAll(async () => {
  ({ svc, api, audits: audit } = await startPolicyService());
  for (const body of [
    { name: 'keep', priority: 5, conditions: { source_ids: ['crm'] }, actions: { effect: 'deny' } },
    { name: 'change', priority: 1, conditions: { tables: ['public.*'] }, actions: { rate_limit: '10/second' } },
  ]) {
    const res = await api.send('POST', '/api/policies', body);
    if (res.status !== 201) throw new Error(res.text);
  }
}, 60_000);
afterAll(async () => svc?.stop());

const version = () => svc.running.services.policies.version();
const names = async () => (await api.send('GET', '/api/policies')).json.map((p: { name: string }) => p.name).sort();

describe('import preview', () => {
  it('lists create, update (with what changes), unchanged and invalid', async () => {
    const doc = [
      // key order differs from the stored object: still unchanged
      { priority: 5, actions: { effect: 'deny' }, conditions: { source_ids: ['crm'] }, name: 'keep' },
      { name: 'change', priority: 2, conditions: { tables: ['public.*'] }, actions: { rate_limit: '10/second' } },
      { name: 'brand-new', conditions: { operations: ['ddl'] }, actions: { effect: 'require_approval' } },
      { name: 'broken', conditions: {}, actions: { rate_limit: '1/fortnight' } },
      { name: 'brand-new', conditions: {}, actions: {} },
      'not an object',
    ];
    const v = version();
    const res = await api.send('POST', '/api/policies/import/preview', doc);
    expect(res.status).toBe(200);
    expect(res.json.valid).toBe(false);
    expect(res.json.summary).toEqual({ create: 1, update: 1, unchanged: 1, invalid: 3 });
    expect(res.json.items.map((i: { status: string }) => i.status)).toEqual(['unchanged', 'update', 'create', 'invalid', 'invalid', 'invalid']);
    expect(res.json.items[1].changes).toEqual({ priority: { before: 1, after: 2 } });
    expect(res.json.items[3].errors[0].loc).toEqual(['body', 3, 'actions', 'rate_limit']);
    expect(res.json.items[4].reasons[0]).toMatch(/appears earlier/);
    expect(version()).toBe(v);
  });

  it('accepts {document, format} with YAML, and raw YAML with a YAML content type', async () => {
    const yaml = 'policies:\n  - name: from-yaml\n    priority: 3\n    conditions:\n      source_ids: [crm]\n    actions:\n      effect: deny\n';
    const wrapped = await api.send('POST', '/api/policies/import/preview', { document: yaml, format: 'yaml' });
    expect(wrapped.status).toBe(200);
    expect(wrapped.json.items[0]).toMatchObject({ name: 'from-yaml', status: 'create' });
    const raw = await api.send('POST', '/api/policies/import/preview', yaml, 'application/yaml');
    expect(raw.json.items[0]).toMatchObject({ name: 'from-yaml', status: 'create' });
    const bad = await api.send('POST', '/api/policies/import/preview', { document: 'policies: [\n', format: 'yaml' });
    expect(bad.status).toBe(422);
    expect(bad.json.detail[0].loc).toEqual(['body', 'document']);
    const located = await api.send('POST', '/api/policies/import/preview', { document: JSON.stringify({ policies: [{ name: 'x', conditions: { tables: [] }, actions: {} }] }) });
    expect(located.json.items[0].errors[0].loc).toEqual(['body', 'document', 'policies', 0, 'conditions', 'tables']);
  });

  it('bounds the document: more than 1,000 policies or an alias bomb are refused', async () => {
    const many = Array.from({ length: 1001 }, (_, i) => ({ name: `p${i}`, conditions: {}, actions: {} }));
    const res = await api.send('POST', '/api/policies/import/preview', { policies: many });
    expect(res.status).toBe(422);
    expect(res.json.detail[0].loc).toEqual(['body', 'policies']);
    const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 0; i < 12; i += 1) bomb.push(`${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)}]`);
    bomb.push('policies: *m');
    const bombRes = await api.send('POST', '/api/policies/import/preview', bomb.join('\n'), 'application/yaml');
    expect(bombRes.status).toBe(422);
    expect(bombRes.json.detail[0].msg).toMatch(/alias/i);
    const tooBig = await api.send('POST', '/api/policies/import/preview', { document: 'x'.repeat(1024 * 1024 + 10) });
    expect([413, 422]).toContain(tooBig.status);
  });
});

describe('import apply', () => {
  it('is atomic: one invalid policy → 422 and nothing changes', async () => {
    const before = await api.send('GET', '/api/policies');
    const v = version();
    const res = await api.send('POST', '/api/policies/import/apply', [
      { name: 'would-be-created', conditions: {}, actions: {} },
      { name: 'change', priority: 99, conditions: {}, actions: {} },
      { name: 'invalid-one', conditions: { colour: ['red'] }, actions: {} },
    ]);
    expect(res.status).toBe(422);
    expect(res.json.detail[0].loc).toEqual(['body', 2, 'conditions']);
    expect((await api.send('GET', '/api/policies')).json).toEqual(before.json);
    expect(version()).toBe(v);
  });

  it('applies creates and updates in one version step and audits once', async () => {
    const v = version()!;
    const res = await api.send('POST', '/api/policies/import/apply', {
      policies: [
        { name: 'keep', priority: 5, conditions: { source_ids: ['crm'] }, actions: { effect: 'deny' } },
        { name: 'change', priority: 7, conditions: { tables: ['public.*'] }, actions: { rate_limit: '20/second' }, enabled: false },
        { name: 'imported-a', conditions: { operations: ['ddl'] }, actions: { effect: 'require_approval' } },
        { name: 'imported-b', priority: 4, conditions: {}, actions: { cache: false } },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ applied: true, summary: { create: 2, update: 1, unchanged: 1, invalid: 0 }, policy_version: v + 1 });
    expect(version()).toBe(v + 1);
    expect(await names()).toEqual(['change', 'imported-a', 'imported-b', 'keep']);
    const changed = (await api.send('GET', '/api/policies')).json.find((p: { name: string }) => p.name === 'change');
    expect(changed).toMatchObject({ priority: 7, enabled: false, actions: { rate_limit: '20/second' } });
    const events = audit.filter((e) => e.action === 'policy.import');
    expect(events).toHaveLength(1);
    expect(events[0]!.changes?.before).toHaveLength(1);
    expect(events[0]!.changes?.after).toHaveLength(3);
    const compiled = svc.running.services.policies.current();
    expect(compiled.policies.map((p) => p.name).sort()).toEqual(['imported-a', 'imported-b', 'keep']);

    // Applying the same document again changes nothing and keeps the version.
    const again = await api.send('POST', '/api/policies/import/apply', { policies: [{ name: 'imported-b', priority: 4, conditions: {}, actions: { cache: false } }] });
    expect(again.json.summary).toEqual({ create: 0, update: 0, unchanged: 1, invalid: 0 });
    expect(version()).toBe(v + 1);
  });

  it('the console forms take the document in policy_payload', async () => {
    const payload = JSON.stringify([{ name: 'form-imported', conditions: {}, actions: { pii_mode: 'fast' } }]);
    const preview = await api.form('/dashboard/policies/import/preview', { policy_payload: payload });
    expect(preview.json.items[0]).toMatchObject({ status: 'create' });
    const applied = await api.form('/dashboard/policies/import/apply', { policy_payload: payload });
    expect(applied.status).toBe(200);
    expect(await names()).toContain('form-imported');
    const empty = await api.form('/dashboard/policies/import/apply', { policy_payload: '' });
    expect(empty.status).toBe(422);
    expect(empty.json.detail[0].loc).toEqual(['body', 'policy_payload']);
  });
});

describe('compat preview of the earlier form fields', () => {
  it('translates cond_*/action_*/raw_* and reports changes and drops', async () => {
    const legacy = {
      name: 'legacy-1',
      priority: '12',
      action_effect: 'block',
      action_rate_limit: '50/minute',
      action_redact_columns: 'ssn, email',
      cond_source_id: 'crm,billing-*',
      cond_operation: 'select,insert',
      cond_identity_roles: 'support',
      cond_roles: 'ops',
      cond_tables: 'users, hr.salaries',
      cond_columns: '',
      raw_conditions: '{"team": "care", "flavour": "x"}',
      raw_actions: '{"pii_mode": "deep"}',
    };
    const v = version();
    const res = await api.send('POST', '/api/policies/import/compat-preview', [legacy]);
    expect(res.status).toBe(200);
    const item = res.json.items[0];
    expect(item.status).toBe('create');
    expect(item.translated).toEqual({
      name: 'legacy-1',
      priority: 12,
      conditions: { source_ids: ['crm', 'billing-*'], operations: ['read', 'write'], identity_roles: ['support', 'ops'], tables: ['*.users', 'hr.salaries'], teams: ['care'] },
      actions: { effect: 'deny', rate_limit: '50/minute', redact_columns: ['ssn', 'email'], pii_mode: 'deep' },
    });
    const notes = item.notes.map((n: { field: string; kind: string }) => `${n.kind}:${n.field}`);
    expect(notes).toEqual(expect.arrayContaining(['changed:action_effect', 'changed:cond_operation', 'mapped:cond_roles', 'changed:cond_tables', 'mapped:raw_conditions.team', 'dropped:raw_conditions.flavour']));
    expect(res.json.document.policies).toEqual([item.translated]);
    expect(version()).toBe(v);

    // The translated document imports as is.
    const preview = await api.send('POST', '/api/policies/import/preview', res.json.document);
    expect(preview.json.valid).toBe(true);
  });

  it('reports entries that cannot be translated as invalid', async () => {
    const res = await api.send('POST', '/api/policies/import/compat-preview', { document: JSON.stringify({ name: 'legacy-bad', priority: 'high', raw_actions: '[1]', action_rate_limit: 'soon' }) });
    expect(res.status).toBe(200);
    expect(res.json.items[0].status).toBe('invalid');
    expect(res.json.items[0].reasons.join(' ')).toMatch(/priority/);
    expect(res.json.items[0].reasons.join(' ')).toMatch(/raw_actions/);
    const form = await api.form('/dashboard/policies/import', { policy_payload: JSON.stringify([{ name: 'keep', cond_source_id: 'crm', action_effect: 'deny', priority: '5' }]) });
    expect(form.json.items[0]).toMatchObject({ status: 'unchanged' });
  });

  it('the policy create/update forms use the same field names and locate errors on them', async () => {
    const created = await api.form('/dashboard/policies/create', { name: 'form-made', priority: '3', action_effect: 'deny', cond_source_id: 'crm', cond_tables: 'public.users' });
    expect(created.status).toBe(201);
    expect(created.json.policy).toMatchObject({ name: 'form-made', priority: 3, conditions: { source_ids: ['crm'], tables: ['public.users'] }, actions: { effect: 'deny' } });
    const bad = await api.form('/dashboard/policies/create', { name: 'form-bad', action_rate_limit: 'often', priority: 'x' });
    expect(bad.status).toBe(422);
    expect(bad.json.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual(expect.arrayContaining([['body', 'action_rate_limit'], ['body', 'priority']]));
    const updated = await api.form(`/dashboard/policies/${created.json.policy.id}/update`, { name: 'form-made', priority: '8', action_effect: 'allow', action_rate_limit: '5/second' });
    expect(updated.status).toBe(200);
    expect(updated.json.policy).toMatchObject({ priority: 8, conditions: {}, actions: { effect: 'allow', rate_limit: '5/second' }, enabled: true });
    const dup = await api.form('/dashboard/policies/create', { name: 'form-made' });
    expect(dup.status).toBe(409);
  });
});
