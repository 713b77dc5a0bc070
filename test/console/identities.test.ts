// Identity pages and the spec's identity create form (spec §2 "Identity create (form)", §4): form-encoded bodies, defaults, a generated key shown once, 422 at the fields, CSRF, and a viewer who sees no buttons and is refused anyway.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import type { ConsoleClient} from './support/pages.js';
import { fieldError, inputValue, ownerAndViewer } from './support/pages.js';

let world: World;
let owner: ConsoleClient;
let viewer: ConsoleClient;
const BASE = '/dashboard/access-control/identities';

beforeAll(async () => {
  world = await startWorld();
  ({ owner, viewer } = await ownerAndViewer(world, OWNER_PASSWORD));
});

afterAll(async () => {
  await world?.stop();
});

const keyOf = (html: string) => /<p class="secret" id="new-key">([^<]+)<\/p>/.exec(html)?.[1] ?? null;

describe('POST /dashboard/access-control/identities/create', () => {
  it('creates with the spec defaults and shows a generated key exactly once', async () => {
    const res = await owner.post(`${BASE}/create`, { name: 'form-agent', generate_key: 'on', roles: 'etl, nightly', team: 'data' });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const key = keyOf(res.text);
    expect(key).toMatch(/.{20,}/);
    const listed = (await world.admin('GET', '/api/identities')).json.find((i: { name: string }) => i.name === 'form-agent');
    expect(listed).toMatchObject({ agent_type: 'custom', roles: ['etl', 'nightly'], team: 'data', enabled: true, mapped_pg_role: null });
    // The key authenticates (an unknown source is 404, a bad key would be 401) and is never shown again.
    expect((await world.proxy(key, 'GET', '/proxy/no-such-source/x')).status).toBe(404);
    expect((await world.proxy('not-the-key-' + randomBytes(8).toString('hex'), 'GET', '/proxy/no-such-source/x')).status).toBe(401);
    const detail = await owner.get(`${BASE}/${listed.id}`);
    expect(detail.status).toBe(200);
    expect(detail.text).not.toContain(key!);
    expect((await owner.get(BASE)).text).not.toContain(key!);
  });

  it('takes a supplied key (and pg_password equal to it) without echoing it', async () => {
    // 32 random bytes: the policy's conservative estimate refuses ≈ 2.4% of 24-byte (32-character) random keys.
    const key = randomBytes(32).toString('base64url');
    const res = await owner.post(`${BASE}/create`, { name: 'supplied-key', api_key: key, pg_password: key, agent_type: 'langchain', pg_username: 'wire_user', mapped_pg_role: 'app_ro' });
    expect(res.status, res.text).toBe(201);
    expect(res.text).not.toContain(key);
    expect(res.text).toContain('created with the key you supplied');
    expect((await world.proxy(key, 'GET', '/proxy/no-such-source/x')).status).toBe(404);
  });

  it('answers invalid forms with 422, the message at the field and the values kept (never the key)', async () => {
    const missing = await owner.post(`${BASE}/create`, { team: 'kept-team', generate_key: 'on' });
    expect(missing.status).toBe(422);
    expect(fieldError(missing.text, 'name')).toBe('This field is required.');
    expect(inputValue(missing.text, 'team')).toBe('kept-team');

    const noKey = await owner.post(`${BASE}/create`, { name: 'no-key' });
    expect(noKey.status).toBe(422);
    expect(fieldError(noKey.text, 'api_key')).toMatch(/generate_key/);

    const weak = await owner.post(`${BASE}/create`, { name: 'weak-key', api_key: 'abcdefgh12345678' });
    expect(weak.status).toBe(422);
    expect(fieldError(weak.text, 'api_key')).toMatch(/^Api_key /);
    expect(weak.text).not.toContain('abcdefgh12345678');

    const mismatch = await owner.post(`${BASE}/create`, { name: 'mismatch', api_key: randomBytes(24).toString('hex'), pg_password: 'other' });
    expect(fieldError(mismatch.text, 'pg_password')).toMatch(/^Must equal the API key/);

    const badRole = await owner.post(`${BASE}/create`, { name: 'bad-role', generate_key: 'on', roles: 'ok, <bad>' });
    expect(badRole.status).toBe(422);
    expect(fieldError(badRole.text, 'roles')).toMatch(/^Must use letters/);
    expect(inputValue(badRole.text, 'roles')).toBe('ok, &lt;bad>');

    const json = await owner.post(`${BASE}/create`, { team: 'x' }, { accept: 'application/json' });
    expect(json.status).toBe(422);
    expect(json.json.detail).toContainEqual({ loc: ['body', 'name'], msg: 'Field required', type: 'missing' });

    const dup = await owner.post(`${BASE}/create`, { name: 'form-agent', generate_key: 'on' });
    expect(dup.status).toBe(409);
    expect(dup.text).toMatch(/<p class="form-error" role="alert">[^<]*already[^<]*<\/p>/);
  });

  it('refuses a post without the CSRF token and changes nothing', async () => {
    const res = await owner.post(`${BASE}/create`, { name: 'no-csrf', generate_key: 'on' }, { csrf: false });
    expect(res.status).toBe(403);
    expect((await world.admin('GET', '/api/identities')).json.some((i: { name: string }) => i.name === 'no-csrf')).toBe(false);
  });
});

