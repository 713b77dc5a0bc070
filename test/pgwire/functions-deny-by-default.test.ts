// Through psql: SQL hidden in a string, files, large objects, sequences, signals and settings are refused (42501) with nothing of the protected data in the answer and the audit naming the call; a shadowing overload is caught by the source's own catalog; approval summaries carry no literal.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { notifierFor } from '../../src/notify/index.js';
import { startFakeSlack, type FakeSlack } from '../notify/fake-slack.js';
import { startWireWorld, wireAudit, type WireWorld } from './fixture.js';

const SECRET = `TOPSECRET-${randomBytes(6).toString('hex')}`;
const LEAK = `LEAKVAL-${randomBytes(6).toString('hex')}`;

let ww: WireWorld;
let slack: FakeSlack;
let agent: { id: number; key: string };
let settingsReader: { id: number; key: string };
let writer: { id: number; key: string };
let ddl: { id: number; key: string };
let dataDirectory: string;
/** A session of someone else on the source, that pg_terminate_backend would end. */
let bystander: pg.Client;

beforeAll(async () => {
  slack = await startFakeSlack();
  ww = await startWireWorld({
    setupSql: `
      create table customers (id int primary key, name text, email text, ssn text, internal_note text, secret_code text, phone text);
      insert into customers values (1, 'Ada', 'ada@example.com', '123-45-6789', 'vip', 'c0de', '555-0100');
      create table orders (id int primary key, customer_id int, total numeric);
      insert into orders values (1, 1, 10);
      create table secrets (id int, value text);
      insert into secrets values (1, '${SECRET}');
      create sequence counter_seq;
      -- An overload of a built-in name: lower(5) resolves here, not to pg_catalog.lower(text).
      create function public.lower(integer) returns text language sql as $$ select value from secrets limit 1 $$;`,
    env: {
      SERVICE_NOTIFICATIONS__ENABLED: 'true',
      SERVICE_NOTIFICATIONS__SLACK_WEBHOOK_URL_REF: 'env:TEST_SLACK_WEBHOOK',
      TEST_SLACK_WEBHOOK: `${slack.url}/services/T000/B000/hook`,
      SERVICE_NOTIFICATIONS__ALLOW_PRIVATE_EGRESS: 'true',
      SERVICE_NOTIFICATIONS__APPROVAL_EVENTS: 'pending',
    },
  });
  const role = async (role_key: string, sql: unknown[]) => {
    const r = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, { role_key, rules: { sql } });
    if (r.status !== 201) throw new Error(r.text);
  };
  await role('customers-orders', [{ operations: ['read'], tables: ['public.customers', 'public.orders'], approval: 'never' }]);
  await role('ddl-now', [{ operations: ['ddl'], tables: ['*.*'], approval: 'never' }]);
  await role('settings-reader', [{ operations: ['read'], tables: ['public.customers'], approval: 'never', functions: ['current_setting'] }]);
  agent = await ww.world.agent('fn-agent', [{ source_id: ww.sourceId, role_key: 'customers-orders' }]);
  settingsReader = await ww.world.agent('fn-settings', [{ source_id: ww.sourceId, role_key: 'settings-reader' }]);
  writer = await ww.world.agent('fn-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
  ddl = await ww.world.agent('fn-ddl', [{ source_id: ww.sourceId, role_key: 'ddl-now' }]);
  await ww.world.policy({ name: 'writes of fn-writer need approval', conditions: { identity_ids: [writer.id], operations: ['write'] }, actions: { effect: 'require_approval' } });
  dataDirectory = await ww.direct(async (c) => (await c.query<{ d: string }>('show data_directory')).rows[0]!.d);
  bystander = await (async () => {
    const { default: pgm } = await import('pg');
    const c = new pgm.Client({ connectionString: ww.upstream.url });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  })();
}, 60_000);
afterAll(async () => {
  await bystander?.end().catch(() => undefined);
  await ww?.stop();
  await slack?.close();
});

async function psql(user: string, key: string, sql: string) {
  const r = await ww.psql(user, key, ['-v', 'VERBOSITY=verbose', '-c', sql]);
  return { ...r, all: `${r.stdout}${r.stderr}` };
}

const pid = () => (bystander as unknown as { processID: number }).processID;

/** [what, statement, the call the audit must name] */
const REFUSED: ReadonlyArray<readonly [string, () => string, string]> = [
  ['ts_stat running SQL given as text', () => `select * from ts_stat('select to_tsvector(value) from secrets')`, 'ts_stat'],
  ['ts_stat, schema-qualified and dollar-quoted', () => `select * from pg_catalog.ts_stat($$select to_tsvector(value) from secrets$$)`, 'pg_catalog.ts_stat'],
  ['ts_stat in a CTE', () => `with x as (select * from ts_stat('select to_tsvector(value) from secrets')) select * from x`, 'ts_stat'],
  ['ts_stat in LATERAL', () => `select c.id, s.word from customers c, lateral ts_stat('select to_tsvector(value) from secrets') s`, 'ts_stat'],
  ['ts_stat in a scalar subquery', () => `select (select word from ts_stat('select to_tsvector(value) from secrets') limit 1) from customers`, 'ts_stat'],
  ['ts_stat quoted', () => `select * from "ts_stat"('select to_tsvector(value) from secrets')`, 'ts_stat'],
  ['ts_rewrite running SQL given as text', () => `select ts_rewrite('a'::tsquery, 'select to_tsquery(value), to_tsquery(value) from secrets')`, 'ts_rewrite'],
  ['query_to_xml', () => `select query_to_xml('select * from secrets', true, true, '')`, 'query_to_xml'],
  ['setval', () => `select setval('counter_seq', 999)`, 'setval'],
  ['pg_read_file', () => `select pg_read_file('/etc/passwd')`, 'pg_read_file'],
  ['lo_import', () => `select lo_import('/etc/hostname')`, 'lo_import'],
  ['pg_terminate_backend', () => `select pg_terminate_backend(${pid()})`, 'pg_terminate_backend'],
  ['current_setting of the data directory', () => `select current_setting('data_directory')`, 'current_setting'],
  ['pg_log_backend_memory_contexts', () => `select pg_log_backend_memory_contexts(${pid()})`, 'pg_log_backend_memory_contexts'],
  ['a user-defined overload shadowing lower (caught by the source catalog)', () => `select lower(id) from customers`, 'lower'],
  ['a user operator', () => `select 1 operator(public.===) 2 from customers`, 'public.==='],
];

