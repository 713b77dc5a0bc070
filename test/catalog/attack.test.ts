// An attacker's review of classification → redaction: every spelling that reads a classified column (views, whole rows, JSON and XML functions, COPY, expressions, CTEs, subqueries, UNION, LATERAL, set-returning functions, partitions) comes back redacted or refused, through psql and the MCP query tool.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startWireWorld, type WireWorld } from '../pgwire/fixture.js';

const SECRET = 'qmemotok';
const SETUP = `
create schema crm;
create table crm.accounts (id int primary key, label text, memo text);
insert into crm.accounts values (1, 'acct-one', 'memo ${SECRET} one');
create view crm.memo_view as select id, memo as m from crm.accounts;
create view crm.row_view as select a.* from crm.accounts a;
create table crm.events (id int, at date not null, memo text) partition by range (at);
create table crm.events_2024 partition of crm.events for values from ('2024-01-01') to ('2025-01-01');
insert into crm.events values (1, '2024-05-01', 'event ${SECRET} two');
create table crm.parent (id int, memo text);
create table crm.child () inherits (crm.parent);
insert into crm.child values (1, 'child ${SECRET} three');
`;

let ww: WireWorld;
let agent: { id: number; key: string };
let mcp: Client;

const admin = (method: string, path: string, body?: unknown) => ww.world.admin(method, path, body);

/** The spellings: each reads a classified value (crm.accounts.memo, crm.events.memo, crm.parent.memo) some other way. */
export const SPELLINGS: readonly string[] = [
  'select memo from crm.accounts',
  'select * from crm.accounts',
  'table crm.accounts',
  'select a from crm.accounts a',
  'select a.* from crm.accounts a',
  'select (a).* from crm.accounts a',
  'select (a).memo from crm.accounts a',
  'select a::text from crm.accounts a',
  'select row(a.*)::text from crm.accounts a',
  'select row_to_json(a) from crm.accounts a',
  'select to_jsonb(a) from crm.accounts a',
  'select json_agg(a) from crm.accounts a',
  "select jsonb_build_object('m', memo) from crm.accounts",
  'select (jsonb_each_text(to_jsonb(a))).value from crm.accounts a',
  'select j.value from crm.accounts a, jsonb_each_text(to_jsonb(a)) j',
  'select array_agg(memo) from crm.accounts',
  "select string_agg(memo, ',') from crm.accounts",
  'select array(select memo from crm.accounts)',
  'select upper(memo) from crm.accounts',
  "select memo || '' from crm.accounts",
  'select substr(memo, 1, 100) from crm.accounts',
  "select format('%s', memo) from crm.accounts",
  'select concat(label, memo) from crm.accounts',
  'select pg_catalog.lower(memo) from crm.accounts',
  'select xmlforest(memo) from crm.accounts',
  "select query_to_xml('select memo from crm.accounts', true, false, '')",
  "select table_to_xml('crm.accounts', true, false, '')",
  "select schema_to_xml('crm', true, false, '')",
  'with x as (select memo from crm.accounts) select * from x',
  'with recursive x(m) as (select memo from crm.accounts) select m from x',
  'select (select memo from crm.accounts limit 1)',
  'select * from (select memo as m from crm.accounts) s',
  'select label from crm.accounts union all select memo from crm.accounts',
  'select label from crm.accounts except select memo from crm.accounts',
  'select x.* from crm.accounts a, lateral (select a.memo) x',
  'select x.* from crm.accounts a cross join lateral (values (a.memo)) x(v)',
  'select unnest(array[memo]) from crm.accounts',
  "select regexp_split_to_table(memo, ' ') from crm.accounts",
  'select * from unnest((select array_agg(memo) from crm.accounts))',
  'values ((select memo from crm.accounts))',
  'select m from crm.memo_view',
  'select * from crm.row_view',
  'select v from crm.row_view v',
  'select memo from only crm.accounts',
  'select memo from crm.events',
  'select memo from crm.events_2024',
  'select * from crm.events_2024',
  'select memo from crm.child',
  'select * from crm.parent',
  'select memo from crm.accounts for update',
  'select distinct on (memo) memo from crm.accounts',
  'select memo from crm.accounts order by 1',
  'select case when true then memo end from crm.accounts',
  'select coalesce(null, memo) from crm.accounts',
  'select (memo) from crm.accounts',
  'select "memo" from "crm"."accounts"',
  'select CRM.ACCOUNTS.MEMO from CRM.ACCOUNTS',
];

