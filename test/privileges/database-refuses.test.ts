// With the gateway's SQL analysis switched off (test-only hook), the database itself refuses every known bypass of a denied table or column: the managed role lacks the privilege. Sessions run as the managed role once, cannot leave it, and what is allowed still works.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type pg from 'pg';
import { sqlError } from '../pgwire/fixture.js';
import { startManagedWorld, waitForPrivileges, type ManagedWorld } from './fixture.js';

let mw: ManagedWorld;
let analyst: { id: number; key: string };
let c: pg.Client;

beforeAll(async () => {
  mw = await startManagedWorld({ sourceId: 'mgdbypass' });
  const role = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/roles`, {
    role_key: 'limited',
    description: 'customers and notes only',
    // The write rule names no existing table: with the analysis off a write reaches PostgreSQL, which must refuse it.
    rules: { sql: [{ operations: ['read'], tables: ['public.customers', 'public.notes', 'public.customer_names'], approval: 'never' }, { operations: ['write'], tables: ['public.archive_*'], approval: 'never' }] },
  });
  expect(role.status, role.text).toBe(201);
  analyst = await mw.world.agent('bypass-analyst', [{ source_id: mw.sourceId, role_key: 'limited' }]);
  await mw.world.policy({ name: 'no ssn for the analyst', conditions: { identity_ids: [analyst.id], columns: ['ssn'] }, actions: { effect: 'deny' } });
  await mw.direct((d) => d.query('analyze customers'));
  await waitForPrivileges(mw, (s) => s.session_roles[String(analyst.id)] === `${mw.prefix}i_${analyst.id}`, 'the analyst has its own managed role');
  c = await mw.client('bypass-analyst', analyst.key);
}, 90_000);

afterAll(async () => {
  await c?.end().catch(() => undefined);
  await mw?.stop();
});

// The hook turns off the table, column and call analysis; the statement's operation class stays (query_to_xml and
// other query-string functions are admin statements, refused by the source role before PostgreSQL sees them).
const DENIED: Array<[string, string]> = [
  ['the denied column', 'select ssn from customers'],
  ['a star', 'select * from customers'],
  ['TABLE', 'table customers'],
  ['a whole-row reference', 'select c from customers c'],
  ['row_to_json of the row', 'select row_to_json(c) from customers c'],
  ['a field of the composite', 'select (c).ssn from customers c'],
  ['a CTE', 'with x as (select ssn from customers) select * from x'],
  ['an expression over the column', "select length(ssn), upper(ssn) || '' from customers"],
  ['the column in WHERE only', "select id from customers where ssn like '1%'"],
  ['the column in ORDER BY only', 'select id from customers order by ssn'],
  ['an aggregate', 'select string_agg(ssn, \',\') from customers'],
  ['ts_stat running a query string', "select * from ts_stat('select to_tsvector(ssn) from customers')"],
  ['a table outside the rules', 'select * from secrets'],
  ['a table outside the rules through a subquery', 'select (select v from secrets limit 1)'],
  ['a write on a read-only role', "insert into notes (body) values ('x')"],
  ['a delete on a read-only role', 'delete from customers'],
];

describe('the database refuses what the gateway would, with the gateway analysis off', () => {
  test('the session runs as its managed role, set once at login', async () => {
    const r = await c.query('select current_user, session_user');
    expect(r.rows[0].current_user).toBe(`${mw.prefix}i_${analyst.id}`);
    expect(r.rows[0].session_user).toBe('postgres');
  });

  test.each(DENIED)('%s: 42501 from PostgreSQL', async (_what, sql) => {
    const e = await sqlError(c.query(sql));
    expect(e.code, e.message).toBe('42501');
    expect(e.message).toMatch(/permission denied/);
  });

  test('COPY of the table and of a query over the denied column: 42501 from PostgreSQL', async () => {
    for (const sql of ['copy customers to stdout', 'copy (select ssn from customers) to stdout', 'copy secrets to stdout']) {
      const r = await mw.psql('bypass-analyst', analyst.key, ['-v', 'ON_ERROR_STOP=1', '-c', sql]);
      expect(r.code, sql).not.toBe(0);
      expect(r.stderr, sql).toMatch(/permission denied/);
    }
    const ok = await mw.psql('bypass-analyst', analyst.key, ['-v', 'ON_ERROR_STOP=1', '-c', 'copy customers (id, name) to stdout']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('Ada');
  });

  test('statistics of the denied column stay hidden (pg_stats filters by column privilege)', async () => {
    const r = await c.query("select attname from pg_stats where tablename = 'customers' order by 1");
    expect(r.rows.map((x: { attname: string }) => x.attname)).toEqual(['email', 'id', 'name']);
  });

  test('what the rules allow still works: other columns, the view, the other table', async () => {
    expect((await c.query('select id, name, email from customers order by id')).rows).toHaveLength(2);
    expect((await c.query('select name from customer_names where id = 1')).rows[0].name).toBe('Ada');
    expect((await c.query('select count(*)::int as n from notes')).rows[0].n).toBe(0);
  });

  test('the session cannot leave its role: refused escapes, and resets put the managed role back at once', async () => {
    for (const sql of ['set role postgres', 'set session authorization postgres', "select set_config('role', 'postgres', false)"]) {
      const e = await sqlError(c.query(sql)).catch(() => ({ code: `no error for ${sql}` }));
      expect(e.code, sql).toBe('42501');
    }
    // Session resets are allowed (docs/pgwire.md "Session resets"): the relay re-applies the session's role behind them.
    for (const sql of ['reset role', 'set role none', 'discard all', 'reset all']) {
      await c.query(sql);
      expect((await c.query('select current_user')).rows[0].current_user, sql).toBe(`${mw.prefix}i_${analyst.id}`);
      expect((await sqlError(c.query('select ssn from customers'))).code, sql).toBe('42501');
    }
  });
});
