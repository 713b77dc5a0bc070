// Masked reads at the source against the real PostgreSQL: a policy's redacted columns are read through views in the managed role's own schema that return the mask (format-preserving by the catalog's classification, the fixed marker, or NULL by type); the role holds no privilege on those base columns, so with the gateway's analysis switched off the database itself refuses them (qualified names, ts_stat, COPY, whole-row) and answers masks through the default search_path; removing the policy drops the views; a view altered by hand is drift and is made again.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type pg from 'pg';
import { sqlError } from '../pgwire/fixture.js';
import { startManagedWorld, waitForPrivileges, type ManagedWorld } from './fixture.js';
import { waitFor } from '../support/wait.js';

let mw: ManagedWorld;
let agent: { id: number; key: string };
let policyId: number;

beforeAll(async () => {
  mw = await startManagedWorld({ sourceId: 'mgdmask', maskedReads: true });
  await waitForPrivileges(mw, (s) => s.status === 'ok', 'the first reconciliation');
  // Only public is mirrored: a table of another schema gets no view, and its redacted column no privilege.
  await mw.asAdmin((a) => a.query("create schema sales; create table sales.orders (id int, card text); insert into sales.orders values (1, '4111111111111111')"));
  for (const [path, classification] of [
    ['public.customers.email', 'email'],
    ['public.customers.ssn', 'ssn'],
  ]) {
    const r = await mw.world.admin('PUT', `/api/data-sources/${mw.sourceId}/catalog/annotations`, { path, classification });
    expect(r.status, r.text).toBeLessThan(300);
  }
  agent = await mw.world.agent('mask-agent', [{ source_id: mw.sourceId, role_key: 'reader' }]);
  policyId = await mw.world.policy({
    name: 'mask customers for mask-agent',
    conditions: { identity_ids: [agent.id] },
    actions: { effect: 'allow', redact_columns: ['public.customers.name', 'public.customers.id', 'sales.orders.card'], redact_classified: ['email', 'ssn'] },
  });
  await waitForPrivileges(mw, (s) => s.session_roles[String(agent.id)] === own(), 'the identity gets its own masked role');
}, 90_000);

afterAll(async () => {
  await mw?.stop();
});

const own = () => `${mw.prefix}i_${agent.id}`;

async function upstream<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  return mw.direct(async (d) => (await d.query(sql, params)).rows as T[]);
}

/** What the managed role itself reads, straight at the database (the gateway not involved): SET ROLE as a session does. */
async function asRole<T>(sql: string): Promise<T[]> {
  return mw.direct(async (d) => {
    await d.query(`set role "${own()}"`);
    try {
      return (await d.query(sql)).rows as T[];
    } finally {
      await d.query('reset role');
    }
  });
}

const MASKED = [
  { id: null, name: '[REDACTED:column]', email: '***@example.com', ssn: '*******6789' },
  { id: null, name: '[REDACTED:column]', email: '***@example.com', ssn: '*******4321' },
];

