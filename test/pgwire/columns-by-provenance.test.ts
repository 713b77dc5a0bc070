// Column denies and redaction follow what a statement reads, not how it names it: stars, TABLE, whole rows, subqueries, CTEs, views, functions and set operations, through psql and the MCP query tool.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { initSqlParser, SqlClassifier } from '../../src/governance/sql/index.js';
import { startWireWorld, type WireWorld } from './fixture.js';

/** Every protected value holds a token found nowhere else, so any byte of it coming back is seen, whatever the case. */
export const PROTECTED_SETUP = `
create table customers (id int primary key, name text, email text, ssn text, internal_note text, secret_code text, phone text);
insert into customers values
  (1, 'Ada', 'ada.qmailtok@example.com', '123-45-6789', 'note qnotetok ada', 'qsecrettok-ada', '+1-555-qphonetok'),
  (2, 'Bob', 'bob.qmailtok@example.com', '987-65-4321', 'note qnotetok bob', 'qsecrettok-bob', '+1-555-qphonetok');
create table orders (id int primary key, customer_id int, total numeric);
insert into orders values (10, 1, 12.50), (11, 2, 99.00);
create view customer_cards as select id, name, secret_code as code from customers;
create view customer_contacts as select id, name, email as contact from customers;
`;
export const PROTECTED_TOKENS = ['qmailtok', '45-6789', '65-4321', 'qnotetok', 'qsecrettok', 'qphonetok'];

let ww: WireWorld;
let agent: { id: number; key: string };
let mcp: Client;

/** The statement's text as audit entries hold it (the gateway's own normalization). */
function normalized(sql: string): string {
  const c = new SqlClassifier().classify(sql);
  if (!c.ok) throw new Error(c.error.message);
  return c.normalized;
}

function leaks(text: string): string[] {
  const t = text.toLowerCase();
  return PROTECTED_TOKENS.filter((k) => t.includes(k));
}

async function psql(sql: string): Promise<{ code: number; out: string }> {
  const r = await ww.psql('cols-agent', agent.key, ['-A', '-v', 'VERBOSITY=verbose', '-c', sql]);
  return { code: r.code, out: `${r.stdout}\n${r.stderr}` };
}

async function viaMcp(sql: string): Promise<{ isError: boolean; out: string; rows: unknown[][] }> {
  const r = await mcp.callTool({ name: 'query', arguments: { source_id: ww.sourceId, sql } });
  return { isError: r.isError === true, out: JSON.stringify(r), rows: ((r.structuredContent as { rows?: unknown[][] } | undefined)?.rows ?? []) };
}

