// Through the MCP `query` tool: the same calls the wire refuses are refused (forbidden, 42501 on the wire) with nothing of the protected data in the answer and the audit naming the call; approval summaries carry no literal.
import { randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startMcpWorld, PG_SOURCE, type McpWorld } from './fixture.js';

const SECRET = `TOPSECRET-${randomBytes(6).toString('hex')}`;
const LEAK = `LEAKVAL-${randomBytes(6).toString('hex')}`;

let mw: McpWorld;
let agent: { id: number; key: string };
let settingsReader: { id: number; key: string };
let writer: { id: number; key: string };
let dataDirectory: string;
let bystander: pg.Client;

async function call(client: Client, sql: string): Promise<{ isError: boolean; all: string; s: Record<string, unknown> }> {
  const r = await client.callTool({ name: 'query', arguments: { source_id: PG_SOURCE, sql } });
  return { isError: r.isError === true, all: JSON.stringify(r), s: (r.structuredContent ?? {}) as Record<string, unknown> };
}

beforeAll(async () => {
  mw = await startMcpWorld();
  await mw.direct(`
    alter table customers add column internal_note text, add column secret_code text, add column phone text;
    create table orders (id int primary key, customer_id int, total numeric);
    create table secrets (id int, value text);
    insert into secrets values (1, '${SECRET}');
    create sequence counter_seq;
    create function public.lower(integer) returns text language sql as $$ select value from secrets limit 1 $$;`);
  const role = async (role_key: string, sql: unknown[]) => {
    const r = await mw.world.admin('POST', `/api/data-sources/${PG_SOURCE}/roles`, { role_key, rules: { sql } });
    if (r.status !== 201) throw new Error(r.text);
  };
  await role('customers-orders', [{ operations: ['read'], tables: ['public.customers', 'public.orders'], approval: 'never' }]);
  await role('settings-reader', [{ operations: ['read'], tables: ['public.customers'], approval: 'never', functions: ['current_setting'] }]);
  agent = await mw.world.agent('mcp-fn-agent', [{ source_id: PG_SOURCE, role_key: 'customers-orders' }]);
  settingsReader = await mw.world.agent('mcp-fn-settings', [{ source_id: PG_SOURCE, role_key: 'settings-reader' }]);
  writer = await mw.world.agent('mcp-fn-writer', [{ source_id: PG_SOURCE, role_key: 'writer' }]);
  await mw.world.policy({ name: 'writes of mcp-fn-writer need approval', conditions: { identity_ids: [writer.id], operations: ['write'] }, actions: { effect: 'require_approval' } });
  dataDirectory = (await mw.direct<{ data_directory: string }>('show data_directory'))[0]!.data_directory;
  bystander = new pg.Client({ connectionString: mw.database.url });
  bystander.on('error', () => undefined);
  await bystander.connect();
}, 60_000);
afterAll(async () => {
  await bystander?.end().catch(() => undefined);
  await mw?.stop();
});

const pid = () => (bystander as unknown as { processID: number }).processID;

const REFUSED: ReadonlyArray<readonly [string, () => string, string]> = [
  ['ts_stat running SQL given as text', () => `select * from ts_stat('select to_tsvector(value) from secrets')`, 'ts_stat'],
  ['ts_stat, schema-qualified and dollar-quoted', () => `select * from pg_catalog.ts_stat($$select to_tsvector(value) from secrets$$)`, 'pg_catalog.ts_stat'],
  ['ts_stat in a CTE', () => `with x as (select * from ts_stat('select to_tsvector(value) from secrets')) select * from x`, 'ts_stat'],
  ['ts_stat in LATERAL', () => `select c.id, s.word from customers c, lateral ts_stat('select to_tsvector(value) from secrets') s`, 'ts_stat'],
  ['ts_rewrite running SQL given as text', () => `select ts_rewrite('a'::tsquery, 'select to_tsquery(value), to_tsquery(value) from secrets')`, 'ts_rewrite'],
  ['query_to_xml', () => `select query_to_xml('select * from secrets', true, true, '')`, 'query_to_xml'],
  ['setval', () => `select setval('counter_seq', 999)`, 'setval'],
  ['pg_read_file', () => `select pg_read_file('/etc/passwd')`, 'pg_read_file'],
  ['lo_import', () => `select lo_import('/etc/hostname')`, 'lo_import'],
  ['pg_terminate_backend', () => `select pg_terminate_backend(${pid()})`, 'pg_terminate_backend'],
  ['current_setting of the data directory', () => `select current_setting('data_directory')`, 'current_setting'],
  ['pg_log_backend_memory_contexts', () => `select pg_log_backend_memory_contexts(${pid()})`, 'pg_log_backend_memory_contexts'],
  ['a user-defined overload shadowing lower (caught by the source catalog)', () => `select lower(id) from customers`, 'lower'],
  ['a cast to a type of the source', () => `select null::secrets from customers`, 'secrets'],
];