describe('refused calls (psql)', () => {
  test.each(REFUSED)('%s: 42501, nothing protected in the answer, the audit names the call', async (_what, sql, call) => {
    const text = sql();
    const r = await psql('fn-agent', agent.key, text);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/ERROR:\s+42501/);
    expect(r.all).not.toContain(SECRET);
    expect(r.all).not.toContain('root:');
    expect(r.all).not.toContain(dataDirectory);
    const entries = (await wireAudit(ww)).filter((e) => e.identity_id === agent.id && e.status === 403);
    const entry = entries[entries.length - 1]!;
    expect(entry.decision).toBe('deny');
    expect((entry.reasons as string[]).join(' ')).toContain(`call of ${call} `);
  });

  test('nothing they would have done happened', async () => {
    const [{ last_value, is_called }] = (await ww.direct((c) => c.query('select last_value, is_called from counter_seq'))).rows;
    expect({ last_value, is_called }).toEqual({ last_value: '1', is_called: false });
    expect((await ww.direct((c) => c.query('select count(*)::int as n from pg_largeobject_metadata'))).rows[0].n).toBe(0);
    expect((await bystander.query('select 1 as alive')).rows).toEqual([{ alive: 1 }]);
  });

  test('DO and CALL are refused, whatever role', async () => {
    for (const sql of ['do $$ begin perform 1; end $$', 'call some_procedure()']) {
      const r = await psql('fn-writer', writer.key, sql);
      expect(r.stderr, sql).toMatch(/ERROR:\s+42501/);
    }
  });

  test('built-ins on the allowlist run; a role naming a function lets exactly that one through', async () => {
    const ok = await psql('fn-agent', agent.key, `select upper(name) as n, length(email) as l, now() is not null as t from customers where id = 1`);
    expect(ok.code, ok.all).toBe(0);
    expect(ok.stdout).toContain('ADA');
    const named = await psql('fn-settings', settingsReader.key, `select current_setting('work_mem') as w`);
    expect(named.code, named.all).toBe(0);
    const other = await psql('fn-settings', settingsReader.key, `select pg_read_file('/etc/passwd')`);
    expect(other.stderr).toMatch(/ERROR:\s+42501/);
  });
});

describe('the source catalog check', () => {
  test('a shadowing overload created through the gateway is doubted from the next statement on, though the catalog was read before', async () => {
    const before = await psql('fn-agent', agent.key, 'select length(name) as l from customers where id = 1');
    expect(before.code, before.all).toBe(0);
    const created = await psql('fn-ddl', ddl.key, 'create function public.length(integer) returns text language sql as $$ select value from secrets limit 1 $$');
    expect(created.code, created.all).toBe(0);
    const after = await psql('fn-agent', agent.key, 'select length(id) as l from customers where id = 1');
    expect(after.stderr).toMatch(/ERROR:\s+42501/);
    expect(after.all).not.toContain(SECRET);
  });
});

describe('approval summaries without data (psql)', () => {
  test.each([
    ['PREPARE', () => `prepare p1 as update customers set email = '${LEAK}' where id = 1`],
    ['EXECUTE', () => `execute p1('${LEAK}', 42)`],
    ['a data-modifying CTE', () => `with d as (update customers set internal_note = '${LEAK}' where name = '${LEAK}' returning id) select * from d`],
    ['a comment', () => `update customers set email = email where id = 1 -- ${LEAK}`],
  ])('%s: queued, and neither the approval list nor Slack shows a literal', async (_what, sql) => {
    const before = slack.requests.length;
    const r = await psql('fn-writer', writer.key, sql());
    expect(r.stderr).toMatch(/WA001/);
    const listed = await ww.world.admin('GET', '/api/approvals?status=pending');
    const mine = (listed.json as Array<{ identity_id: number; sql_text: string }>).filter((a) => a.identity_id === writer.id);
    expect(mine.length).toBeGreaterThan(0);
    for (const a of mine) expect(a.sql_text).not.toContain(LEAK);
    expect(mine.some((a) => /\$\d/.test(a.sql_text) || !a.sql_text.includes("'"))).toBe(true);
    await notifierFor(ww.world.svc.running.services).idle();
    await slack.waitFor(before + 1);
    for (const req of slack.requests) expect(req.body).not.toContain(LEAK);
    for (const e of await wireAudit(ww)) expect(String(e.sql_normalized ?? '')).not.toContain(LEAK);
  });
});
