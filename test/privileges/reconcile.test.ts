// Reconciliation against the real PostgreSQL: grants, deny policies and new tables reach the database's privileges; open sessions of an identity whose privileges changed are ended; drift made by hand is reported (dry run) and corrected; a source whose reconciliation fails refuses every session and /ready says why.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type pg from 'pg';
import { sqlError } from '../pgwire/fixture.js';
import { privilegeState, startManagedWorld, waitForPrivileges, type ManagedWorld } from './fixture.js';
import { sleep, waitFor } from '../support/wait.js';
import { TEST_PG_HOST, TEST_PG_PORT } from '../support/pg.js';
import { CATALOG_CHANGED_CHANNEL, type CatalogChangedMessage } from '../../src/catalog/events.js';

let mw: ManagedWorld;

beforeAll(async () => {
  // mgdbroken (fail closed) is on loopback too: listed, so that what fails it is its privilege admin.
  mw = await startManagedWorld({ sourceId: 'mgdrec', env: { SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'mgdbroken' } });
  await waitForPrivileges(mw, (s) => s.status === 'ok', 'the first reconciliation');
}, 90_000);

afterAll(async () => {
  await mw?.stop();
});

const reader = () => `${mw.prefix}r_reader`;

async function roleOf(id: number): Promise<string | undefined> {
  return (await privilegeState(mw)).session_roles[String(id)];
}

async function upstream<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  return mw.direct(async (d) => (await d.query(sql, params)).rows as T[]);
}

async function has(role: string, table: string, privilege: string, column?: string): Promise<boolean> {
  const sql = column === undefined ? 'select has_table_privilege($1, $2, $3) as ok' : 'select has_column_privilege($1, $2, $4, $3) as ok';
  const rows = await upstream<{ ok: boolean }>(sql, column === undefined ? [role, table, privilege] : [role, table, privilege, column]);
  return rows[0]!.ok;
}

async function ended(c: pg.Client): Promise<string> {
  try {
    await c.query('select 1');
  } catch (err) {
    return (err as { code?: string; message: string }).code ?? (err as Error).message;
  }
  return 'still open';
}

