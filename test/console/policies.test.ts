// Policy pages and the spec's policy form endpoints (spec §2 "Form-built policies", "Policy import …", "Policy dry run"; §4): form-encoded bodies with the spec's defaults, pages for a browser and JSON for `Accept: application/json`, 422 at the fields with values kept, CSRF, raw JSON editing, import preview/apply/compat, the dry-run trace, and a viewer without buttons who is refused anyway.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import type { ConsoleClient} from './support/pages.js';
import { fieldError, inputValue, ownerAndViewer } from './support/pages.js';

let world: World;
let owner: ConsoleClient;
let viewer: ConsoleClient;
const BASE = '/dashboard/policies';

/** The text of a textarea named `name` (kitajs escapes `<`, `&`, quotes). */
function textareaValue(html: string, name: string): string | null {
  const m = new RegExp(`<textarea id="f-${name}" name="${name}"[^>]*>([^<]*)</textarea>`).exec(html);
  return m ? m[1]! : null;
}

const policies = async () => (await world.admin('GET', '/api/policies')).json as Array<{ id: number; name: string; priority: number; enabled: boolean; conditions: Record<string, unknown>; actions: Record<string, unknown> }>;
const byName = async (name: string) => (await policies()).find((p) => p.name === name);

beforeAll(async () => {
  world = await startWorld();
  ({ owner, viewer } = await ownerAndViewer(world, OWNER_PASSWORD));
  await world.httpSource('crm', 'http://127.0.0.1:9/');
});

afterAll(async () => {
  await world?.stop();
});

