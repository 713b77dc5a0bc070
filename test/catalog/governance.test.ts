// Confirmed classifications feed governance on every front door (psql, the MCP query tool, the policy dry run), and drift protects: a column added at the source comes back redacted through psql after the next scan until its change is acknowledged.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startWireWorld, type WireWorld } from '../pgwire/fixture.js';

const SETUP = `
create schema crm;
create table crm.accounts (id int primary key, label text, memo text);
insert into crm.accounts values (1, 'acct-one', 'memo qmemotok one');
create table public.plain (id int primary key, data text);
insert into public.plain values (1, 'qdatatok');
create table public.other (id int primary key);
insert into public.other values (1);
`;

let ww: WireWorld;
let agent: { id: number; key: string };
let mcp: Client;

async function psql(sql: string): Promise<{ code: number; out: string }> {
  const r = await ww.psql('cat-agent', agent.key, ['-A', '-t', '-c', sql]);
  return { code: r.code, out: `${r.stdout}\n${r.stderr}` };
}

async function viaMcp(sql: string): Promise<{ isError: boolean; out: string }> {
  const r = await mcp.callTool({ name: 'query', arguments: { source_id: ww.sourceId, sql } });
  return { isError: r.isError === true, out: JSON.stringify(r) };
}

const admin = (method: string, path: string, body?: unknown) => ww.world.admin(method, path, body);

