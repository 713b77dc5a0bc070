// Planner statistics hold values sampled from every table (pg_stats.histogram_bounds, most_common_vals, pg_statistic's stavalues, the extended forms): reading them is refused on the wire and MCP. Before, an agent read a redacted column's values, and an ungranted table's, from pg_stats.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openMcpSession, sqlError, startWireWorld, type McpSession, type WireWorld } from './fixture.js';

const SETUP = `
create table customers (id int primary key, name text, ssn text);
insert into customers select i, 'name' || i, 'SSNVAL-' || lpad(i::text, 4, '0') from generate_series(1, 60) i;
insert into customers select 100 + i, 'dup', 'SSNVAL-COMMON' from generate_series(1, 40) i;
create schema secret;
create table secret.keys (id int, k text);
insert into secret.keys select i, 'KEYVAL-' || i from generate_series(1, 30) i;
create statistics customers_mcv (mcv) on name, ssn from customers;
create statistics customers_expr on (lower(ssn)) from customers;
analyze customers;
analyze secret.keys;
`;
const LEAK = /SSNVAL-|KEYVAL-/;

let ww: WireWorld;
let narrow: { id: number; key: string };
let wide: { id: number; key: string };
const sessions: McpSession[] = [];

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'plannerstats', setupSql: SETUP });
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'customers-and-catalog',
    rules: { sql: [{ operations: ['read'], tables: ['public.customers', 'pg_catalog.*'], approval: 'never' }] },
  });
  if (role.status >= 300) throw new Error(role.text);
  narrow = await ww.world.agent('stats-narrow', [{ source_id: ww.sourceId, role_key: 'customers-and-catalog' }]);
  wide = await ww.world.agent('stats-wide', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  await ww.world.policy({ name: 'redact ssn', conditions: { identity_ids: [narrow.id, wide.id] }, actions: { effect: 'allow', redact_columns: ['ssn'], pii_mode: 'off' } });
  // The leak is real: straight at PostgreSQL the statistics spell the values.
  const direct = await ww.direct((c) => c.query("select histogram_bounds::text as h, most_common_vals::text as m from pg_stats where tablename = 'customers' and attname = 'ssn'"));
  expect(JSON.stringify(direct.rows)).toMatch(/SSNVAL-/);
}, 90_000);
afterAll(async () => {
  for (const s of sessions) await s.close();
  await ww?.stop();
});

const relation = fc.constantFrom('pg_stats', 'pg_catalog.pg_stats', '"pg_stats"', 'PG_STATS', 'U&"pg\\005fstats"', 'pg_catalog . pg_stats', '"pg_catalog"."pg_stats"', 'pg_stats/**/');
const reading = fc.constantFrom(
  (r: string) => `select histogram_bounds::text, most_common_vals::text from ${r} where tablename = 'customers'`,
  (r: string) => `select * from ${r}`,
  (r: string) => `select (select string_agg(histogram_bounds::text, ';') from ${r}) as h`,
  (r: string) => `with s as (select * from ${r}) select most_common_vals::text from s where attname = 'ssn'`,
  (r: string) => `select c.name, s.histogram_bounds::text from customers c join ${r} s on s.attname = 'ssn'`,
  (r: string) => `select array_to_string(histogram_bounds, ',') from ${r} where tablename = 'keys'`,
);
const OTHER = [
  'select stavalues1::text, stavalues2::text from pg_statistic',
  'select most_common_vals from pg_stats_ext',
  'select most_common_vals::text from pg_catalog.pg_stats_ext_exprs',
  'select stxdmcv::text from pg_statistic_ext_data',
  'select * from pg_catalog.pg_statistic_ext_data',
];

describe('planner statistics are refused on every SQL front door', () => {
  for (const [who, agent] of [['stats-narrow', () => narrow], ['stats-wide', () => wide]] as const) {
    test(`${who}: every spelling refused with 42501 on the wire (simple, extended) and by MCP, no sampled value in any answer`, async () => {
      const c = await ww.client(who, agent().key);
      const mcp = await openMcpSession(ww, agent().key);
      sessions.push(mcp);
      try {
        const check = async (sql: string) => {
          const simple = await sqlError(c.query(sql));
          expect(simple.code, sql).toBe('42501');
          expect(simple.message, sql).toMatch(/planner statistics/);
          const extended = await sqlError(c.query({ text: `${sql} limit $1`, values: [5] }));
          expect(extended.code, sql).toBe('42501');
          const m = await mcp.query(sql);
          expect(m.isError, sql).toBe(true);
          expect(m.all, sql).toMatch(/planner statistics/);
          expect(m.all, sql).not.toMatch(LEAK);
        };
        await fc.assert(fc.asyncProperty(relation, reading, (r, make) => check(make(r))), { numRuns: 30 });
        for (const sql of OTHER) await check(sql);
      } finally {
        await c.end();
      }
    });
  }

  test('psql COPY of the statistics and a cursor over them are refused; other catalogs still read', async () => {
    const r = await ww.psql('stats-wide', wide.key, ['-A', '-f', '-'], "copy (select histogram_bounds from pg_stats) to stdout;\nbegin;\ndeclare k cursor for select * from pg_stats;\nfetch all from k;\ncommit;\nselect count(*) from pg_class where relname = 'customers';\n");
    expect(`${r.stdout}${r.stderr}`).not.toMatch(LEAK);
    expect(r.stderr.match(/planner statistics/g)).toHaveLength(2);
    expect(r.stdout).toMatch(/^count\n1\n/m);
  });
});