describe('refused calls (MCP query)', () => {
  test.each(REFUSED)('%s: forbidden, nothing protected in the answer, the audit names the call', async (_what, sql, name) => {
    const client = await mw.connect(agent.key);
    const r = await call(client, sql());
    expect(r.isError).toBe(true);
    expect(r.s.error).toBe('forbidden');
    expect(r.all).not.toContain(SECRET);
    expect(r.all).not.toContain('root:');
    expect(r.all).not.toContain(dataDirectory);
    const entries = await mw.audit('identity_id = $1 and status = 403', [agent.id]);
    const entry = entries[entries.length - 1]!;
    expect(entry.decision).toBe('deny');
    expect((entry.reasons as string[]).join(' ')).toContain(`call of ${name} `);
  });

  test('nothing they would have done happened', async () => {
    const [seq] = await mw.direct<{ last_value: string; is_called: boolean }>('select last_value, is_called from counter_seq');
    expect(seq).toEqual({ last_value: '1', is_called: false });
    expect((await mw.direct<{ n: number }>('select count(*)::int as n from pg_largeobject_metadata'))[0]!.n).toBe(0);
    expect((await bystander.query('select 1 as alive')).rows).toEqual([{ alive: 1 }]);
  });

  test('DO and CALL are refused, whatever role', async () => {
    const client = await mw.connect(writer.key);
    for (const sql of ['do $$ begin perform 1; end $$', 'call some_procedure()']) {
      const r = await call(client, sql);
      expect(r.isError, sql).toBe(true);
      expect(r.s.error, sql).toBe('forbidden');
    }
  });

  test('built-ins on the allowlist run; a role naming a function lets exactly that one through', async () => {
    const ok = await call(await mw.connect(agent.key), 'select upper(name) as n, length(email) as l from customers where id = 1');
    expect(ok.isError, ok.all).toBe(false);
    expect(ok.all).toContain('ADA');
    const settings = await mw.connect(settingsReader.key);
    expect((await call(settings, `select current_setting('work_mem') as w`)).isError).toBe(false);
    expect((await call(settings, `select pg_read_file('/etc/passwd')`)).isError).toBe(true);
  });
});

describe('approval summaries without data (MCP query)', () => {
  test.each([
    ['PREPARE', () => `prepare p1 as update customers set email = '${LEAK}' where id = 1`],
    ['EXECUTE', () => `execute p1('${LEAK}', 42)`],
    ['a data-modifying CTE', () => `with d as (update customers set internal_note = '${LEAK}' where name = '${LEAK}' returning id) select * from d`],
  ])('%s: queued, and the approval list shows no literal', async (_what, sql) => {
    const r = await call(await mw.connect(writer.key), sql());
    expect(r.s).toMatchObject({ error: 'approval_required', approval_state: 'pending' });
    const listed = await mw.world.admin('GET', '/api/approvals?status=pending');
    const mine = (listed.json as Array<{ identity_id: number; sql_text: string }>).filter((a) => a.identity_id === writer.id);
    expect(mine.length).toBeGreaterThan(0);
    for (const a of mine) expect(a.sql_text).not.toContain(LEAK);
    for (const e of await mw.audit()) expect(String(e.sql_normalized ?? '')).not.toContain(LEAK);
  });
});