describe('reconciliation follows the gateway rules', () => {
  test('adding a grant gives the identity its role; removing it revokes at once and ends its open session', async () => {
    const agent = await mw.world.agent('rec-grant');
    // Without a grant the session runs as the base role (CONNECT only); the gateway refuses its statements anyway.
    expect(await roleOf(agent.id)).toBeUndefined();
    expect(await has(`${mw.prefix}base`, 'public.customers', 'select')).toBe(false);
    expect(await upstream('select 1 from pg_database where datname = current_database() and has_database_privilege($1, datname, \'connect\')', [`${mw.prefix}base`])).toHaveLength(1);

    const grant = await mw.world.admin('POST', `/api/identities/${agent.id}/grants`, { source_id: mw.sourceId, role_key: 'reader' });
    expect(grant.status, grant.text).toBeLessThan(300);
    await waitFor(async () => (await roleOf(agent.id)) === reader(), 10_000, 'the identity runs as the reader role');
    const c = await mw.client('rec-grant', agent.key);
    expect((await c.query('select current_user')).rows[0].current_user).toBe(reader());
    // Readable at the source now (the gateway's personal-data redaction still applies to the value).
    expect((await c.query('select ssn from customers order by id')).rows).toHaveLength(2);

    const removed = await mw.world.admin('DELETE', `/api/identities/${agent.id}/grants/${grant.json.id}`);
    expect(removed.status, removed.text).toBeLessThan(300);
    await waitFor(async () => (await roleOf(agent.id)) === undefined, 10_000, 'the identity lost its role');
    // The open session was running as the reader role: it is ended rather than left with privileges it lost.
    expect(await ended(c)).not.toBe('still open');
    await c.end().catch(() => undefined);
    const again = await mw.client('rec-grant', agent.key);
    expect((await sqlError(again.query('select ssn from customers'))).code).toBe('42501');
    await again.end();
  });

  test('a deny policy on a column gives the identity its own role without that column; removing the policy drops the role', async () => {
    const agent = await mw.world.agent('rec-deny', [{ source_id: mw.sourceId, role_key: 'reader' }]);
    await waitFor(async () => (await roleOf(agent.id)) === reader(), 10_000, 'reader role');
    const open = await mw.client('rec-deny', agent.key);
    const policyId = await mw.world.policy({ name: 'no email for rec-deny', conditions: { identity_ids: [agent.id], columns: ['public.customers.email'] }, actions: { effect: 'deny' } });
    const own = `${mw.prefix}i_${agent.id}`;
    await waitFor(async () => (await roleOf(agent.id)) === own, 10_000, 'its own role');
    expect(await ended(open)).not.toBe('still open');
    await open.end().catch(() => undefined);
    expect(await has(own, 'public.customers', 'select', 'email')).toBe(false);
    expect(await has(own, 'public.customers', 'select', 'name')).toBe(true);
    expect(await has(own, 'public.notes', 'select')).toBe(true);
    const c = await mw.client('rec-deny', agent.key);
    expect((await c.query('select current_user')).rows[0].current_user).toBe(own);
    expect((await sqlError(c.query('select email from customers'))).code).toBe('42501');
    expect((await c.query('select name from customers order by id')).rows[0].name).toBe('Ada');
    await c.end();

    const del = await mw.world.admin('DELETE', `/api/policies/${policyId}`);
    expect(del.status, del.text).toBeLessThan(300);
    await waitFor(async () => (await roleOf(agent.id)) === reader(), 10_000, 'back to the reader role');
    expect(await upstream('select 1 from pg_roles where rolname = $1', [own])).toHaveLength(0);
  });

  test('a table created outside the gateway is granted at the next reconciliation (dry run first shows it)', async () => {
    await mw.asAdmin((c) => c.query('create table orders (id int, total numeric)'));
    expect(await has(reader(), 'public.orders', 'select')).toBe(false);
    const plan = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/privileges/dry-run`);
    expect(plan.status, plan.text).toBe(200);
    expect(plan.json.statements).toContain(`GRANT SELECT ON TABLE "public"."orders" TO "${reader()}"`);
    expect(await has(reader(), 'public.orders', 'select')).toBe(false);
    const r = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/privileges/reconcile`);
    expect(r.status, r.text).toBe(200);
    expect(r.json.ok).toBe(true);
    expect(await has(reader(), 'public.orders', 'select')).toBe(true);
    expect(await has(`${mw.prefix}r_writer`, 'public.orders', 'insert')).toBe(true);
    expect(await has(reader(), 'public.orders', 'insert')).toBe(false);
  });

  test('a catalog scan that found changes triggers a reconciliation (the catalog hook)', async () => {
    await mw.asAdmin((c) => c.query('create table invoices (id int)'));
    expect(await has(reader(), 'public.invoices', 'select')).toBe(false);
    // What a worker announces after storing a scan (src/catalog/events.ts), on the coordination channel every process hears.
    const msg: CatalogChangedMessage = { source_id: mw.sourceId, reason: 'scanned', status: 'ok', changes: 1, version: 2 };
    await mw.world.svc.running.services.coord.publish(CATALOG_CHANGED_CHANNEL, JSON.stringify(msg));
    await waitFor(() => has(reader(), 'public.invoices', 'select'), 10_000, 'the new table granted', 50);
  });

  test('drift made by hand is reported by the dry run, then corrected and audited', async () => {
    const stray = `${mw.prefix}i_999999`;
    // Held while the drift is made and the dry run reads it: no reconciliation (a late trigger of an earlier test) can
    // correct it in between; one waiting for the lock runs after.
    const coord = mw.world.svc.running.services.coord;
    let lock: Awaited<ReturnType<typeof coord.acquireLock>> = null;
    await waitFor(async () => (lock = await coord.acquireLock(`privileges:${mw.sourceId}`, 60_000)) !== null, 10_000, 'the reconciliation lock', 50);
    await mw.direct(async (d) => {
      await d.query(`grant delete, truncate on secrets to "${reader()}"`);
      await d.query(`grant update (email) on customers to "${reader()}"`);
      await d.query(`alter role "${reader()}" login`);
      await d.query(`grant pg_read_all_data to "${reader()}"`);
      await d.query(`create role "${stray}"`);
      await d.query(`grant select on customers to "${stray}"`);
    });
    const plan = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/privileges/dry-run`);
    expect(plan.json.drift).toBeGreaterThanOrEqual(6);
    expect(plan.json.statements).toEqual(
      expect.arrayContaining([
        `ALTER ROLE "${reader()}" NOLOGIN`,
        `REVOKE "pg_read_all_data" FROM "${reader()}"`,
        `REVOKE DELETE, TRUNCATE ON TABLE "public"."secrets" FROM "${reader()}"`,
        `REVOKE UPDATE ("email") ON TABLE "public"."customers" FROM "${reader()}"`,
        `DROP ROLE "${stray}"`,
      ]),
    );
    expect(await has(reader(), 'public.secrets', 'delete')).toBe(true);
    await lock!.release();
    const r = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/privileges/reconcile`);
    expect(r.json.ok, r.text).toBe(true);
    expect(await has(reader(), 'public.secrets', 'delete')).toBe(false);
    expect(await has(reader(), 'public.secrets', 'truncate')).toBe(false);
    expect(await has(reader(), 'public.customers', 'update', 'email')).toBe(false);
    expect(await has(reader(), 'public.secrets', 'select')).toBe(true);
    const role = await upstream<{ rolcanlogin: boolean; members: number }>(
      'select rolcanlogin, (select count(*)::int from pg_auth_members m where m.member = r.oid) as members from pg_roles r where rolname = $1',
      [reader()],
    );
    expect(role[0]).toEqual({ rolcanlogin: false, members: 0 });
    expect(await upstream('select 1 from pg_roles where rolname = $1', [stray])).toHaveLength(0);
    await waitFor(() => mw.world.audits.some((e) => e.action === 'privileges.reconcile' && Number((e.details as { drift?: number })?.drift) >= 6), 5_000, 'the audit entry');
    const again = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/privileges/dry-run`);
    expect(again.json.statement_count).toBe(0);
  });
});

describe('fail closed', () => {
  test('a source whose reconciliation fails refuses sessions with 57P03 and /ready names it; it never runs as the configured user', async () => {
    const created = await mw.world.admin('POST', '/api/data-sources', {
      name: 'mgdbroken',
      source_id: 'mgdbroken',
      source_type: 'postgres',
      connection_config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: mw.upstream.name, user: 'postgres', ssl_mode: 'disable', privileges: 'managed', privilege_admin: { user: `${mw.prefix}nobody` }, managed_role_prefix: `${mw.prefix}b_` },
      create_default_roles: true,
    });
    expect(created.status, created.text).toBe(201);
    const agent = await mw.world.agent('rec-broken', [{ source_id: 'mgdbroken', role_key: 'reader' }]);
    await waitFor(() => mw.world.svc.running.services.registry.get('mgdbroken') !== undefined, 5_000, 'registry');
    const e = await sqlError(mw.client('rec-broken', agent.key, { database: 'mgdbroken' }));
    expect(e.code).toBe('57P03');
    expect(e.message).toMatch(/Managed privileges of source "mgdbroken" are not in place/);
    expect((await privilegeState(mw, 'mgdbroken')).reason).toMatch(/the privilege admin cannot connect/);
    const ready = await fetch(`${mw.world.svc.adminUrl}/ready`);
    expect(ready.status).toBe(503);
    const body = (await ready.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
    expect(body.checks.privileges!.ok).toBe(false);
    expect(body.checks.privileges!.detail).toMatch(/mgdbroken/);
    // The healthy source keeps working.
    const ok = await mw.world.agent('rec-fine', [{ source_id: mw.sourceId, role_key: 'reader' }]);
    await waitFor(async () => (await roleOf(ok.id)) === reader(), 10_000, 'reader role');
    const c = await mw.client('rec-fine', ok.key);
    expect((await c.query('select count(*)::int as n from customers')).rows[0].n).toBe(2);
    await c.end();
    // Once its cause is mended, the source is tried again on its own (backoff from 1 s, with the periodic run an
    // hour away here) and its sessions run as their managed role.
    const nobody = `${mw.prefix}nobody`;
    const failures = () => mw.world.audits.filter((x) => x.action === 'privileges.reconcile' && (x.target as { id?: string })?.id === 'mgdbroken' && x.outcome === 'failure').length;
    await sleep(2_500);
    // The retries repeat the same failure: one audit entry for it, not one per attempt.
    expect(failures()).toBe(1);
    await upstream(`create role "${nobody}" login createrole in role "${mw.adminRole}"`);
    await waitForPrivileges(mw, (s) => s.status === 'ok', 'the broken source in place after its cause was mended', { sourceId: 'mgdbroken' });
    expect((await fetch(`${mw.world.svc.adminUrl}/ready`)).status).toBe(200);
    const mended = await mw.client('rec-broken', agent.key, { database: 'mgdbroken' });
    expect((await mended.query('select current_user')).rows[0].current_user).toBe(`${mw.prefix}b_r_reader`);
    await mended.end();
    const del = await mw.world.admin('DELETE', '/api/data-sources/mgdbroken');
    expect(del.status, del.text).toBeLessThan(300);
  });
});