async function auditFor(channel: 'pgwire' | 'mcp', sql: string): Promise<Record<string, unknown>> {
  const services = ww.world.svc.running.services;
  await new Promise((r) => setTimeout(r, 100));
  await services.audit.flush();
  const c = await ww.world.svc.database!.connect();
  try {
    const rows = (await c.query('select * from audit_entries where channel = $1 and sql_normalized = $2 order by ts desc, id desc limit 1', [channel, normalized(sql)])).rows;
    expect(rows, `audit entry for ${sql}`).toHaveLength(1);
    return rows[0] as Record<string, unknown>;
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  await initSqlParser();
  ww = await startWireWorld({ sourceId: 'colsrc', setupSql: PROTECTED_SETUP });
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'customers-orders-reader',
    rules: { sql: [{ operations: ['read'], tables: ['public.customers', 'public.orders', 'public.customer_cards', 'public.customer_contacts'] }] },
  });
  if (role.status >= 300) throw new Error(`role: ${role.status} ${role.text}`);
  agent = await ww.world.agent('cols-agent', [{ source_id: ww.sourceId, role_key: 'customers-orders-reader' }]);
  await ww.world.policy({ name: 'redact personal columns', conditions: { identity_ids: [agent.id] }, actions: { effect: 'allow', redact_columns: ['ssn', 'email', 'internal_note'] } });
  await ww.world.policy({ name: 'deny secret columns', priority: 10, conditions: { identity_ids: [agent.id], columns: ['secret_code', 'phone'] }, actions: { effect: 'deny' } });
  mcp = new Client({ name: 'cols-test', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${ww.world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
}, 90_000);
afterAll(async () => {
  await mcp?.close();
  await ww?.stop();
});

/** Statements that read a denied column in some spelling: refused with the column named. */
const REFUSED: ReadonlyArray<[string, string]> = [
  ['select * from customers', 'secret_code'],
  ['table customers', 'secret_code'],
  ['select c from customers c', 'secret_code'],
  ['select (c).secret_code from customers c', 'secret_code'],
  ['select xx.secret_code from (select * from customers) xx', 'secret_code'],
  ['with x as (select * from customers) select name from x', 'secret_code'],
  ['select row_to_json(c) from customers c', 'secret_code'],
  // A whole row holds the denied columns too: to_jsonb of it is refused rather than redacted.
  ['select to_jsonb(c) from customers c', 'secret_code'],
  ['select c::text from customers c', 'phone'],
  ['select name from customers union all select phone from customers', 'phone'],
  ['select * from customer_cards', 'secret_code'],
  ['select t.b from (select id, secret_code from customers) t(a, b)', 'secret_code'],
  ['select name from customers where secret_code like $$qsecret%$$', 'secret_code'],
  ['select (select max(phone) from customers) as p', 'phone'],
  ['select n.x from customers c, lateral (select c.secret_code as x) n', 'secret_code'],
];

/** Statements that may run, but whose result columns carry a redacted column's value: replaced whole. */
const REDACTED: readonly string[] = [
  'select id, internal_note as n from customers order by id',
  'select lower(internal_note) from customers',
  "select string_agg(internal_note, ',') from customers",
  'select upper(ssn) from customers',
  'select name || email as contact from customers',
  'select name from customers union all select email from customers',
  'with x(a) as (select ssn from customers) select a from x',
  'select (select email from customers c2 where c2.id = c.id) as e from customers c',
  "select jsonb_build_object('e', email) from customers",
  'select array_agg(ssn)::text from customers',
  'select * from (select id, email from customers) t(a, b)',
  'select contact from customer_contacts',
  'select coalesce(ssn, name)::varchar(40) as s from customers',
];

describe('a denied column is refused whatever the spelling (42501, column named)', () => {
  test.each(REFUSED)('psql: %s', async (sql, column) => {
    const r = await psql(sql);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('42501');
    expect(r.out).toContain(column);
    expect(leaks(r.out)).toEqual([]);
    const entry = await auditFor('pgwire', sql);
    expect(entry.decision).toBe('deny');
    expect((entry.reasons as string[]).join('\n')).toMatch(new RegExp(`columns denied: .*public\\.customers\\.${column}`));
  });

  test.each(REFUSED)('mcp: %s', async (sql, column) => {
    const r = await viaMcp(sql);
    expect(r.isError).toBe(true);
    expect(r.out).toContain(column);
    expect(leaks(r.out)).toEqual([]);
    const entry = await auditFor('mcp', sql);
    expect(entry.decision).toBe('deny');
    expect((entry.reasons as string[]).join('\n')).toMatch(new RegExp(`columns denied: .*public\\.customers\\.${column}`));
  });
});

describe('a redacted column is redacted wherever its value flows', () => {
  test.each(REDACTED)('psql: %s', async (sql) => {
    const r = await psql(sql);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('[REDACTED:column]');
    expect(leaks(r.out)).toEqual([]);
    const entry = await auditFor('pgwire', sql);
    expect(entry.decision).toBe('allow');
    const reasons = (entry.reasons as string[]).join('\n');
    expect(reasons).toMatch(/columns read: .*public\.customers\.(ssn|email|internal_note)/);
  });

  test.each(REDACTED)('mcp: %s', async (sql) => {
    const r = await viaMcp(sql);
    expect(r.isError, r.out).toBe(false);
    expect(r.out).toContain('[REDACTED:column]');
    expect(leaks(r.out)).toEqual([]);
    const entry = await auditFor('mcp', sql);
    expect((entry.reasons as string[]).join('\n')).toMatch(/columns read: .*public\.customers\.(ssn|email|internal_note)/);
  });
});

describe('side channels of a statement that reads a redacted column', () => {
  const CAST = 'select internal_note::int from customers';
  test('psql: an upstream error keeps its SQLSTATE but not its message, which would quote the value', async () => {
    const r = await psql(CAST);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('22P02');
    expect(r.out).toContain('withheld');
    expect(leaks(r.out)).toEqual([]);
  });

  test('mcp: the same error, the same withholding', async () => {
    const r = await viaMcp(CAST);
    expect(r.isError).toBe(true);
    expect(r.out).toContain('22P02');
    expect(leaks(r.out)).toEqual([]);
  });

  test('psql: rows fetched from a cursor are redacted: what feeds them was decided by DECLARE, not FETCH', async () => {
    const r = await psql('begin; declare cur cursor for select id, internal_note as n from customers order by id; fetch all from cur; commit');
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('[REDACTED:column]');
    expect(leaks(r.out)).toEqual([]);
  });

  test('psql: a denied column cannot be declared into a cursor either', async () => {
    const r = await psql('begin; declare cur cursor for select secret_code as s from customers; fetch all from cur; commit');
    expect(r.out).toContain('42501');
    expect(leaks(r.out)).toEqual([]);
  });
});

describe('a write cannot launder a redacted value into a column read in clear', () => {
  let writer: { id: number; key: string };
  let writerMcp: Client;
  beforeAll(async () => {
    const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
      role_key: 'customers-writer',
      rules: { sql: [{ operations: ['read', 'write'], tables: ['public.customers', 'public.orders'], approval: 'never' }, { operations: ['ddl'], tables: ['public.laundered', 'public.customers'], approval: 'never' }] },
    });
    expect(role.status, role.text).toBeLessThan(300);
    writer = await ww.world.agent('cols-writer', [{ source_id: ww.sourceId, role_key: 'customers-writer' }]);
    await ww.world.policy({ name: 'redact for writer', conditions: { identity_ids: [writer.id] }, actions: { effect: 'allow', redact_columns: ['ssn', 'email', 'internal_note'] } });
    writerMcp = new Client({ name: 'cols-writer', version: '1.0.0' });
    await writerMcp.connect(new StreamableHTTPClientTransport(new URL(`${ww.world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${writer.key}` } } }));
  });
  afterAll(async () => writerMcp?.close());

  test.each([
    "update customers set name = email where id = 1",
    'insert into orders (id, customer_id, total) select id + 100, id, length(ssn) from customers',
    "update customers set name = (select internal_note from customers c2 where c2.id = 2) where id = 1",
    'create table laundered as select id, ssn as n from customers',
  ])('psql and mcp: %s', async (sql) => {
    const r = await ww.psql('cols-writer', writer.key, ['-A', '-v', 'VERBOSITY=verbose', '-c', sql]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('42501');
    expect(r.stderr).toMatch(/cannot store it in public\.(customers\.name|orders\.total|laundered\.n)/);
    const m = await writerMcp.callTool({ name: 'query', arguments: { source_id: ww.sourceId, sql } });
    expect(m.isError).toBe(true);
    const names = await ww.direct(async (c) => (await c.query('select name from customers order by id')).rows.map((x) => x.name));
    expect(names).toEqual(['Ada', 'Bob']);
    expect(await ww.direct(async (c) => (await c.query('select count(*)::int as n from orders where id >= 100')).rows[0].n)).toBe(0);
    expect(await ww.direct(async (c) => (await c.query("select to_regclass('public.laundered') as t")).rows[0].t)).toBeNull();
  });

  test('a redacted column may be rewritten in place', async () => {
    const r = await ww.psql('cols-writer', writer.key, ['-c', 'update customers set email = lower(email) where id = 1']);
    expect(r.code, r.stderr).toBe(0);
  });
});

