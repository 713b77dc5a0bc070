// A table of the path named `pg_…` (`public.pg_notes`) is governed as the table PostgreSQL reads, not as a pg_catalog relation: before, an unqualified `pg_notes` was taken for `pg_catalog.pg_notes`, and a role granting `pg_catalog.*` read an ungranted table through the wire and MCP.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openMcpSession, sqlError, startWireWorld, type McpSession, type WireWorld } from './fixture.js';

const NOTE = 'PGNOTE-7a1c-SECRET';
const APP = 'APPORDER-55d2-SECRET';
const SETUP = `
create table customers (id int primary key, name text);
insert into customers values (1, 'Ada');
create table pg_notes (id int, body text);
insert into pg_notes values (1, '${NOTE}');
create schema app;
create table app.pg_orders (id int, item text);
insert into app.pg_orders values (1, '${APP}');
`;

let ww: WireWorld;
let catalogReader: { id: number; key: string };
let mcp: McpSession;

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'pgnames', setupSql: SETUP });
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'customers-and-catalog',
    rules: { sql: [{ operations: ['read'], tables: ['public.customers', 'pg_catalog.*'], approval: 'never' }] },
  });
  if (role.status >= 300) throw new Error(role.text);
  catalogReader = await ww.world.agent('pgnames-catalog', [{ source_id: ww.sourceId, role_key: 'customers-and-catalog' }]);
  mcp = await openMcpSession(ww, catalogReader.key);
}, 90_000);
afterAll(async () => {
  await mcp?.close();
  await ww?.stop();
});

/** Unqualified spellings PostgreSQL resolves to public.pg_notes: case folding, quoting, Unicode escapes, comments. */
const noteName = fc.constantFrom('pg_notes', 'PG_NOTES', 'Pg_Notes', '"pg_notes"', 'U&"pg\\005fnotes"', 'U&"\\0070g_notes"', "U&\"pg!005fnotes\" UESCAPE '!'", 'pg_notes/**/');
const reading = fc.constantFrom(
  (n: string) => `select body from ${n}`,
  (n: string) => `select * from ${n}`,
  (n: string) => `table ${n}`,
  (n: string) => `select c.name, x.body from customers c join ${n} x on x.id = c.id`,
  (n: string) => `select (select body from ${n} limit 1) as b`,
  (n: string) => `with x as (select * from ${n}) select body from x`,
  (n: string) => `select name from customers union all select body from ${n}`,
  (n: string) => `select * from customers c, lateral (select body from ${n} where id = c.id) l`,
  (n: string) => `select row_to_json(x) from ${n} x`,
);

describe('an unqualified pg_… name that pg_catalog does not hold is governed in the path too', () => {
  test('wire (simple and extended) and MCP refuse every spelling with 42501, nothing of the table in the answer', async () => {
    const c = await ww.client('pgnames-catalog', catalogReader.key);
    try {
      await fc.assert(
        fc.asyncProperty(noteName, reading, async (name, make) => {
          const sql = make(name);
          const simple = await sqlError(c.query(sql));
          expect(simple.code, sql).toBe('42501');
          expect(simple.message, sql).not.toContain(NOTE);
          const extended = await sqlError(c.query({ text: `${sql} limit $1`, values: [1] }));
          expect(extended.code, sql).toBe('42501');
          const m = await mcp.query(sql);
          expect(m.isError, sql).toBe(true);
          expect(m.all, sql).toContain('forbidden');
          expect(m.all, sql).not.toContain(NOTE);
        }),
        { numRuns: 40 },
      );
    } finally {
      await c.end();
    }
  });

  test('COPY of the table (psql), and a cursor over it, are refused too', async () => {
    const r = await ww.psql('pgnames-catalog', catalogReader.key, ['-A', '-f', '-'], 'copy pg_notes to stdout;\ncopy (select body from pg_notes) to stdout;\nbegin;\ndeclare k cursor for select body from pg_notes;\nfetch all from k;\ncommit;\n');
    expect(`${r.stdout}${r.stderr}`).not.toContain(NOTE);
    expect(r.stderr.match(/No source role allows this request/g)).toHaveLength(3);
  });

  test('on a session whose path puts app first, pg_orders is app.pg_orders: refused for a role without app', async () => {
    const c = await ww.client('pgnames-catalog', catalogReader.key);
    try {
      await c.query('set search_path = app, public');
      const e = await sqlError(c.query('select item from pg_orders'));
      expect(e.code).toBe('42501');
      expect(e.message).not.toContain(APP);
    } finally {
      await c.end();
    }
  });

  test('pg_catalog relations every server has still read unqualified, and the granted table reads', async () => {
    const c = await ww.client('pgnames-catalog', catalogReader.key);
    try {
      expect((await c.query("select relname from pg_class where relname = 'customers'")).rows).toEqual([{ relname: 'customers' }]);
      expect((await c.query("select count(*)::int as n from pg_namespace n join pg_tables t on t.schemaname = n.nspname where t.tablename = 'pg_notes'")).rows).toEqual([{ n: 1 }]);
      expect((await c.query('select name from customers')).rows).toEqual([{ name: 'Ada' }]);
    } finally {
      await c.end();
    }
    const m = await mcp.query("select relname from pg_class where relname = 'customers'");
    expect(m.isError, m.all).toBe(false);
    expect(m.rows).toEqual([['customers']]);
  });
});