describe('the database returns the redacted form', () => {
  test('the role reads masks through its view (default search_path), by type and classification', async () => {
    expect(await upstream('select 1 from pg_namespace where nspname = $1', [own()])).toHaveLength(1);
    expect(await asRole('select id, name, email, ssn from customers order by ssn')).toEqual([MASKED[1], MASKED[0]]);
    // Tables without redacted columns have no view: the base table, granted as before.
    expect(await asRole('select count(*)::int as n from notes')).toEqual([{ n: 0 }]);
    expect(await upstream('select 1 from pg_class where relnamespace = $1::regnamespace and relname = $2', [own(), 'notes'])).toHaveLength(0);
  });

  test('the role holds no privilege on the masked base columns; the catalogs say so', async () => {
    const col = async (c: string) => (await upstream<{ ok: boolean }>('select has_column_privilege($1, $2, $3, $4) as ok', [own(), 'public.customers', c, 'select']))[0]!.ok;
    expect(await col('email')).toBe(false);
    expect(await col('ssn')).toBe(false);
    expect(await col('name')).toBe(false);
    expect(await col('id')).toBe(false);
    expect((await upstream<{ ok: boolean }>('select has_table_privilege($1, $2, $3) as ok', [own(), `"${own()}".customers`, 'select']))[0]!.ok).toBe(true);
    // Another schema's redacted column: no view (views mirror public only), no privilege, the rest granted.
    expect(await col('id')).toBe(false);
    const sales = async (c: string) => (await upstream<{ ok: boolean }>('select has_column_privilege($1, $2, $3, $4) as ok', [own(), 'sales.orders', c, 'select']))[0]!.ok;
    expect(await sales('card')).toBe(false);
    expect(await sales('id')).toBe(true);
    expect(await upstream('select 1 from pg_class where relnamespace = $1::regnamespace and relname = $2', [own(), 'orders'])).toHaveLength(0);
    // The reader role of everyone else is unchanged: no mask, the whole table.
    expect((await upstream<{ ok: boolean }>('select has_table_privilege($1, $2, $3) as ok', [`${mw.prefix}r_reader`, 'public.customers', 'select']))[0]!.ok).toBe(true);
  });

  test('through the gateway with its analysis off: masks via the view, 42501 for every spelling that reaches the base columns', async () => {
    const c: pg.Client = await mw.client('mask-agent', agent.key);
    try {
      expect((await c.query('select current_user')).rows[0].current_user).toBe(own());
      // Unqualified names reach the masking view (the database's masks); the gateway's own redaction of the same columns
      // still applies on top, so the agent sees the gateway's marker: two locks, one answer.
      expect((await c.query('select email, ssn from customers')).rows).toEqual([
        { email: '[REDACTED:column]', ssn: '[REDACTED:column]' },
        { email: '[REDACTED:column]', ssn: '[REDACTED:column]' },
      ]);
      expect((await c.query('select count(*)::int as n from customers')).rows).toEqual([{ n: 2 }]);
      for (const sql of [
        'select ssn from public.customers',
        'select c from public.customers c',
        "select * from ts_stat('select to_tsvector(email) from public.customers')",
        'with x as (select * from public.customers) select ssn from x',
        'select count(*) from public.customers where ssn like \'123%\'',
      ]) {
        expect((await sqlError(c.query(sql))).code, sql).toBe('42501');
      }
      expect((await sqlError(c.query('copy public.customers (ssn) to stdout'))).code).toBe('42501');
      expect((await sqlError(c.query('select card from sales.orders'))).code).toBe('42501');
      // The database allows the unredacted column (the gateway, its analysis off, redacts the whole statement's result).
      expect((await c.query('select id from sales.orders')).rows).toHaveLength(1);
    } finally {
      await c.end();
    }
  });
});

describe('reconciliation keeps the views equal to the policies', () => {
  test('a view replaced by hand is drift: reported by the dry run and made again', async () => {
    await mw.asAdmin((a) => a.query(`create or replace view "${own()}".customers with (security_barrier) as select id, name, email, ssn from public.customers`));
    const plan = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/privileges/dry-run`);
    expect(plan.status, plan.text).toBe(200);
    expect((plan.json as { summary: Record<string, number> }).summary.create_views).toBe(1);
    const r = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/privileges/reconcile`);
    expect(r.status, r.text).toBeLessThan(300);
    await waitFor(async () => (await asRole<{ ssn: string }>('select ssn from customers order by ssn limit 1'))[0]?.ssn === '*******4321', 10_000, 'the mask is back');
    expect(await asRole('select ssn from customers order by ssn')).toEqual([{ ssn: '*******4321' }, { ssn: '*******6789' }]);
  });

  test('removing the policy drops the masking schema and gives the base columns back', async () => {
    const del = await mw.world.admin('DELETE', `/api/policies/${policyId}`);
    expect(del.status, del.text).toBeLessThan(300);
    await waitForPrivileges(mw, (s) => s.session_roles[String(agent.id)] === `${mw.prefix}r_reader`, 'back to the reader role');
    expect(await upstream('select 1 from pg_namespace where nspname = $1', [own()])).toHaveLength(0);
    const c = await mw.client('mask-agent', agent.key);
    try {
      // Readable at the source again (the gateway's own personal-data redaction still applies to the values it relays).
      expect((await c.query('select ssn from public.customers order by id')).rows).toHaveLength(2);
      expect(await upstream('select 1 from pg_roles where rolname = $1', [own()])).toHaveLength(0);
    } finally {
      await c.end();
    }
  });
});
