// Data source pages and the spec's data source create and test forms (spec §2, §4): form-encoded bodies, defaults, the test result inline with nothing stored, 422 at the fields, CSRF, a viewer refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_PG_PORT } from '../support/pg.js';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { ConsoleClient, fieldError, inputValue } from './support/pages.js';

let world: World;
let owner: ConsoleClient;
let viewer: ConsoleClient;
const BASE = '/dashboard/data-sources';
const PG = { source_type: 'postgres', host: '127.0.0.1', port: String(TEST_PG_PORT), database: 'postgres', user: 'postgres', password: 'pg-secret-never-shown' };

beforeAll(async () => {
  world = await startWorld({ privateSources: ['pg-form-src'] });
  owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
  expect((await world.admin('POST', '/api/admins', { username: 'viewer2', password: 'viewer-password-0002', roles: ['viewer'], must_change_password: false })).status).toBe(201);
  viewer = await ConsoleClient.signIn(world.svc.adminUrl, 'viewer2', 'viewer-password-0002');
});

afterAll(async () => {
  await world?.stop();
});

describe('POST /dashboard/data-sources/test', () => {
  it('connects for real and shows the result inline, storing nothing', async () => {
    const ok = await owner.post(`${BASE}/test`, { ...PG, source_id: 'pg-form-src', name: 'kept name' });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.text).toMatch(/<p class="success" role="status">Connection works \(\d+ ms\)\. Nothing was stored\.<\/p>/);
    expect(inputValue(ok.text, 'name')).toBe('kept name');
    expect(ok.text).not.toContain('pg-secret-never-shown');
    // Not listed for private egress: the same target is refused, as live traffic would be.
    const refused = await owner.post(`${BASE}/test`, { ...PG });
    expect(refused.text).toMatch(/Connection failed: target address not allowed/);
    const wrongPort = await owner.post(`${BASE}/test`, { ...PG, source_id: 'pg-form-src', port: '1' });
    expect(wrongPort.text).toMatch(/Connection failed: /);
    expect((await world.admin('GET', '/api/data-sources')).json).toEqual([]);
  });

  it('answers the JSON result to a JSON caller and 422 at the fields', async () => {
    const json = await owner.post(`${BASE}/test`, { ...PG, source_id: 'pg-form-src' }, { accept: 'application/json' });
    expect(json.json).toMatchObject({ ok: true, error: null });
    const missing = await owner.post(`${BASE}/test`, { host: 'db.example' });
    expect(missing.status).toBe(422);
    expect(fieldError(missing.text, 'source_type')).toBe('This field is required.');
    expect(inputValue(missing.text, 'host')).toBe('db.example');
    const badPort = await owner.post(`${BASE}/test`, { ...PG, port: 'abc' });
    expect(badPort.status).toBe(422);
    expect(fieldError(badPort.text, 'port')).toBe('Enter a whole number.');
    const badUrl = await owner.post(`${BASE}/test`, { source_type: 'http', base_url: 'ftp://x' }, { accept: 'application/json' });
    expect(badUrl.status).toBe(422);
    expect(badUrl.json.detail[0].loc).toEqual(['body', 'base_url']);
    expect((await owner.post(`${BASE}/test`, { ...PG }, { csrf: false })).status).toBe(403);
  });
});

