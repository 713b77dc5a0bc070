// Identities over the admin API against real PostgreSQL and Redis: key life cycle, key sessions, legacy rehash, validation, and no secret in any response.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticateAgent, agentAuthDeps, digestApiKey, keySessionKey, legacyDigest, type AgentAuthDeps } from '../../src/identity/index.js';
import { createCoordination } from '../../src/coord/index.js';
import { GatehouseError } from '../../src/errors/registry.js';
import { expect422, expectNoSecrets, startResourceFixture, type ResourceFixture } from './support.js';

let fx: ResourceFixture;
let deps: AgentAuthDeps;
/** Every key or secret the suite handles; none may appear in any response except where shown once. */
const secrets: string[] = [];
const SUPPLIED_KEY = 'Zq8#vN2!pLm4@Rt6$Wx9%Yb3^Kc7&Hd5*Jf1';

async function authOk(key: string) {
  return authenticateAgent(deps, `Bearer ${key}`);
}
async function expect401(key: string | undefined) {
  await expect(authenticateAgent(deps, key === undefined ? undefined : `Bearer ${key}`)).rejects.toMatchObject({ code: 'unauthenticated' });
}

beforeAll(async () => {
  fx = await startResourceFixture({ SERVICE_AUTH__LEGACY_UNPEPPERED_KEYS_ALLOWED: 'true', SERVICE_AUTH__KEY_SESSION_TTL_SECONDS: '60' });
  deps = agentAuthDeps(fx.svc.running.services);
}, 60_000);

afterAll(async () => {
  await fx?.stop();
});

describe('identity life cycle', () => {
  it('create → authenticate → rotate → old key 401 → new key works → delete → 401', async () => {
    const created = await fx.api('POST', '/api/identities', { name: 'billing-agent', generate_key: true, roles: ['billing'], team: 'finance' });
    expect(created.status, created.text).toBe(201);
    const key = created.json.api_key as string;
    expect(key).toMatch(/^gh_[A-Za-z0-9_-]{43}$/);
    expect(Object.keys(created.json).sort()).toEqual(['agent_type', 'api_key', 'created_at', 'enabled', 'id', 'mapped_pg_role', 'metadata', 'name', 'roles', 'team', 'updated_at']);
    expect(created.json).toMatchObject({ agent_type: 'custom', enabled: true, metadata: {}, mapped_pg_role: null, team: 'finance' });
    const id = created.json.id as number;

    const who = await authOk(key);
    expect(who).toMatchObject({ id, name: 'billing-agent', roles: ['billing'], team: 'finance', enabled: true });

    const got = await fx.api('GET', `/api/identities/${id}`);
    expect(got.status).toBe(200);
    expect(got.json.api_key).toBeUndefined();
    expect(got.text).not.toContain('digest');
    expect(got.text).not.toContain('SCRAM');

    const rotated = await fx.api('POST', `/api/identities/${id}/rotate-key`);
    expect(rotated.status, rotated.text).toBe(200);
    expect(Object.keys(rotated.json)).toEqual(['api_key']);
    const newKey = rotated.json.api_key as string;
    expect(newKey).not.toBe(key);
    await expect401(key);
    expect((await authOk(newKey)).id).toBe(id);

    const row = await fx.svc.running.services.db.selectFrom('identities').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(row.api_key_digest).toBe(digestApiKey(fx.svc.running.services.secrets.get('auth.api_key_pepper_ref'), newKey));
    expect(row.scram_verifier).toMatch(/^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);

    const del = await fx.api('DELETE', `/api/identities/${id}`);
    expect(del.status).toBe(200);
    await expect401(newKey);
    expect((await fx.api('GET', `/api/identities/${id}`)).status).toBe(404);
    expect((await fx.api('DELETE', `/api/identities/${id}`)).status).toBe(404);
    secrets.push(key, newKey);
  });

  it('a supplied key that meets the policy works and is not echoed back', async () => {
    const created = await fx.api('POST', '/api/identities', { name: 'supplied-key-agent', api_key: SUPPLIED_KEY });
    expect(created.status, created.text).toBe(201);
    expect(created.json.api_key).toBeUndefined();
    expect((await authOk(SUPPLIED_KEY)).name).toBe('supplied-key-agent');
    const dup = await fx.api('POST', '/api/identities', { name: 'another-agent', api_key: SUPPLIED_KEY });
    expect(dup.status).toBe(409);
    const dupName = await fx.api('POST', '/api/identities', { name: 'supplied-key-agent', generate_key: true });
    expect(dupName.status).toBe(409);
    secrets.push(SUPPLIED_KEY);
  });

  it('rejects missing, malformed and unknown bearer credentials', async () => {
    await expect(authenticateAgent(deps, undefined)).rejects.toBeInstanceOf(GatehouseError);
    await expect401(undefined);
    for (const header of ['', 'Basic abc', 'Bearer', 'Bearer  two spaces', `Bearer ${'x'.repeat(2000)}`, 'Bearer gh_unknownkeyunknownkeyunknownkey']) {
      await expect(authenticateAgent(deps, header)).rejects.toMatchObject({ code: 'unauthenticated' });
    }
  });
});