describe('POST /dashboard/policies/create and /{policy_id}/update', () => {
  it('creates with the spec defaults (priority 0, effect allow) and redirects a browser to the policy', async () => {
    const res = await owner.post(`${BASE}/create`, { name: 'defaults-only' });
    expect(res.status, res.text).toBe(303);
    const stored = await byName('defaults-only');
    expect(stored).toMatchObject({ priority: 0, enabled: true, conditions: {}, actions: { effect: 'allow' } });
    expect(res.headers.get('location')).toBe(`${BASE}/${stored!.id}`);
    const page = await owner.get(`${BASE}/${stored!.id}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    // The form-built update form comes back filled from the stored policy.
    expect(inputValue(page.text, 'name')).toBe('defaults-only');
    expect(inputValue(page.text, 'priority')).toBe('0');
  });

  it('builds conditions and actions from every spec field', async () => {
    const res = await owner.post(`${BASE}/create`, {
      name: 'all-fields',
      priority: '7',
      action_effect: 'require_approval',
      action_rate_limit: '10/minute',
      action_redact_columns: 'email, phone',
      cond_columns: 'ssn',
      cond_identity_roles: 'etl',
      cond_roles: 'nightly',
      cond_operation: 'write',
      cond_source_id: 'crm',
      cond_tables: 'public.users',
      raw_conditions: '{"teams": ["data"]}',
      raw_actions: '{"pii_mode": "fast"}',
    });
    expect(res.status, res.text).toBe(303);
    expect(await byName('all-fields')).toMatchObject({
      priority: 7,
      conditions: { source_ids: ['crm'], operations: ['write'], identity_roles: ['etl', 'nightly'], tables: ['public.users'], columns: ['ssn'], teams: ['data'] },
      actions: { effect: 'require_approval', rate_limit: '10/minute', redact_columns: ['email', 'phone'], pii_mode: 'fast' },
    });
  });

  it('answers JSON to API clients as before (Accept: application/json, or no text/html)', async () => {
    const json = await owner.post(`${BASE}/create`, { name: 'json-client', priority: '2' }, { accept: 'application/json' });
    expect(json.status).toBe(201);
    expect(json.json.policy).toMatchObject({ name: 'json-client', priority: 2 });
    const bad = await owner.post(`${BASE}/create`, { priority: 'x' }, { accept: 'application/json' });
    expect(bad.status).toBe(422);
    expect(bad.json.detail).toContainEqual(expect.objectContaining({ loc: ['body', 'priority'] }));
    expect(bad.json.detail).toContainEqual(expect.objectContaining({ loc: ['body', 'name'], type: 'missing' }));
  });

  it('re-renders the form with 422, every message at its field and the values kept', async () => {
    const res = await owner.post(`${BASE}/create`, { name: '', priority: 'high', action_rate_limit: 'often', raw_conditions: '{not json', cond_tables: 'public.kept' });
    expect(res.status).toBe(422);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(fieldError(res.text, 'name')).toBe('This field is required.');
    expect(fieldError(res.text, 'priority')).toMatch(/integer/);
    expect(fieldError(res.text, 'raw_conditions')).toMatch(/JSON/);
    expect(inputValue(res.text, 'cond_tables')).toBe('public.kept');
    expect(inputValue(res.text, 'action_rate_limit')).toBe('often');
    expect(textareaValue(res.text, 'raw_conditions')).toBe('{not json');
    expect(res.text).toContain('role="alert"');

    const rate = await owner.post(`${BASE}/create`, { name: 'bad-rate', action_rate_limit: 'often' });
    expect(rate.status).toBe(422);
    expect(fieldError(rate.text, 'action_rate_limit')).toMatch(/100\/minute/);
    const effect = await owner.post(`${BASE}/create`, { name: 'bad-effect', action_effect: 'maybe' });
    expect(effect.status).toBe(422);
    expect(fieldError(effect.text, 'action_effect')).not.toBeNull();
    expect(await byName('bad-rate')).toBeUndefined();
  });

  it('shows a duplicate name as the form message (409) with the values kept', async () => {
    const dup = await owner.post(`${BASE}/create`, { name: 'defaults-only', priority: '4' });
    expect(dup.status).toBe(409);
    expect(dup.text).toMatch(/<p class="form-error" role="alert">[^<]+<\/p>/);
    expect(inputValue(dup.text, 'priority')).toBe('4');
  });

  it('updates through the form, keeps the enabled state, and refuses bad input at the field', async () => {
    const p = (await byName('all-fields'))!;
    await world.admin('PATCH', `/api/policies/${p.id}`, { enabled: false });
    const res = await owner.post(`${BASE}/${p.id}/update`, { name: 'all-fields', priority: '9', action_effect: 'deny', cond_source_id: 'crm' });
    expect(res.status, res.text).toBe(303);
    expect(res.headers.get('location')).toBe(`${BASE}/${p.id}`);
    expect(await byName('all-fields')).toMatchObject({ priority: 9, enabled: false, conditions: { source_ids: ['crm'] }, actions: { effect: 'deny' } });
    const bad = await owner.post(`${BASE}/${p.id}/update`, { name: 'all-fields', raw_actions: '[1]' });
    expect(bad.status).toBe(422);
    expect(fieldError(bad.text, 'raw_actions')).toMatch(/JSON object/);
    expect(textareaValue(bad.text, 'raw_actions')).toBe('[1]');
    expect((await owner.post(`${BASE}/999999/update`, { name: 'x' })).status).toBe(404);
  });

  it('round-trips a stored policy through its update form unchanged', async () => {
    const id = await world.policy({ name: 'round-trip', priority: 3, conditions: { tables: ['public.users', '*.orders'], methods: ['POST'], paths: ['/v1/**'], identity_ids: [4] }, actions: { effect: 'deny', cache: false, redact_columns: ['a,b', 'c'] } });
    const before = (await byName('round-trip'))!;
    const page = await owner.get(`${BASE}/${id}`);
    const field = (n: string) => inputValue(page.text, n) ?? (textareaValue(page.text, n) ?? '').replace(/&#34;/g, '"').replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&amp;/g, '&');
    const names = ['name', 'priority', 'action_rate_limit', 'action_redact_columns', 'cond_columns', 'cond_identity_roles', 'cond_operation', 'cond_roles', 'cond_source_id', 'cond_tables', 'raw_actions', 'raw_conditions'];
    const form: Record<string, string> = { action_effect: 'deny' };
    for (const n of names) form[n] = field(n);
    const res = await owner.post(`${BASE}/${id}/update`, form);
    expect(res.status, res.text).toBe(303);
    const after = (await byName('round-trip'))!;
    expect(after.conditions).toEqual(before.conditions);
    expect(after.actions).toEqual(before.actions);
    expect(page.text).not.toContain('The form cannot keep this policy exactly');
    // Unqualified table names would be qualified by the form: the page says so and points to the JSON editor.
    const lossy = await world.policy({ name: 'unqualified', conditions: { tables: ['users'] }, actions: { effect: 'allow' } });
    const plain = await world.policy({ name: 'plain', conditions: { tables: ['public.users'] }, actions: {} });
    expect((await owner.get(`${BASE}/${plain}`)).text).not.toContain('The form cannot keep this policy exactly');
    expect((await owner.get(`${BASE}/${lossy}`)).text).toContain('The form cannot keep this policy exactly');
  });

  it('refuses a post without the CSRF token and changes nothing', async () => {
    const res = await owner.post(`${BASE}/create`, { name: 'no-csrf' }, { csrf: false });
    expect(res.status).toBe(403);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await byName('no-csrf')).toBeUndefined();
    const p = (await byName('defaults-only'))!;
    expect((await owner.post(`${BASE}/${p.id}/update`, { name: 'renamed' }, { csrf: false })).status).toBe(403);
    expect((await owner.post(`${BASE}/import/apply`, { policy_payload: '[]' }, { csrf: false })).status).toBe(403);
    expect((await owner.post(`${BASE}/dry-run`, { identity_id: '1', source_id: 'crm' }, { csrf: false })).status).toBe(403);
  });
});

describe('policy list and JSON editing', () => {
  it('lists the policies in evaluation order (priority high to low, then id)', async () => {
    const page = await owner.get(BASE);
    expect(page.status).toBe(200);
    const names = [...page.text.matchAll(/<td data-label="Name"><a href="\/dashboard\/policies\/\d+">([^<]+)<\/a>/g)].map((m) => m[1]);
    const expected = (await policies()).map((p) => p.name);
    expect(names).toEqual(expected);
    expect(names.indexOf('all-fields')).toBeLessThan(names.indexOf('defaults-only'));
  });

  it('saves JSON, shows JSON errors at the field with the text kept, and the engine\'s errors with their path', async () => {
    const p = (await byName('defaults-only'))!;
    const ok = await owner.post(`${BASE}/${p.id}/json`, { name: 'defaults-only', priority: '1', enabled: 'on', conditions: '{"operations": ["read"]}', actions: '{"effect": "deny"}' });
    expect(ok.status, ok.text).toBe(303);
    expect(await byName('defaults-only')).toMatchObject({ priority: 1, enabled: true, conditions: { operations: ['read'] }, actions: { effect: 'deny' } });

    const syntax = await owner.post(`${BASE}/${p.id}/json`, { name: 'defaults-only', conditions: '{"operations": [read]}', actions: '{}' });
    expect(syntax.status).toBe(422);
    expect(fieldError(syntax.text, 'conditions')).toMatch(/not valid JSON/);
    expect(textareaValue(syntax.text, 'conditions')).toBe('{&#34;operations&#34;: [read]}');

    const engine = await owner.post(`${BASE}/${p.id}/json`, { name: 'defaults-only', conditions: '{}', actions: '{"rate_limit": "often"}' });
    expect(engine.status).toBe(422);
    expect(fieldError(engine.text, 'actions')).toMatch(/^Actions\.rate_limit: must look like/);
    const unknown = await owner.post(`${BASE}/${p.id}/json`, { name: 'defaults-only', conditions: '{"colour": ["red"]}', actions: '{}' });
    expect(unknown.status).toBe(422);
    expect(fieldError(unknown.text, 'conditions')).not.toBeNull();
    // Nothing of the refused edits was stored.
    expect(await byName('defaults-only')).toMatchObject({ conditions: { operations: ['read'] }, actions: { effect: 'deny' } });
  });

  it('disables and deletes through forms', async () => {
    const id = await world.policy({ name: 'short-lived', conditions: {}, actions: { effect: 'allow' } });
    expect((await owner.post(`${BASE}/${id}/enabled`, { enabled: 'false' })).status).toBe(303);
    expect((await byName('short-lived'))!.enabled).toBe(false);
    const del = await owner.post(`${BASE}/${id}/delete`, {});
    expect(del.status).toBe(303);
    expect(del.headers.get('location')).toBe(BASE);
    expect(await byName('short-lived')).toBeUndefined();
    expect((await owner.get(`${BASE}/${id}`)).status).toBe(404);
  });
});

describe('import forms', () => {
  const doc = (list: unknown[]) => JSON.stringify(list);

  it('previews and applies a document as pages, and answers JSON clients with JSON', async () => {
    const payload = doc([{ name: 'imported-a', conditions: { source_ids: ['crm'] }, actions: { effect: 'deny' }, priority: 2 }]);
    const preview = await owner.post(`${BASE}/import/preview`, { policy_payload: payload });
    expect(preview.status).toBe(200);
    expect(preview.text).toContain('1 to create, 0 to update, 0 unchanged, 0 invalid.');
    expect(preview.text).toContain('<td data-label="Name">imported-a</td>');
    expect(await byName('imported-a')).toBeUndefined();
    // The document stays in the field for the next step.
    expect(textareaValue(preview.text, 'policy_payload')).toContain('imported-a');

    const applied = await owner.post(`${BASE}/import/apply`, { policy_payload: payload });
    expect(applied.status).toBe(200);
    expect(applied.text).toMatch(/Applied as policy version \d+/);
    expect(await byName('imported-a')).toMatchObject({ priority: 2, actions: { effect: 'deny' } });

    const json = await owner.post(`${BASE}/import/preview`, { policy_payload: payload }, { accept: 'application/json' });
    expect(json.json).toMatchObject({ valid: true, summary: { unchanged: 1 } });
  });

  it('refuses an invalid document with 422 at the field and lists every entry\'s problem', async () => {
    const empty = await owner.post(`${BASE}/import/apply`, { policy_payload: '' });
    expect(empty.status).toBe(422);
    expect(fieldError(empty.text, 'policy_payload')).toBe('This field is required.');
    const syntax = await owner.post(`${BASE}/import/preview`, { policy_payload: '[{' });
    expect(syntax.status).toBe(422);
    expect(fieldError(syntax.text, 'policy_payload')).toMatch(/not valid JSON/);

    const payload = doc([
      { name: 'fine-one', conditions: {}, actions: {} },
      { name: 'broken-one', conditions: {}, actions: { effect: 'sometimes' } },
    ]);
    const applied = await owner.post(`${BASE}/import/apply`, { policy_payload: payload });
    expect(applied.status).toBe(422);
    expect(fieldError(applied.text, 'policy_payload')).not.toBeNull();
    expect(applied.text).toContain('<td data-label="Name">broken-one</td>');
    expect(applied.text).toContain('1 to create, 0 to update, 0 unchanged, 1 invalid.');
    expect(textareaValue(applied.text, 'policy_payload')).toContain('broken-one');
    expect(await byName('fine-one')).toBeUndefined();
  });

  it('translates earlier form fields in the compat preview (POST /dashboard/policies/import)', async () => {
    const res = await owner.post(`${BASE}/import`, { policy_payload: doc([{ name: 'legacy', cond_source_id: 'crm', cond_tables: 'users', action_effect: 'block', priority: '5' }]) });
    expect(res.status).toBe(200);
    expect(res.text).toContain('Compat preview');
    expect(res.text).toContain('effect &#34;block&#34; is now &#34;deny&#34;');
    expect(res.text).toContain('*.users');
    expect(await byName('legacy')).toBeUndefined();
    const json = await owner.post(`${BASE}/import`, { policy_payload: doc([{ name: 'legacy', action_effect: 'block' }]) }, { accept: 'application/json' });
    expect(json.json.document.policies[0]).toMatchObject({ name: 'legacy', actions: { effect: 'deny' } });
  });
});

describe('POST /dashboard/policies/dry-run', () => {
  it('shows effect, operation, tables and the trace as a table', async () => {
    const agent = await world.agent('dry-agent', [{ source_id: 'crm', role_key: 'reader' }]);
    const res = await owner.post(`${BASE}/dry-run`, { identity_id: String(agent.id), source_id: 'crm', method: 'GET', path: '/v1/customers/1' });
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain('<dt>Effect</dt>');
    expect(res.text).toContain('<dt>Operation</dt><dd>read</dd>');
    expect(res.text).toMatch(/<td data-label="Check">Source role<\/td>/);
    expect(res.text).toMatch(/<td data-label="Check"><a href="\/dashboard\/policies\/\d+">Policy /);
    // The form keeps what was asked.
    expect(inputValue(res.text, 'path')).toBe('/v1/customers/1');

    const tables = await owner.post(`${BASE}/dry-run`, { identity_id: String(agent.id), source_id: 'crm', tables: 'public.users, public.orders' });
    expect(tables.status).toBe(200);
    expect(tables.text).toContain('<dt>Tables</dt><dd>public.users, public.orders</dd>');

    const json = await owner.post(`${BASE}/dry-run`, { identity_id: String(agent.id), source_id: 'crm' }, { accept: 'application/json' });
    expect(json.json).toMatchObject({ operation: 'read' });
    expect(Array.isArray(json.json.trace)).toBe(true);
  });

  it('answers bad input with 422 at the field, and an unknown identity as the form message', async () => {
    const bad = await owner.post(`${BASE}/dry-run`, { identity_id: 'abc', source_id: 'crm', path: '/kept' });
    expect(bad.status).toBe(422);
    expect(fieldError(bad.text, 'identity_id')).not.toBeNull();
    expect(inputValue(bad.text, 'path')).toBe('/kept');
    const half = await owner.post(`${BASE}/dry-run`, { identity_id: '1', source_id: 'crm', path: '/v1' });
    expect(half.status).toBe(422);
    expect(fieldError(half.text, 'method')).toBe('This field is required.');
    const unknown = await owner.post(`${BASE}/dry-run`, { identity_id: '999999', source_id: 'crm' });
    expect(unknown.status).toBe(404);
    expect(unknown.text).toMatch(/<p class="form-error" role="alert">Identity not found\.<\/p>/);
  });
});

describe('a viewer', () => {
  it('sees the policies, previews and dry-runs, but gets no write buttons and is refused writes', async () => {
    const list = await viewer.get(BASE);
    expect(list.status).toBe(200);
    expect(list.text).toContain('all-fields');
    expect(list.text).not.toContain('New policy');
    const p = (await byName('all-fields'))!;
    const detail = await viewer.get(`${BASE}/${p.id}`);
    expect(detail.status).toBe(200);
    expect(detail.text).not.toMatch(/Save changes|Save JSON|>Delete<|>Enable<|>Disable</);
    const importPage = await viewer.get(`${BASE}/import`);
    expect(importPage.text).toContain('Preview');
    expect(importPage.text).not.toContain('formaction="/dashboard/policies/import/apply"');
    expect((await viewer.get(`${BASE}/new`)).status).toBe(403);
    expect((await viewer.post(`${BASE}/create`, { name: 'viewer-made' })).status).toBe(403);
    expect((await viewer.post(`${BASE}/${p.id}/update`, { name: 'viewer-renamed' })).status).toBe(403);
    expect((await viewer.post(`${BASE}/${p.id}/json`, { name: 'x', conditions: '{}', actions: '{}' })).status).toBe(403);
    expect((await viewer.post(`${BASE}/${p.id}/delete`, {})).status).toBe(403);
    expect((await viewer.post(`${BASE}/import/apply`, { policy_payload: '[]' })).status).toBe(403);
    expect((await viewer.post(`${BASE}/import/preview`, { policy_payload: '[]' })).status).toBe(200);
    expect(await byName('viewer-made')).toBeUndefined();
    expect((await byName('all-fields'))!.name).toBe('all-fields');
  });
});
