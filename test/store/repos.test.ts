// Repository smoke tests on real PostgreSQL: CRUD per resource, unique/foreign-key mapping, version triggers.
import { setAdminSubject } from '../../src/store/repos/oidc-subjects.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ConflictError, InvalidReferenceError } from '../../src/store/errors.js';
import * as adminUsers from '../../src/store/repos/admin-users.js';
import * as adminTokens from '../../src/store/repos/admin-tokens.js';
import * as identities from '../../src/store/repos/identities.js';
import * as dataSources from '../../src/store/repos/data-sources.js';
import * as sourceRoles from '../../src/store/repos/source-roles.js';
import * as grants from '../../src/store/repos/grants.js';
import * as policies from '../../src/store/repos/policies.js';
import * as workers from '../../src/store/repos/workers.js';
import type { Db } from '../../src/store/repos/util.js';
import { withMigratedStore } from '../support/pg.js';
import type { MigratedStore } from '../support/pg.js';

const hex = (c: string) => c.repeat(64);

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('control-store repositories on PostgreSQL', () => {
  let fixture: MigratedStore;
  let db: Db;

  beforeAll(async () => {
    fixture = await withMigratedStore();
    db = fixture.store.db;
  });
  afterAll(async () => {
    await fixture?.cleanup();
  });

  it('admin users: create, read, update advances auth_version only on spec §5.3 fields, delete', async () => {
    const owner = await adminUsers.createAdminUser(db, { username: 'admin', password_hash: '$argon2id$x', roles: ['owner'], must_change_password: true });
    expect(owner).toMatchObject({ username: 'admin', roles: ['owner'], enabled: true, must_change_password: true, auth_version: 1, last_login_at: null });
    expect(owner.created_at).toBeInstanceOf(Date);
    expect((await adminUsers.getAdminUserByUsername(db, 'admin'))?.id).toBe(owner.id);
    expect(await adminUsers.countAdminUsers(db)).toBe(1);

    const pw = await adminUsers.updateAdminUser(db, owner.id, { password_hash: '$argon2id$y', must_change_password: false });
    expect(pw).toMatchObject({ password_hash: '$argon2id$y', must_change_password: false, auth_version: 1 });
    const same = await adminUsers.updateAdminUser(db, owner.id, { roles: ['owner'], enabled: true });
    expect(same?.auth_version).toBe(1);
    const demoted = await adminUsers.updateAdminUser(db, owner.id, { roles: ['viewer'] });
    expect(demoted?.auth_version).toBe(2);
    const sso = await setAdminSubject(db, owner.id, { issuer: 'https://idp.example', subject: 'sub-1', email: null });
    expect(sso?.auth_version).toBe(3);
    expect((await setAdminSubject(db, owner.id, { issuer: 'https://idp.example', subject: 'sub-1', email: 'a@example.com' }))?.auth_version).toBe(3);
    expect((await setAdminSubject(db, owner.id, { issuer: 'https://other.example', subject: 'sub-1', email: null }))?.auth_version).toBe(4);
    expect((await setAdminSubject(db, owner.id, null))?.auth_version).toBe(5);
    expect(await adminUsers.updateAdminUser(db, 999_999, { enabled: false })).toBeUndefined();

    const conflict = await rejection(adminUsers.createAdminUser(db, { username: 'admin' }));
    expect(conflict).toBeInstanceOf(ConflictError);
    expect(conflict).toMatchObject({ code: 'conflict', field: 'username', message: 'admin user with this username already exists' });

    const other = await adminUsers.createAdminUser(db, { username: 'ops', roles: ['admin'] });
    const renamed = await rejection(adminUsers.updateAdminUser(db, other.id, { username: 'admin' }));
    expect(renamed).toMatchObject({ code: 'conflict', field: 'username' });
    // A role outside the matrix is refused by the table itself.
    await expect(sql`update admin_users set roles = '{root}' where id = ${other.id}`.execute(db)).rejects.toMatchObject({ code: '23514' });
    expect(await adminUsers.deleteAdminUser(db, other.id)).toBe(true);
    expect(await adminUsers.deleteAdminUser(db, other.id)).toBe(false);
  });

  it('admin tokens: hash lookup, usable only unexpired for an enabled admin, cascade with the admin', async () => {
    const admin = await adminUsers.createAdminUser(db, { username: 'bot-owner', roles: ['admin'] });
    const token = await adminTokens.createAdminToken(db, { admin_user_id: admin.id, name: 'ci', token_hash: 'h1' });
    expect((await adminTokens.findUsableAdminToken(db, 'h1'))?.admin.id).toBe(admin.id);
    await adminTokens.touchAdminToken(db, token.id);
    expect((await adminTokens.getAdminTokenById(db, token.id))?.last_used_at).toBeInstanceOf(Date);

    await adminTokens.updateAdminToken(db, token.id, { expires_at: new Date(Date.now() - 1000) });
    expect(await adminTokens.findUsableAdminToken(db, 'h1')).toBeUndefined();
    await adminTokens.updateAdminToken(db, token.id, { expires_at: null });
    await adminUsers.updateAdminUser(db, admin.id, { enabled: false });
    expect(await adminTokens.findUsableAdminToken(db, 'h1')).toBeUndefined();

    expect(await rejection(adminTokens.createAdminToken(db, { admin_user_id: admin.id, name: 'dup', token_hash: 'h1' }))).toMatchObject({
      code: 'conflict',
      field: 'token_hash',
    });
    expect(await rejection(adminTokens.createAdminToken(db, { admin_user_id: 424242, name: 'x', token_hash: 'h2' }))).toBeInstanceOf(InvalidReferenceError);
    expect(await adminTokens.deleteAdminToken(db, token.id, admin.id + 1)).toBe(false);
    await adminUsers.deleteAdminUser(db, admin.id);
    expect(await adminTokens.getAdminTokenByHash(db, 'h1')).toBeUndefined();
  });

  it('identities: CRUD, digest lookups, list without secrets, unique fields mapped, auth_version advances', async () => {
    const created = await identities.createIdentity(db, {
      name: 'etl-bot',
      roles: ['reader'],
      metadata: { owner: 'data', tags: ['a', 'b'] },
      api_key_digest: hex('a'),
      pg_username: 'etl',
    });
    expect(created).toMatchObject({ name: 'etl-bot', agent_type: 'custom', enabled: true, metadata: { owner: 'data', tags: ['a', 'b'] }, auth_version: 1, grant_version: 1 });
    expect(typeof created.grant_version).toBe('number');
    expect((await identities.getIdentityByApiKeyDigest(db, hex('a')))?.id).toBe(created.id);
    expect((await identities.getIdentityByPgUsername(db, 'etl'))?.id).toBe(created.id);

    const listed = await identities.listIdentities(db);
    expect(listed).toHaveLength(1);
    expect(Object.keys(listed[0]!)).not.toContain('api_key_digest');
    expect(Object.keys(listed[0]!)).not.toContain('scram_verifier');

    const rotated = await identities.updateIdentity(db, created.id, { api_key_digest: hex('b'), metadata: { owner: 'ml' } });
    expect(rotated).toMatchObject({ api_key_digest: hex('b'), metadata: { owner: 'ml' }, auth_version: 2 });
    expect(await identities.getIdentityByApiKeyDigest(db, hex('a'))).toBeUndefined();

    expect(await rejection(identities.createIdentity(db, { name: 'etl-bot', api_key_digest: hex('c') }))).toMatchObject({ code: 'conflict', field: 'name' });
    const keyClash = await rejection(identities.createIdentity(db, { name: 'other', api_key_digest: hex('b') }));
    expect(keyClash).toMatchObject({ code: 'conflict', field: 'api_key' });
    // The conflict message never echoes the digest value.
    expect((keyClash as Error).message).not.toContain(hex('b'));
    expect(await rejection(identities.createIdentity(db, { name: 'other', pg_username: 'etl' }))).toMatchObject({ field: 'pg_username' });
    expect(await identities.deleteIdentity(db, created.id)).toBe(true);
    expect(await identities.getIdentityById(db, created.id)).toBeUndefined();
  });

  it('data sources, roles and grants: CRUD, composite role/source integrity, grant version, active roles, cascades', async () => {
    const source = await dataSources.createDataSource(db, { source_id: 'crm', name: 'CRM', source_type: 'http', connection_config: { base_url: 'https://crm.example' } });
    expect(source).toMatchObject({ source_id: 'crm', cache_strategy: 'deterministic_first', enabled: true, generation: 1, connection_config: { base_url: 'https://crm.example' } });
    expect(await dataSources.advanceSourceGeneration(db, 'crm')).toBe(2);
    expect(await rejection(dataSources.createDataSource(db, { source_id: 'crm', name: 'again', source_type: 'http' }))).toMatchObject({ code: 'conflict', field: 'source_id' });
    await expect(dataSources.createDataSource(db, { source_id: 'not/url safe', name: 'x', source_type: 'http' })).rejects.toMatchObject({ code: '23514' });
    const other = await dataSources.createDataSource(db, { source_id: 'wh', name: 'Warehouse', source_type: 'postgres' });
    expect((await dataSources.updateDataSource(db, 'wh', { enabled: false, metadata: { tier: 'gold' } }))?.metadata).toEqual({ tier: 'gold' });
    expect((await dataSources.listDataSources(db, { enabledOnly: true })).map((s) => s.source_id)).toEqual(['crm']);

    const reader = await sourceRoles.createSourceRole(db, { source_id: 'crm', role_key: 'reader', rules: [{ methods: ['GET'], paths: ['/**'], approval: 'never' }] });
    expect(reader.rules).toEqual([{ methods: ['GET'], paths: ['/**'], approval: 'never' }]);
    expect(await rejection(sourceRoles.createSourceRole(db, { source_id: 'crm', role_key: 'reader' }))).toMatchObject({ code: 'conflict', field: 'role_key' });
    expect(await rejection(sourceRoles.createSourceRole(db, { source_id: 'nope', role_key: 'reader' }))).toMatchObject({ code: 'invalid_reference', field: 'source_id' });
    const whRole = await sourceRoles.createSourceRole(db, { source_id: 'wh', role_key: 'reader' });

    const agent = await identities.createIdentity(db, { name: 'agent', api_key_digest: hex('d') });
    const admin = await adminUsers.createAdminUser(db, { username: 'granter', roles: ['admin'] });
    const v0 = (await grants.getGrantVersion(db, agent.id))!;

    const grant = await grants.createGrant(db, { identity_id: agent.id, source_id: 'crm', role_id: reader.id, granted_by: admin.id });
    expect(grant).toMatchObject({ identity_id: agent.id, source_id: 'crm', role_id: reader.id, role_key: 'reader', enabled: true, expires_at: null, granted_by: admin.id });
    const v1 = (await grants.getGrantVersion(db, agent.id))!;
    expect(v1).toBeGreaterThan(v0);
    // A role of another source cannot be granted on this one.
    expect(await rejection(grants.createGrant(db, { identity_id: agent.id, source_id: 'crm', role_id: whRole.id }))).toMatchObject({ code: 'invalid_reference', field: 'role_id' });
    expect(await rejection(grants.createGrant(db, { identity_id: agent.id, source_id: 'crm', role_id: reader.id }))).toMatchObject({ code: 'conflict', field: 'role_id' });

    expect((await grants.listActiveRoles(db, agent.id, 'crm')).map((r) => r.role_key)).toEqual(['reader']);
    await grants.updateGrant(db, grant.id, { expires_at: new Date(Date.now() - 1000) });
    expect(await grants.listActiveRoles(db, agent.id, 'crm')).toEqual([]);
    const v2 = (await grants.getGrantVersion(db, agent.id))!;
    expect(v2).toBeGreaterThan(v1);
    await grants.updateGrant(db, grant.id, { expires_at: null, enabled: false });
    expect(await grants.listActiveRoles(db, agent.id, 'crm')).toEqual([]);
    await grants.updateGrant(db, grant.id, { enabled: true });
    await sourceRoles.updateSourceRole(db, reader.id, { enabled: false });
    expect(await grants.listActiveRoles(db, agent.id, 'crm')).toEqual([]);
    const v3 = (await grants.getGrantVersion(db, agent.id))!;
    expect(v3).toBeGreaterThan(v2);
    await sourceRoles.updateSourceRole(db, reader.id, { enabled: true });
    expect((await grants.listGrantsForIdentity(db, agent.id)).map((g) => g.id)).toEqual([grant.id]);

    // Deleting the granting admin keeps the grant, without its author.
    await adminUsers.deleteAdminUser(db, admin.id);
    expect((await grants.getGrantById(db, grant.id))?.granted_by).toBeNull();
    // Deleting the source removes its roles and grants, and still advances the grant version.
    const v4 = (await grants.getGrantVersion(db, agent.id))!;
    expect(await dataSources.deleteDataSource(db, 'crm')).toBe(true);
    expect(await grants.getGrantById(db, grant.id)).toBeUndefined();
    expect(await sourceRoles.getSourceRoleById(db, reader.id)).toBeUndefined();
    expect((await grants.getGrantVersion(db, agent.id))!).toBeGreaterThan(v4);
    expect(await grants.deleteGrant(db, grant.id)).toBe(false);
    await dataSources.deleteDataSource(db, other.source_id);
  });

  it('policies: CRUD in evaluation order, unique name, policy-set version advances on change', async () => {
    const v0 = await policies.getPolicySetVersion(db);
    const low = await policies.createPolicy(db, { name: 'low', conditions: {}, actions: { effect: 'allow' } });
    const high = await policies.createPolicy(db, { name: 'high', priority: 10, conditions: { tables: ['public.*'] }, actions: { effect: 'deny' } });
    expect(await policies.getPolicySetVersion(db)).toBe(v0 + 2);
    expect((await policies.listPolicies(db)).map((p) => p.name)).toEqual(['high', 'low']);
    expect(await rejection(policies.createPolicy(db, { name: 'low', conditions: {}, actions: {} }))).toMatchObject({ code: 'conflict', field: 'name' });
    const updated = await policies.updatePolicy(db, low.id, { enabled: false, actions: { effect: 'deny' } });
    expect(updated).toMatchObject({ enabled: false, actions: { effect: 'deny' } });
    expect((await policies.listPolicies(db, { enabledOnly: true })).map((p) => p.id)).toEqual([high.id]);
    expect(await policies.deletePolicy(db, high.id)).toBe(true);
    expect(await policies.getPolicySetVersion(db)).toBe(v0 + 4);
    expect((await policies.getPolicyByName(db, 'low'))?.id).toBe(low.id);
  });

  it('workers: heartbeat upsert and staleness', async () => {
    const first = await workers.recordHeartbeat(db, 'w-1', { host: 'a' });
    const second = await workers.recordHeartbeat(db, 'w-1', { host: 'b' });
    expect(second.last_heartbeat.getTime()).toBeGreaterThanOrEqual(first.last_heartbeat.getTime());
    expect(second.metadata).toEqual({ host: 'b' });
    await sql`update workers set last_heartbeat = now() - interval '10 minutes' where worker_id = 'w-1'`.execute(db);
    await workers.recordHeartbeat(db, 'w-2');
    const listed = await workers.listWorkers(db, 60);
    expect(listed.map((w) => [w.worker_id, w.stale])).toEqual([
      ['w-1', true],
      ['w-2', false],
    ]);
    expect(await workers.deleteWorker(db, 'w-1')).toBe(true);
    expect(await workers.getWorker(db, 'w-1')).toBeUndefined();
  });
});