describe('key sessions', () => {
  it('serves from the coordination store, and a disable revokes the session at once', async () => {
    const created = await fx.api('POST', '/api/identities', { name: 'session-agent', generate_key: true });
    const key = created.json.api_key as string;
    secrets.push(key);
    const { coord, db, secrets: s } = fx.svc.running.services;
    const digest = digestApiKey(s.get('auth.api_key_pepper_ref'), key);
    await authOk(key);
    expect(await coord.get(keySessionKey(digest))).toContain('"session-agent"');

    // Changed behind the API's back: the session still answers, proving the request needed no database read.
    await db.updateTable('identities').set({ enabled: false }).where('id', '=', created.json.id).execute();
    expect((await authOk(key)).name).toBe('session-agent');
    await db.updateTable('identities').set({ enabled: true }).where('id', '=', created.json.id).execute();

    const off = await fx.api('PATCH', `/api/identities/${created.json.id}`, { enabled: false });
    expect(off.status, off.text).toBe(200);
    expect(off.json.enabled).toBe(false);
    await expect401(key);
    const on = await fx.api('PATCH', `/api/identities/${created.json.id}`, { enabled: true, team: 'ops' });
    expect(on.json).toMatchObject({ enabled: true, team: 'ops' });
    expect((await authOk(key)).team).toBe('ops');
  });

  it('falls back to the database when the coordination store is down', async () => {
    const created = await fx.api('POST', '/api/identities', { name: 'coord-down-agent', generate_key: true });
    const key = created.json.api_key as string;
    secrets.push(key);
    const down = createCoordination({ keyPrefix: 'ghtest:down:' });
    await down.close();
    const who = await authenticateAgent({ ...deps, coord: down }, `Bearer ${key}`);
    expect(who.name).toBe('coord-down-agent');
    await expect(authenticateAgent({ ...deps, coord: down }, 'Bearer gh_nope')).rejects.toMatchObject({ code: 'unauthenticated' });
  });
});

describe('legacy unpeppered digests', () => {
  it('are accepted while allowed, rehashed with the pepper on first use, and refused when not allowed', async () => {
    const created = await fx.api('POST', '/api/identities', { name: 'legacy-agent', generate_key: true });
    const key = created.json.api_key as string;
    secrets.push(key);
    const { db } = fx.svc.running.services;
    await db.updateTable('identities').set({ api_key_digest: null, scram_verifier: null, api_key_legacy_digest: legacyDigest(key) }).where('id', '=', created.json.id).execute();

    await expect(authenticateAgent({ ...deps, legacyAllowed: false }, `Bearer ${key}`)).rejects.toMatchObject({ code: 'unauthenticated' });
    expect((await authOk(key)).name).toBe('legacy-agent');
    const row = await db.selectFrom('identities').selectAll().where('id', '=', created.json.id).executeTakeFirstOrThrow();
    expect(row.api_key_legacy_digest).toBeNull();
    expect(row.api_key_digest).toBe(digestApiKey(fx.svc.running.services.secrets.get('auth.api_key_pepper_ref'), key));
    expect(row.scram_verifier).toMatch(/^SCRAM-SHA-256\$/);
    // Rehashed: now it works even with legacy keys turned off.
    expect((await authenticateAgent({ ...deps, legacyAllowed: false, ttlSeconds: 0 }, `Bearer ${key}`)).name).toBe('legacy-agent');
  });
});