async function scan(): Promise<{ change_count: number }> {
  const a = await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/scan`, { wait_seconds: 30 });
  expect(a.status, a.text).toBe(200);
  expect(a.json.snapshot.status).toBe('ok');
  return a.json.snapshot;
}

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'catgov', setupSql: SETUP });
  const role = await admin('POST', `/api/data-sources/${ww.sourceId}/roles`, { role_key: 'crm-reader', rules: { sql: [{ operations: ['read'], tables: ['crm.*', 'public.*'] }] } });
  if (role.status >= 300) throw new Error(`role: ${role.status} ${role.text}`);
  agent = await ww.world.agent('cat-agent', [{ source_id: ww.sourceId, role_key: 'crm-reader' }]);
  await ww.world.policy({ name: 'redact contact data', conditions: { identity_ids: [agent.id] }, actions: { effect: 'allow', redact_classified: ['contact'] } });
  await ww.world.policy({ name: 'deny secret data', priority: 10, conditions: { classification_tags: ['secret'] }, actions: { effect: 'deny' } });
  mcp = new Client({ name: 'catalog-test', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${ww.world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
  // The source was scanned on save; make sure the snapshot is there before annotating.
  await scan();
}, 120_000);
afterAll(async () => {
  await mcp?.close();
  await ww?.stop();
});

describe('classifications feed governance', () => {
  it('an unclassified column is readable', async () => {
    expect((await psql('select memo from crm.accounts')).out).toContain('qmemotok');
  });

  it('redact_classified redacts a confirmed column through psql, MCP query and the dry run', async () => {
    expect((await admin('PUT', `/api/data-sources/${ww.sourceId}/catalog/annotations`, { path: 'crm.accounts.memo', classification: 'contact' })).status).toBe(200);
    const r = await psql('select id, label, memo from crm.accounts');
    expect(r.code).toBe(0);
    expect(r.out).toContain('acct-one');
    expect(r.out).toContain('[REDACTED:column]');
    expect(r.out).not.toContain('qmemotok');
    // Through a view-free rename too: redaction follows provenance, not the name.
    expect((await psql('select upper(memo) as m from crm.accounts')).out).not.toContain('QMEMOTOK');
    const m = await viaMcp('select label, memo from crm.accounts');
    expect(m.isError).toBe(false);
    expect(m.out).toContain('acct-one');
    expect(m.out).not.toContain('qmemotok');
    const dry = await admin('POST', '/api/policies/dry-run', { identity_id: agent.id, source_id: ww.sourceId, sql: 'select memo from crm.accounts' });
    expect(dry.status).toBe(200);
    expect(dry.json.obligations.redact_columns).toContain('crm.accounts.memo');
    // Another identity's requests are not matched by the redacting policy.
    const other = await ww.world.agent('cat-other');
    const dryOther = await admin('POST', '/api/policies/dry-run', { identity_id: other.id, source_id: ww.sourceId, sql: 'select memo from crm.accounts' });
    expect(dryOther.json.obligations.redact_columns).not.toContain('crm.accounts.memo');
  });

  it('a classification_tags condition matches classified columns a statement reads', async () => {
    expect((await psql('select data from public.plain')).out).toContain('qdatatok');
    expect((await admin('PUT', `/api/data-sources/${ww.sourceId}/catalog/annotations`, { path: 'public.plain.data', classification: 'secret' })).status).toBe(200);
    const denied = await ww.psql('cat-agent', agent.key, ['-A', '-t', '-v', 'VERBOSITY=verbose', '-c', 'select data from public.plain']);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain('42501');
    expect(denied.stdout + denied.stderr).not.toContain('qdatatok');
    // Through a star as well, and through MCP; a statement that does not read it still runs.
    expect((await psql('select * from public.plain')).out).not.toContain('qdatatok');
    expect((await viaMcp('select data from public.plain')).isError).toBe(true);
    expect((await psql('select id from public.plain')).out.trim()).toBe('1');
    const dry = await admin('POST', '/api/policies/dry-run', { identity_id: agent.id, source_id: ww.sourceId, sql: 'select data from public.plain' });
    expect(dry.json.effect).toBe('deny');
    // Removing the classification lifts the deny.
    expect((await admin('PUT', `/api/data-sources/${ww.sourceId}/catalog/annotations`, { path: 'public.plain.data', classification: '' })).status).toBe(200);
    expect((await psql('select data from public.plain')).out).toContain('qdatatok');
  });
});

describe('drift that protects', () => {
  it('ALTER TABLE ADD COLUMN at the source → next scan → the column is redacted through psql until acknowledged', async () => {
    await ww.direct((c) => c.query("alter table crm.accounts add column backup_code text; update crm.accounts set backup_code = 'qbackuptok';"));
    const snap = await scan();
    expect(snap.change_count).toBe(1);
    const changes = (await admin('GET', `/api/data-sources/${ww.sourceId}/catalog/changes?status=open`)).json as Array<{ change_id: string; path: string; protected: boolean }>;
    const added = changes.find((c) => c.path === 'crm.accounts.backup_code')!;
    // The table holds a classified column (memo): the new column is protected though its name suggests nothing.
    expect(added.protected).toBe(true);
    for (const sql of ['select backup_code from crm.accounts', 'select * from crm.accounts', 'select lower(backup_code) from crm.accounts']) {
      const r = await psql(sql);
      expect(r.code, sql).toBe(0);
      expect(r.out, sql).not.toContain('qbackuptok');
    }
    expect((await psql('select backup_code from crm.accounts')).out).toContain('[REDACTED:column]');
    expect((await viaMcp('select backup_code from crm.accounts')).out).not.toContain('qbackuptok');
    expect((await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/changes/acknowledge`, { change_id: added.change_id })).status).toBe(200);
    expect((await psql('select backup_code from crm.accounts')).out).toContain('qbackuptok');
  });

  it('a column whose name suggests personal data is protected in any table; others are not', async () => {
    await ww.direct((c) => c.query("alter table public.other add column home_phone text, add column visits int; update public.other set home_phone = '+1-555-qphonetok', visits = 7;"));
    await scan();
    const open = (await admin('GET', `/api/data-sources/${ww.sourceId}/catalog/changes?status=open`)).json as Array<{ path: string; protected: boolean }>;
    expect(open.find((c) => c.path === 'public.other.home_phone')!.protected).toBe(true);
    expect(open.find((c) => c.path === 'public.other.visits')!.protected).toBe(false);
    const r = await psql('select home_phone, visits from public.other');
    expect(r.out).not.toContain('qphonetok');
    expect(r.out).toContain('7');
    // Acknowledging all lifts it.
    await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/changes/acknowledge`, {});
    expect((await psql('select home_phone from public.other')).out).toContain('qphonetok');
  });

  it('every column of a new table is protected until acknowledged: a copy of classified data under another name stays redacted', async () => {
    // CREATE TABLE … AS SELECT carries the data of a classified column (memo) without its provenance, under a name that suggests nothing.
    await ww.direct((c) => c.query('create table crm.copy as select id, memo as notes from crm.accounts; create view crm.copy_view as select notes as n from crm.copy;'));
    await scan();
    const open = (await admin('GET', `/api/data-sources/${ww.sourceId}/catalog/changes?status=open`)).json as Array<{ change_id: string; path: string; kind: string; protected: boolean }>;
    const added = open.find((c) => c.path === 'crm.copy')!;
    expect(added).toMatchObject({ kind: 'added', protected: true });
    for (const sql of ['select notes from crm.copy', 'select * from crm.copy', 'select c from crm.copy c', 'select row_to_json(c) from crm.copy c', 'select n from crm.copy_view', 'with x as (select notes from crm.copy) select * from x', 'select (select notes from crm.copy limit 1)']) {
      const r = await psql(sql);
      expect(r.out, sql).not.toContain('qmemotok');
    }
    expect((await viaMcp('select * from crm.copy')).out).not.toContain('qmemotok');
    expect((await psql('select notes from crm.copy')).out).toContain('[REDACTED:column]');
    // Acknowledging the table (and its view) lifts it: the operator has seen it.
    for (const c of open.filter((x) => x.path.startsWith('crm.copy'))) await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/changes/acknowledge`, { change_id: c.change_id });
    expect((await psql('select notes from crm.copy')).out).toContain('qmemotok');
    await ww.direct((c) => c.query('drop view crm.copy_view; drop table crm.copy;'));
    await scan();
    await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/changes/acknowledge`, {});
  });

  it('a renamed table or column is reported as a rename and keeps its classifications', async () => {
    await ww.direct((c) => c.query('alter table crm.accounts rename to accts; alter table crm.accts rename column memo to remark;'));
    await scan();
    const open = (await admin('GET', `/api/data-sources/${ww.sourceId}/catalog/changes?status=open`)).json as Array<{ change_id: string; path: string; kind: string; detail: Record<string, string>; protected: boolean }>;
    expect(open.map((c) => `${c.kind} ${c.path}`).sort()).toEqual(['renamed crm.accts', 'renamed crm.accts.remark']);
    expect(open.find((c) => c.path === 'crm.accts')!.detail).toEqual({ from: 'crm.accounts' });
    expect(open.find((c) => c.path === 'crm.accts.remark')!.detail).toEqual({ from: 'memo' });
    const annotations = (await admin('GET', `/api/data-sources/${ww.sourceId}/catalog/annotations`)).json as Array<{ path: string; classification: string }>;
    expect(annotations.map((a) => `${a.path}=${a.classification}`)).toContain('crm.accts.remark=contact');
    await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/changes/acknowledge`, {});
    // Acknowledged, the classification carried to the new name still redacts it.
    for (const sql of ['select remark from crm.accts', 'select * from crm.accts']) {
      const r = await psql(sql);
      expect(r.code, sql).toBe(0);
      expect(r.out, sql).not.toContain('qmemotok');
    }
    expect((await psql('select label from crm.accts')).out).toContain('acct-one');
    await ww.direct((c) => c.query('alter table crm.accts rename column remark to memo; alter table crm.accts rename to accounts;'));
    await scan();
    await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/changes/acknowledge`, {});
  });

  it('before the next scan: a table created or a column added at the source is redacted, a renamed classified column stays classified', async () => {
    await ww.direct((c) => c.query("create table crm.fresh as select id, memo as n from crm.accounts; alter table public.plain add column fresh_note text; update public.plain set fresh_note = 'qfreshtok';"));
    // No scan: the served snapshot does not hold them.
    for (const sql of ['select n from crm.fresh', 'select * from crm.fresh', 'select f from crm.fresh f', 'select upper(n) from crm.fresh']) {
      const r = await psql(sql);
      expect(r.out, sql).not.toContain('qmemotok');
    }
    expect((await viaMcp('select n from crm.fresh')).out).not.toContain('qmemotok');
    for (const sql of ['select fresh_note from public.plain', 'select * from public.plain', 'select reverse(fresh_note) from public.plain']) {
      const r = await psql(sql);
      expect(r.out, sql).not.toContain('qfreshtok');
      expect(r.out, sql).not.toContain('kothserfq');
    }
    // A column of the table the snapshot knows stays readable: the check can fail.
    expect((await psql('select data from public.plain')).out).toContain('qdatatok');
    // A classified column renamed at the source keeps its classification by identity (pg attnum), before any scan…
    await ww.direct((c) => c.query('alter table crm.accounts rename column memo to remark2'));
    expect((await psql('select reverse(remark2) from crm.accounts')).out).not.toContain('kotomemq');
    // …also once the gateway's structure has the new name (a relation it lacks reloads it after 5 s).
    await new Promise((r) => setTimeout(r, 5_200));
    await psql('select 1 from crm.no_such_relation');
    for (const sql of ['select remark2 from crm.accounts', 'select reverse(remark2) from crm.accounts', 'select a from crm.accounts a']) {
      const r = await psql(sql);
      expect(r.out, sql).not.toContain('qmemotok');
      expect(r.out, sql).not.toContain('kotomemq');
    }
    expect((await viaMcp('select reverse(remark2) from crm.accounts')).out).not.toContain('kotomemq');
    await ww.direct((c) => c.query('alter table crm.accounts rename column remark2 to memo; drop table crm.fresh; alter table public.plain drop column fresh_note;'));
    await scan();
    await admin('POST', `/api/data-sources/${ww.sourceId}/catalog/changes/acknowledge`, {});
  });

  it('with drift protection off for the source, an added column is not redacted', async () => {
    await admin('PUT', `/api/data-sources/${ww.sourceId}/catalog/settings`, { drift_protection: false });
    await ww.direct((c) => c.query("alter table crm.accounts add column email_alt text; update crm.accounts set email_alt = 'qalttok';"));
    await scan();
    const open = (await admin('GET', `/api/data-sources/${ww.sourceId}/catalog/changes?status=open`)).json as Array<{ path: string; protected: boolean }>;
    expect(open.find((c) => c.path === 'crm.accounts.email_alt')!.protected).toBe(false);
    expect((await psql('select email_alt from crm.accounts')).out).toContain('qalttok');
  });
});