describe('identity pages', () => {
  it('edits, disables, rotates the key and manages grants through forms', async () => {
    await world.httpSource('grant-src', 'http://127.0.0.1:9/');
    const created = await owner.post(`${BASE}/create`, { name: 'life-agent', generate_key: 'on' });
    const key = keyOf(created.text)!;
    const id = (await world.admin('GET', '/api/identities')).json.find((i: { name: string }) => i.name === 'life-agent').id as number;

    const edit = await owner.post(`${BASE}/${id}/update`, { name: 'life-agent-2', agent_type: 'crew', roles: 'a,b', team: '', pg_username: '', mapped_pg_role: '' });
    expect(edit.status, edit.text).toBe(303);
    expect((await world.admin('GET', `/api/identities/${id}`)).json).toMatchObject({ name: 'life-agent-2', agent_type: 'crew', roles: ['a', 'b'] });
    const badEdit = await owner.post(`${BASE}/${id}/update`, { name: '', agent_type: 'crew' });
    expect(badEdit.status).toBe(422);
    expect(fieldError(badEdit.text, 'name')).toBe('This field is required.');

    const grant = await owner.post(`${BASE}/${id}/grants`, { source_id: 'grant-src', role_key: 'reader', expires_at: '2099-01-01T00:00:00Z' });
    expect(grant.status, grant.text).toBe(303);
    const grants = (await world.admin('GET', `/api/identities/${id}/grants`)).json;
    expect(grants).toMatchObject([{ source_id: 'grant-src', role_key: 'reader', expires_at: '2099-01-01T00:00:00.000Z' }]);
    const badGrant = await owner.post(`${BASE}/${id}/grants`, { source_id: 'grant-src', role_key: 'reader', expires_at: 'tomorrow' });
    expect(badGrant.status).toBe(422);
    expect(fieldError(badGrant.text, 'expires_at')).toMatch(/ISO 8601/);
    const page = await owner.get(`${BASE}/${id}`);
    expect(page.text).toContain('2099-01-01 00:00:00 UTC');
    expect((await owner.post(`${BASE}/${id}/grants/${grants[0].id}/revoke`, {})).status).toBe(303);
    expect((await world.admin('GET', `/api/identities/${id}/grants`)).json).toEqual([]);

    const rotated = await owner.post(`${BASE}/${id}/rotate-key`, {});
    expect(rotated.status).toBe(200);
    const newKey = keyOf(rotated.text)!;
    expect(newKey).not.toBe(key);
    expect((await world.proxy(key, 'GET', '/proxy/no-such-source/x')).status).toBe(401);
    expect((await world.proxy(newKey, 'GET', '/proxy/no-such-source/x')).status).toBe(404);

    expect((await owner.post(`${BASE}/${id}/enabled`, { enabled: 'false' })).status).toBe(303);
    expect((await world.admin('GET', `/api/identities/${id}`)).json.enabled).toBe(false);
    expect((await world.proxy(newKey, 'GET', '/proxy/no-such-source/x')).status).toBe(401);
    expect((await owner.get(`${BASE}/${id}`)).text).toContain('>Enable</button>');
    expect((await owner.get(`${BASE}/999999`)).status).toBe(404);
    expect((await owner.get(`${BASE}/abc`)).status).toBe(404);
  });

  it('shows a viewer the list without buttons and refuses its posts', async () => {
    const list = await viewer.get(BASE);
    expect(list.status).toBe(200);
    expect(list.text).toContain('form-agent');
    expect(list.text).not.toContain('New identity');
    const id = (await world.admin('GET', '/api/identities')).json[0].id as number;
    const detail = await viewer.get(`${BASE}/${id}`);
    expect(detail.text).not.toMatch(/Rotate key|Disable|Grant a role|Save changes/);
    expect((await viewer.get(`${BASE}/new`)).status).toBe(403);
    const refused = await viewer.post(`${BASE}/create`, { name: 'viewer-made', generate_key: 'on' });
    expect(refused.status).toBe(403);
    expect((await viewer.post(`${BASE}/${id}/rotate-key`, {})).status).toBe(403);
  });
});