describe('POST /dashboard/data-sources/create', () => {
  it('creates with the spec defaults (cache strategy, port 5432) and default roles, never echoing the password', async () => {
    const res = await owner.post(`${BASE}/create`, { name: 'PG form', source_id: 'pg-form-src', source_type: 'postgres', host: '127.0.0.1', database: 'postgres', user: 'postgres', password: 'pg-secret-never-shown', create_default_roles: 'on' });
    expect(res.status, res.text).toBe(303);
    expect(res.headers.get('location')).toBe(`${BASE}/pg-form-src`);
    const stored = (await world.admin('GET', '/api/data-sources/pg-form-src')).json;
    expect(stored).toMatchObject({ name: 'PG form', source_type: 'postgres', cache_strategy: 'deterministic_first', enabled: true });
    expect(stored.connection_config.port).toBe(5432);
    const page = await owner.get(`${BASE}/pg-form-src`);
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('pg-secret-never-shown');
    for (const role of ['reader', 'writer', 'admin']) expect(page.text).toContain(`<td data-label="Role">${role}</td>`);
    const list = await owner.get(BASE);
    expect(list.text).toContain('PG form');
    expect(list.text).toContain('Test connection');
    const stillWorks = await owner.post(`${BASE}/test`, { source_type: 'postgres', source_id: 'pg-form-src' });
    expect(stillWorks.text).toContain('Connection works');
  });

  it('answers invalid forms with 422 at the fields (nested connection fields included) and keeps the values', async () => {
    const missing = await owner.post(`${BASE}/create`, { source_type: 'http', base_url: 'https://api.example.com/' });
    expect(missing.status).toBe(422);
    expect(fieldError(missing.text, 'name')).toBe('This field is required.');
    expect(inputValue(missing.text, 'base_url')).toBe('https://api.example.com/');
    const badUrl = await owner.post(`${BASE}/create`, { name: 'bad url', source_type: 'http', base_url: 'https://user:pw@api.example.com/' });
    expect(badUrl.status).toBe(422);
    expect(fieldError(badUrl.text, 'base_url')).toMatch(/^Base_url /);
    const badType = await owner.post(`${BASE}/create`, { name: 'bad type', source_type: 'ftp' });
    expect(fieldError(badType.text, 'source_type')).toMatch(/must name a connector/i);
    expect((await owner.post(`${BASE}/create`, { name: 'x', source_type: 'http', base_url: 'https://a.example/' }, { csrf: false })).status).toBe(403);
  });

  it('edits, adds a role from JSON (422 on bad JSON) and disables', async () => {
    await owner.post(`${BASE}/create`, { name: 'HTTP form', source_id: 'http-form', source_type: 'http', base_url: 'https://api.example.com/v1/' });
    const badRole = await owner.post(`${BASE}/http-form/roles`, { role_key: 'poster', rules: '{nope' });
    expect(badRole.status).toBe(422);
    expect(fieldError(badRole.text, 'rules')).toMatch(/^Is not valid JSON/);
    const role = await owner.post(`${BASE}/http-form/roles`, { role_key: 'poster', description: 'posts', rules: '{"http":[{"methods":["POST"],"paths":["/items"],"approval":"always"}]}' });
    expect(role.status, role.text).toBe(303);
    expect((await owner.get(`${BASE}/http-form`)).text).toContain('<td data-label="Role">poster</td>');
    expect((await owner.post(`${BASE}/http-form/update`, { name: 'HTTP renamed', cache_strategy: 'none' })).status).toBe(303);
    expect((await world.admin('GET', '/api/data-sources/http-form')).json).toMatchObject({ name: 'HTTP renamed', cache_strategy: 'none' });
    expect((await owner.post(`${BASE}/http-form/enabled`, { enabled: 'false' })).status).toBe(303);
    expect((await world.admin('GET', '/api/data-sources/http-form')).json.enabled).toBe(false);
    expect((await owner.get(`${BASE}/no-such`)).status).toBe(404);
  });

  it('shows a viewer the list without buttons and refuses its forms', async () => {
    const list = await viewer.get(BASE);
    expect(list.status).toBe(200);
    expect(list.text).not.toMatch(/New data source|Test connection/);
    expect((await viewer.get(`${BASE}/pg-form-src`)).text).not.toMatch(/Add role|Save changes|Disable/);
    expect((await viewer.post(`${BASE}/create`, { name: 'v', source_type: 'http', base_url: 'https://a.example/' })).status).toBe(403);
    expect((await viewer.post(`${BASE}/test`, { ...PG })).status).toBe(403);
  });
});