describe('what feeds no protected column stays in clear', () => {
  test('psql and mcp: plain, computed and joined columns of allowed data', async () => {
    const sql = 'select c.id, upper(c.name) as n, o.total from customers c join orders o on o.customer_id = c.id order by c.id';
    const r = await psql(sql);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('1|ADA|12.50');
    expect(r.out).not.toContain('REDACTED');
    const m = await viaMcp(sql);
    expect(m.rows).toEqual([['1', 'ADA', '12.50'], ['2', 'BOB', '99.00']]);
    const entry = await auditFor('pgwire', sql);
    expect((entry.tables as string[]).sort()).toEqual(['public.customers', 'public.orders']);
    const read = (entry.reasons as string[]).find((r) => r.startsWith('columns read: '))!;
    expect(read.slice('columns read: '.length).split(', ').sort()).toEqual(['public.customers.id', 'public.customers.name', 'public.orders.customer_id', 'public.orders.total']);
  });

  test('a view is resolved to the tables behind it: the audit entry names them', async () => {
    const sql = 'select id, name from customer_contacts order by id';
    const r = await psql(sql);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('1|Ada');
    const entry = await auditFor('pgwire', sql);
    expect(entry.tables).toEqual(expect.arrayContaining(['public.customer_contacts', 'public.customers']));
  });
});

describe('the source structure follows DDL through the gateway', () => {
  test('a column added upstream is seen after DDL through the gateway drops the cached structure', async () => {
    const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
      role_key: 'orders-owner',
      rules: { sql: [{ operations: ['read', 'ddl'], tables: ['public.orders'], approval: 'never' }] },
    });
    expect(role.status, role.text).toBeLessThan(300);
    const owner = await ww.world.agent('cols-owner', [{ source_id: ww.sourceId, role_key: 'orders-owner' }]);
    await ww.world.policy({ name: 'deny secret for owner', conditions: { identity_ids: [owner.id], columns: ['secret_code', 'secret2'] }, actions: { effect: 'deny' } });
    const first = await ww.psql('cols-owner', owner.key, ['-A', '-c', 'select * from orders order by id']);
    expect(first.code, first.stderr).toBe(0);
    const ddl = await ww.psql('cols-owner', owner.key, ['-c', "alter table orders add column secret2 text default 'qsecrettok-x'"]);
    expect(ddl.code, ddl.stderr).toBe(0);
    const after = await ww.psql('cols-owner', owner.key, ['-A', '-v', 'VERBOSITY=verbose', '-c', 'select * from orders order by id']);
    expect(after.code).not.toBe(0);
    expect(after.stderr).toContain('42501');
    expect(after.stderr).toContain('secret2');
    expect(leaks(after.stdout + after.stderr)).toEqual([]);
  });
});