describe('identity validation (422 with exact loc)', () => {
  it('create', async () => {
    expect422(await fx.api('POST', '/api/identities', { generate_key: true }), ['body', 'name']);
    expect422(await fx.api('POST', '/api/identities', { name: '' , generate_key: true }), ['body', 'name']);
    expect422(await fx.api('POST', '/api/identities', { name: 'x'.repeat(129), generate_key: true }), ['body', 'name']);
    expect422(await fx.api('POST', '/api/identities', { name: 'bad\nname', generate_key: true }), ['body', 'name']);
    expect422(await fx.api('POST', '/api/identities', { name: 'no-key' }), ['body', 'api_key']);
    expect422(await fx.api('POST', '/api/identities', { name: 'roles', generate_key: true, roles: ['ok', ''] }), ['body', 'roles', 1]);
    expect422(await fx.api('POST', '/api/identities', { name: 'roles', generate_key: true, roles: Array.from({ length: 65 }, (_, i) => `r${i}`) }), ['body', 'roles']);
    expect422(await fx.api('POST', '/api/identities', { name: 'roles', generate_key: true, roles: ['r'.repeat(65)] }), ['body', 'roles', 0]);
    expect422(await fx.api('POST', '/api/identities', { name: 'md', generate_key: true, metadata: { blob: 'x'.repeat(17_000) } }), ['body', 'metadata']);
    expect422(await fx.api('POST', '/api/identities', { name: 'md', generate_key: true, metadata: [1, 2] }), ['body', 'metadata']);
    expect422(await fx.api('POST', '/api/identities', { name: 'pg', generate_key: true, mapped_pg_role: 'Robert"; DROP' }), ['body', 'mapped_pg_role']);
    expect422(await fx.api('POST', '/api/identities', { name: 'pg', generate_key: true, mapped_pg_role: 'pg_read_all_data' }), ['body', 'mapped_pg_role']);
    expect422(await fx.api('POST', '/api/identities', { name: 'en', generate_key: true, enabled: 'yes' }), ['body', 'enabled']);
    expect422(await fx.api('POST', '/api/identities', { name: 'extra', generate_key: true, api_key_digest: 'ab' }), ['body', 'api_key_digest']);
  });

  it('custom keys below the policy are refused without echoing the key', async () => {
    const weak = ['short-key-1', 'a'.repeat(40), 'abcdefghijklmnopqrstuvwxyz0123456789ABCD', 'passwordpasswordpasswordpasswordpassword', 'Ab1!Ab1!Ab1!Ab1!Ab1!Ab1!Ab1!Ab1!Ab1!Ab1!', 'with space inside the key that is long enough 12345'];
    for (const key of weak) {
      const res = await fx.api('POST', '/api/identities', { name: 'weak-key-agent', api_key: key });
      expect422(res, ['body', 'api_key']);
      expect(res.text.includes(key)).toBe(false);
    }
  });

  it('update, path ids and unknown ids', async () => {
    const created = await fx.api('POST', '/api/identities', { name: 'patch-target', generate_key: true, mapped_pg_role: 'agent_reader' });
    secrets.push(created.json.api_key as string);
    const id = created.json.id as number;
    expect422(await fx.api('PATCH', `/api/identities/${id}`, { roles: ['fine', 7] }), ['body', 'roles', 1]);
    expect422(await fx.api('PATCH', `/api/identities/${id}`, { name: '' }), ['body', 'name']);
    expect422(await fx.api('PATCH', `/api/identities/${id}`, { api_key: 'x' }), ['body', 'api_key']);
    expect422(await fx.api('GET', '/api/identities/abc'), ['path', 'id']);
    expect422(await fx.api('PATCH', '/api/identities/1.5', {}), ['path', 'id']);
    expect422(await fx.api('POST', '/api/identities/x/rotate-key'), ['path', 'id']);
    expect((await fx.api('GET', '/api/identities/999999')).status).toBe(404);
    expect((await fx.api('PATCH', '/api/identities/999999', { enabled: false })).status).toBe(404);
    expect((await fx.api('POST', '/api/identities/999999/rotate-key')).status).toBe(404);
    // null clears a nullable field and leaves a required one alone.
    const cleared = await fx.api('PATCH', `/api/identities/${id}`, { mapped_pg_role: null, name: null });
    expect(cleared.json).toMatchObject({ mapped_pg_role: null, name: 'patch-target' });
  });
});

describe('admin authentication', () => {
  it('every resource route refuses an anonymous caller and changes nothing', async () => {
    const before = (await fx.api('GET', '/api/identities')).json.length;
    for (const [method, path] of [['GET', '/api/identities'], ['POST', '/api/identities'], ['GET', '/api/data-sources'], ['POST', '/api/data-sources/test'], ['GET', '/api/connectors'], ['POST', '/api/identities/1/grants']] as const) {
      const res = await fetch(fx.svc.adminUrl + path, { method, headers: { 'content-type': 'application/json' }, body: method === 'GET' ? null : JSON.stringify({ name: 'anon', generate_key: true }) });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    expect((await fx.api('GET', '/api/identities')).json.length).toBe(before);
  });
});

describe('responses', () => {
  it('list carries exactly the spec fields', async () => {
    const list = await fx.api('GET', '/api/identities');
    expect(list.status).toBe(200);
    expect(list.json.length).toBeGreaterThan(2);
    for (const item of list.json) {
      expect(Object.keys(item).sort()).toEqual(['agent_type', 'created_at', 'enabled', 'id', 'mapped_pg_role', 'metadata', 'name', 'roles', 'team', 'updated_at']);
    }
  });

  it('no key, digest or verifier appears in any response but the one that showed a generated key', async () => {
    const { db, secrets: s } = fx.svc.running.services;
    const rows = await db.selectFrom('identities').select(['api_key_digest', 'scram_verifier']).execute();
    const stored = rows.flatMap((r) => [r.api_key_digest, r.scram_verifier]).filter((v): v is string => typeof v === 'string');
    // Generated keys appear once, in their create or rotate answer; drop exactly those answers before scanning.
    const shown = fx.bodies.filter((b) => !/"api_key":"gh_/.test(b));
    expectNoSecrets(shown, [...secrets, ...stored, s.get('auth.api_key_pepper_ref')]);
    expect(fx.bodies.filter((b) => b.includes(SUPPLIED_KEY))).toEqual([]);
  });
});
