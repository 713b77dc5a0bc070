// GET /api/catalog/naming-report against a real source: each finding kind — an unqualified name in several schemas, case and quoting mismatches, a deny glob that matches nothing, a glob that newly matches what the last scan added, a name that stopped resolving after a drop.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../support/world.js';
import { createSourceDatabase, type SourceDatabase } from './support.js';

const SOURCE = 'naming-src';
let world: World;
let src: SourceDatabase;

interface Finding {
  source_id: string;
  rule_id: string;
  owner: Record<string, unknown>;
  field: string;
  name: string;
  kind: string;
  resolved: string[];
  detail: string;
}
let findings: Finding[];
const find = (name: string, kind: string) => findings.filter((f) => f.name === name && f.kind === kind);

beforeAll(async () => {
  src = await createSourceDatabase();
  await src.sql('create table sales.users (id int); create schema "my.schema"; create table "my.schema".orders (id int);');
  world = await startWorld({ privateSources: [SOURCE] });
  expect((await world.admin('POST', '/api/data-sources', { name: SOURCE, source_id: SOURCE, source_type: 'postgres', connection_config: src.config })).status).toBe(201);
  const first = await world.admin('POST', `/api/data-sources/${SOURCE}/catalog/scan`, { wait_seconds: 30 });
  expect(first.json.snapshot?.status).toBe('ok');
  await src.sql('alter table public.users add column phone text; drop materialized view sales.order_totals;');
  const second = await world.admin('POST', `/api/data-sources/${SOURCE}/catalog/scan`, { wait_seconds: 30 });
  expect(second.json.snapshot).toMatchObject({ status: 'ok', change_count: 2 });
  const role = await world.admin('POST', `/api/data-sources/${SOURCE}/roles`, {
    role_key: 'named',
    rules: { sql: [{ operations: ['read'], tables: ['users', 'public.Users', 'public.*'] }] },
  });
  expect(role.status, role.text).toBeLessThan(300);
  await world.policy({ name: 'deny quoted', conditions: { tables: ['"Mixed Case"."Users"'] }, actions: { effect: 'deny' } });
  await world.policy({ name: 'deny unquoted', conditions: { tables: ['my.schema.orders'] }, actions: { effect: 'deny' } });
  await world.policy({ name: 'deny folded', conditions: { tables: ['mixed case.users'] }, actions: { effect: 'deny' } });
  await world.policy({ name: 'deny ssn', conditions: { source_ids: [SOURCE], columns: ['*.*.ssn'] }, actions: { effect: 'deny' } });
  await world.policy({ name: 'redact users', conditions: {}, actions: { redact_columns: ['public.users.*'] } });
  await world.policy({ name: 'deny totals', conditions: { tables: ['sales.order_totals'] }, actions: { effect: 'deny' } });
  await world.policy({ name: 'allow only', conditions: { tables: ['nowhere.*'] }, actions: { effect: 'allow' } });
  const report = await world.admin('GET', '/api/catalog/naming-report');
  expect(report.status).toBe(200);
  expect(report.json.sources).toEqual([{ source_id: SOURCE, snapshot_version: second.json.snapshot.version, truncated_by: null }]);
  findings = report.json.findings as Finding[];
}, 120_000);
afterAll(async () => {
  await world?.stop();
  await src?.close();
});

describe('naming report', () => {
  it('an unqualified name resolving in several schemas', () => {
    const [f] = find('users', 'ambiguous_unqualified');
    expect(f).toMatchObject({ source_id: SOURCE, field: 'tables', owner: { kind: 'source_role', role_key: 'named', rule_index: 0 } });
    expect(f!.resolved.sort()).toEqual(['public.users', 'sales.users']);
    expect(f!.rule_id).toMatch(/^role:\d+:0$/);
  });

  it('a case mismatch and a quoting mismatch', () => {
    expect(find('public.Users', 'case_mismatch')[0]).toMatchObject({ resolved: ['public.users'] });
    const quoting = find('my.schema.orders', 'case_mismatch')[0]!;
    expect(quoting).toMatchObject({ owner: { kind: 'policy', policy_name: 'deny unquoted' }, resolved: ['"my.schema".orders'] });
    expect(quoting.detail).toContain('quoted');
    // Quoting a part in a rule is how a dotted part is named: "Mixed Case"."Users" resolves, no finding.
    expect(findings.filter((f) => f.name === '"Mixed Case"."Users"')).toEqual([]);
    // Lower-case in a rule does not cover an upper-case name: public.users does not cover "Mixed Case"."Users", but mixed case.users would.
    expect(find('mixed case.users', 'case_mismatch')[0]).toMatchObject({ resolved: ['"Mixed Case"."Users"'] });
  });

  it('a deny glob that matches nothing', () => {
    const [f] = find('*.*.ssn', 'matches_nothing');
    expect(f).toMatchObject({ field: 'columns', resolved: [], owner: { kind: 'policy', policy_name: 'deny ssn' } });
    expect(f!.detail).toContain('protects nothing');
  });

  it('a glob that newly matches what the last scan added', () => {
    const [f] = find('public.users.*', 'newly_matches');
    expect(f).toMatchObject({ field: 'redact_columns', resolved: ['public.users.phone'], owner: { kind: 'policy', policy_name: 'redact users' } });
    // The role's public.* did not gain a table: no finding for it.
    expect(findings.filter((x) => x.name === 'public.*')).toEqual([]);
  });

  it('a name that stopped resolving after a drop', () => {
    expect(find('sales.order_totals', 'stopped_resolving')[0]).toMatchObject({ resolved: ['sales.order_totals'], owner: { kind: 'policy', policy_name: 'deny totals' } });
    expect(find('sales.order_totals', 'matches_nothing')).toEqual([]);
  });

  it('allow policies are not reported; every entry names its source, owner, name, kind and objects', () => {
    expect(findings.some((f) => f.name === 'nowhere.*')).toBe(false);
    for (const f of findings) {
      expect(f.source_id).toBe(SOURCE);
      expect(typeof f.rule_id).toBe('string');
      expect(Array.isArray(f.resolved)).toBe(true);
    }
    expect(new Set(findings.map((f) => f.kind))).toEqual(new Set(['ambiguous_unqualified', 'case_mismatch', 'matches_nothing', 'newly_matches', 'stopped_resolving']));
  });
});