/** Spellings whose output is a transformation of the value (reversed, encoded, hashed, one character): nothing of it may come back but a redaction marker. */
export const DERIVED: readonly string[] = [
  'select reverse(memo) from crm.accounts',
  "select encode(convert_to(memo, 'UTF8'), 'base64') from crm.accounts",
  "select encode(memo::bytea, 'hex') from crm.accounts",
  "select convert_to(memo, 'UTF8') from crm.accounts",
  'select md5(memo) from crm.accounts',
  'select ascii(substr(memo, 6, 1)) from crm.accounts',
  'select length(memo) from crm.accounts',
  "select translate(memo, 'abcdefghijklmnopqrstuvwxyz', 'bcdefghijklmnopqrstuvwxyza') from crm.accounts",
  'select first_value(reverse(memo)) over () from crm.accounts',
  'select lag(reverse(memo)) over (order by id desc) from crm.accounts',
  "select string_agg(reverse(memo), '') filter (where true) from crm.accounts",
  "select jsonb_path_query(to_jsonb(a), '$.memo') from crm.accounts a",
  "select reverse(to_jsonb(a)->>'memo') from crm.accounts a",
  'select reverse(x.memo) from jsonb_to_record((select to_jsonb(a) from crm.accounts a)) as x(memo text)',
  'select reverse((json_populate_record(null::crm.accounts, (select row_to_json(a) from crm.accounts a))).memo)',
  'select reverse(p.memo) from json_populate_record(null::crm.accounts, (select row_to_json(a) from crm.accounts a)) p',
  "select reverse(u) from crm.accounts a, unnest(string_to_array(a.memo, ' ')) with ordinality as t(u, n)",
  "select reverse(x) from rows from (regexp_split_to_table((select memo from crm.accounts), ' ')) as r(x)",
  "select xmlagg(xmlelement(name x, reverse(memo))) from crm.accounts",
  "select reverse(string_to_array(memo, ' ')::text) from crm.accounts",
  'select reverse(memo collate "C") from crm.accounts',
  'select reverse(b.memo) from crm.accounts a natural join crm.accounts b',
  'select reverse(m) from crm.memo_view',
  'select reverse(memo) from crm.events_2024',
  'select reverse(memo) from crm.child',
  "select reverse(memo) from crm.accounts where memo like '%'",
  'select reverse(v.memo) from crm.row_view v',
];

/** What is left of an output once redaction markers, NULLs and punctuation are taken out: must be nothing. */
function residue(out: string): string {
  return out.replace(/\[REDACTED:[a-z_]+\]/g, '').replace(/[\s"'{}(),<>/=\\[\]|:-]+/g, '').replace(/\b(null|x)\b/gi, '');
}

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'catattack', setupSql: SETUP });
  const role = await admin('POST', `/api/data-sources/${ww.sourceId}/roles`, { role_key: 'crm-reader', rules: { sql: [{ operations: ['read'], tables: ['crm.*'] }] } });
  if (role.status >= 300) throw new Error(`role: ${role.status} ${role.text}`);
  agent = await ww.world.agent('attack-agent', [{ source_id: ww.sourceId, role_key: 'crm-reader' }]);
  await ww.world.policy({ name: 'redact contact data', conditions: { identity_ids: [agent.id] }, actions: { effect: 'allow', redact_classified: ['contact'] } });
  mcp = new Client({ name: 'catalog-attack', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${ww.world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
  const scanned = await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/scan`, { wait_seconds: 30 });
  expect(scanned.json.snapshot?.status, scanned.text).toBe('ok');
  for (const path of ['crm.accounts.memo', 'crm.events.memo', 'crm.parent.memo']) {
    const a = await admin('PUT', `/api/data-sources/${ww.sourceId}/catalog/annotations`, { path, classification: 'contact' });
    expect(a.status, a.text).toBe(200);
  }
  // Drift protection would redact the new relations anyway: acknowledged, the classifications alone must hold.
  await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/changes/acknowledge`, {});
}, 120_000);

afterAll(async () => {
  await mcp?.close();
  await ww?.stop();
});

describe('classified columns under every spelling', () => {
  it('the unclassified column of the same table is readable (the check can fail)', async () => {
    const r = await ww.psql('attack-agent', agent.key, ['-A', '-t', '-c', 'select label from crm.accounts']);
    expect(r.stdout).toContain('acct-one');
  });

  it.each(SPELLINGS)('psql: %s', async (sql) => {
    const r = await ww.psql('attack-agent', agent.key, ['-A', '-t', '-c', sql]);
    expect(`${r.stdout}\n${r.stderr}`).not.toContain(SECRET);
  });

  it.each(SPELLINGS)('MCP query: %s', async (sql) => {
    const r = await mcp.callTool({ name: 'query', arguments: { source_id: ww.sourceId, sql } });
    expect(JSON.stringify(r)).not.toContain(SECRET);
  });

  it.each(DERIVED)('psql, derived value: %s', async (sql) => {
    const r = await ww.psql('attack-agent', agent.key, ['-A', '-t', '-c', sql]);
    if (r.code === 0) expect(residue(r.stdout), r.stdout).toBe('');
    else expect(r.stderr).not.toContain(SECRET);
  });

  it.each(DERIVED)('MCP query, derived value: %s', async (sql) => {
    const r = await mcp.callTool({ name: 'query', arguments: { source_id: ww.sourceId, sql } });
    const text = JSON.stringify(r);
    expect(text).not.toContain('kotomemq');
    expect(text).not.toContain('cW1lbW90b2s');
  });

  it('COPY (…) TO STDOUT', async () => {
    for (const sql of ['copy (select memo from crm.accounts) to stdout', 'copy crm.accounts to stdout', 'copy (select a from crm.accounts a) to stdout', 'copy crm.events_2024 to stdout']) {
      const r = await ww.psql('attack-agent', agent.key, ['-A', '-t', '-c', sql]);
      expect(`${r.stdout}\n${r.stderr}`, sql).not.toContain(SECRET);
    }
  });
});
