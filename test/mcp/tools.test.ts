// Every tool through the SDK client over Streamable HTTP against a running gateway: the same decisions, redaction, approvals and audit as the proxy and the wire listener.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startMcpWorld, HTTP_SOURCE, PG_SOURCE, type McpWorld } from './fixture.js';

type Structured = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let mw: McpWorld;
let reader: { id: number; key: string };
let writer: { id: number; key: string };
let redacted: { id: number; key: string };
let nobody: { id: number; key: string };

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; s: Structured; text: string }> {
  const r = await client.callTool({ name, arguments: args });
  const content = r.content as Array<{ type: string; text?: string }>;
  return { isError: r.isError === true, s: (r.structuredContent ?? {}) as Structured, text: content.map((c) => c.text ?? '').join('\n') };
}

const count = async (where = 'true') => Number((await mw.direct<{ n: number }>(`select count(*)::int as n from customers where ${where}`))[0]!.n);

beforeAll(async () => {
  mw = await startMcpWorld();
  reader = await mw.world.agent('mcp-reader', [
    { source_id: HTTP_SOURCE, role_key: 'reader' },
    { source_id: PG_SOURCE, role_key: 'reader' },
  ]);
  writer = await mw.world.agent('mcp-writer', [
    { source_id: HTTP_SOURCE, role_key: 'writer' },
    { source_id: PG_SOURCE, role_key: 'writer' },
  ]);
  redacted = await mw.world.agent('mcp-redacted', [{ source_id: PG_SOURCE, role_key: 'reader' }]);
  nobody = await mw.world.agent('mcp-nobody');
  await mw.world.policy({ name: 'redact ssn for mcp-redacted', conditions: { identity_ids: [redacted.id], source_ids: [PG_SOURCE] }, actions: { effect: 'allow', redact_columns: ['ssn'] } });
}, 60_000);
afterAll(async () => mw?.stop());

describe('discovery', () => {
  test('tool schemas are strict and name the source as source_id', async () => {
    const client = await mw.connect(reader.key);
    const { tools } = await client.listTools();
    for (const t of tools) expect(t.inputSchema.additionalProperties, t.name).toBe(false);
    for (const name of ['describe_source', 'query', 'http_request']) {
      expect(tools.find((t) => t.name === name)!.inputSchema.required).toContain('source_id');
    }
    expect(tools.find((t) => t.name === 'query')!.inputSchema.properties).toHaveProperty('max_rows');
  });

  test('list_sources shows each granted source with its type and what its roles allow', async () => {
    const client = await mw.connect(writer.key);
    const r = await call(client, 'list_sources', {});
    expect(r.isError).toBe(false);
    const pgSource = r.s.sources.find((s: Structured) => s.source_id === PG_SOURCE);
    expect(pgSource).toMatchObject({ name: 'MCP test database', type: 'postgres', roles: [{ role_key: 'writer' }] });
    expect(pgSource.roles[0].sql.flatMap((x: Structured) => x.operations)).toEqual(['read', 'write']);
    expect(r.text).toContain(PG_SOURCE);
  });

  test('an identity without grants sees no sources and cannot describe one', async () => {
    const client = await mw.connect(nobody.key);
    const r = await call(client, 'list_sources', {});
    expect(r.isError).toBe(false);
    expect(r.s.sources).toEqual([]);
    const granted = await call(client, 'describe_source', { source_id: PG_SOURCE });
    const unknown = await call(client, 'describe_source', { source_id: 'no_such_source' });
    // No existence leak: a real source without a grant answers exactly like an unknown one.
    expect(granted.isError).toBe(true);
    expect(granted.s.error).toBe('unknown_source');
    expect({ ...granted.s, request_id: null }).toEqual({ ...unknown.s, request_id: null });
  });

  test('describe_source: type, allowed operations and the captured catalog cut to what the roles name, never row data', async () => {
    const scanned = await mw.world.admin('POST', `/api/data-sources/${PG_SOURCE}/catalog/scan`, { wait_seconds: 30 });
    expect(scanned.json.snapshot?.status).toBe('ok');
    const client = await mw.connect(reader.key);
    const r = await call(client, 'describe_source', { source_id: PG_SOURCE });
    expect(r.isError).toBe(false);
    expect(r.s).toMatchObject({ source_id: PG_SOURCE, type: 'postgres', allowed: { sql_operations: ['read'] }, catalog: { kind: 'sql', hidden: 0 } });
    expect(r.s.catalog_status).toMatch(/^captured .* \(version \d+\)$/);
    const customers = r.s.catalog.relations.find((x: Structured) => x.name === 'customers');
    expect(customers.columns.map((c: Structured) => c.name)).toEqual(['id', 'name', 'email', 'ssn']);
    expect(r.text).toContain('public.customers(id integer');
    expect(JSON.stringify(r.s)).not.toContain('Ada');
    const h = await call(client, 'describe_source', { source_id: HTTP_SOURCE });
    expect(h.s.allowed.http).toEqual([{ methods: ['GET'], paths: ['/**'], approval: 'never' }]);
    expect(h.s).toMatchObject({ catalog: null, catalog_status: 'no catalog captured' });
    // A role that names one table sees that table only; the rest is counted, never named.
    const role = await mw.world.admin('POST', `/api/data-sources/${PG_SOURCE}/roles`, { role_key: 'customers-only', rules: { sql: [{ operations: ['read'], tables: ['public.customers'] }] } });
    expect(role.status).toBeLessThan(300);
    const narrow = await mw.world.agent('mcp-narrow', [{ source_id: PG_SOURCE, role_key: 'customers-only' }]);
    const n = await call(await mw.connect(narrow.key), 'describe_source', { source_id: PG_SOURCE });
    expect(n.s.catalog.relations.map((x: Structured) => x.name)).toEqual(['customers']);
    expect(n.s.catalog.hidden).toBeGreaterThan(0);
    expect(JSON.stringify(n.s)).not.toContain('notes');
  });
});

describe('query', () => {
  test('a read returns columns and rows as structured content, bounded by max_rows', async () => {
    const client = await mw.connect(reader.key);
    const r = await call(client, 'query', { source_id: PG_SOURCE, sql: 'select id, name from customers where id >= $1 order by id', params: [1] });
    expect(r.isError, r.text).toBe(false);
    expect(r.s).toMatchObject({ columns: ['id', 'name'], rows: [['1', 'Ada'], ['2', 'Bob']], row_count: 2, truncated: false });
    expect(r.text).toContain('Ada');
    const one = await call(client, 'query', { source_id: PG_SOURCE, sql: 'select id from customers order by id', max_rows: 1 });
    expect(one.s).toMatchObject({ rows: [['1']], row_count: 1, truncated: true });
  });

  test('a write the reader role does not allow is a tool error and changes nothing', async () => {
    const client = await mw.connect(reader.key);
    const before = await count();
    const r = await call(client, 'query', { source_id: PG_SOURCE, sql: "insert into customers values (9, 'Eve', 'eve@example.com', '000-00-0000')" });
    expect(r.isError).toBe(true);
    expect(r.s).toMatchObject({ error: 'forbidden', request_id: expect.any(String) });
    expect(await count()).toBe(before);
  });

  test('a column the policy redacts arrives redacted', async () => {
    const client = await mw.connect(redacted.key);
    const r = await call(client, 'query', { source_id: PG_SOURCE, sql: 'select name, ssn from customers where id = $1', params: [1] });
    expect(r.isError, r.text).toBe(false);
    expect(r.s.rows[0][0]).toBe('Ada');
    expect(r.s.rows[0][1]).not.toBe('123-45-6789');
    expect(r.text).not.toContain('123-45-6789');
    // The same column for an identity without the policy obligation is not redacted by it.
    const plain = await call(await mw.connect(reader.key), 'query', { source_id: PG_SOURCE, sql: 'select name from customers where id = 1' });
    expect(plain.s.rows).toEqual([['Ada']]);
  });

  test('bad arguments are a tool error that says what is wrong', async () => {
    const client = await mw.connect(reader.key);
    const extra = await call(client, 'query', { source_id: PG_SOURCE, sql: 'select 1', database: 'x' });
    expect(extra.isError).toBe(true);
    expect(extra.s.error).toBe('invalid_request');
    expect(extra.text).toContain('database');
    const rows = await call(client, 'query', { source_id: PG_SOURCE, sql: 'select 1', max_rows: 0 });
    expect(rows.isError).toBe(true);
    expect(rows.text).toContain('max_rows');
    const missing = await call(client, 'query', { source_id: PG_SOURCE });
    expect(missing.text).toContain('sql');
    const unparsable = await call(client, 'query', { source_id: PG_SOURCE, sql: 'selec 1' });
    expect(unparsable.s.error).toBe('sql_parse_error');
    const upstreamErr = await call(client, 'query', { source_id: PG_SOURCE, sql: 'select * from no_such_table' });
    expect(upstreamErr.isError).toBe(true);
    expect(upstreamErr.s.error).toBe('upstream_sql_error');
    expect(upstreamErr.text).toContain('42P01');
    expect(upstreamErr.text).not.toContain(mw.database.name);
    // A session reset is only allowed where the session's governed state is re-applied after it (the wire relay).
    for (const sql of ['RESET ROLE; select current_user', 'DISCARD ALL', 'RESET ALL']) {
      const reset = await call(client, 'query', { source_id: PG_SOURCE, sql });
      expect(reset.s.error, sql).toBe('forbidden');
      expect(reset.text).toContain('wire session');
    }
  });

  test('a write needing approval returns its id; approved through the admin API it runs once and get_approval shows the result', async () => {
    const client = await mw.connect(writer.key);
    // UPDATE without WHERE is high risk: the writer role approves by risk.
    const r = await call(client, 'query', { source_id: PG_SOURCE, sql: "update customers set name = 'Zed'" });
    expect(r.isError).toBe(true);
    expect(r.s).toMatchObject({ error: 'approval_required', approval_id: expect.any(Number), approval_state: 'pending' });
    expect(await count("name = 'Zed'")).toBe(0);
    const id = r.s.approval_id as number;

    const pending = await call(client, 'get_approval', { approval_id: id });
    expect(pending.s).toMatchObject({ approval_id: id, status: 'pending', source_id: PG_SOURCE, result: null });
    // Someone else's approval is indistinguishable from a missing one.
    const foreign = await call(await mw.connect(reader.key), 'get_approval', { approval_id: id });
    expect(foreign.isError).toBe(true);
    expect(foreign.s.error).toBe('not_found');
    const missing = await call(client, 'get_approval', { approval_id: 2_000_000_000 });
    expect({ ...missing.s, request_id: null }).toEqual({ ...foreign.s, request_id: null });

    const approved = await mw.world.admin('POST', `/api/approvals/${id}/approve`, {});
    expect(approved.status, approved.text).toBeLessThan(300);
    expect(await count("name = 'Zed'")).toBe(2);
    const done = await call(client, 'get_approval', { approval_id: id });
    expect(done.s).toMatchObject({ approval_id: id, status: 'executed', executed_at: expect.any(String), result: { command: 'UPDATE 2' } });
    await mw.direct("update customers set name = case id when 1 then 'Ada' else 'Bob' end");
  });
});

describe('http_request', () => {
  test('a GET goes through the proxy pipeline: parsed JSON body, personal data redacted', async () => {
    const client = await mw.connect(reader.key);
    const r = await call(client, 'http_request', { source_id: HTTP_SOURCE, method: 'GET', path: '/items', query: { page: 2 } });
    expect(r.isError, r.text).toBe(false);
    expect(r.s).toMatchObject({ status: 200, body_encoding: 'json', headers: { 'content-type': 'application/json' } });
    expect(r.s.body.items[0].email).toBe('[REDACTED:email]');
    expect(mw.upstream.hits.at(-1)).toMatchObject({ method: 'GET', path: '/base/items' });
    const text = await call(client, 'http_request', { source_id: HTTP_SOURCE, method: 'GET', path: '/text' });
    expect(text.s).toMatchObject({ status: 200, body: 'plain words', body_encoding: 'utf8' });
  });

  test('refusals: a write the role does not allow, a traversal path, a header outside the allowlist', async () => {
    const client = await mw.connect(reader.key);
    const before = mw.upstream.hits.length;
    const write = await call(client, 'http_request', { source_id: HTTP_SOURCE, method: 'POST', path: '/items', body: { a: 1 } });
    expect(write.s.error).toBe('forbidden');
    const traversal = await call(client, 'http_request', { source_id: HTTP_SOURCE, method: 'GET', path: '/%2e%2e/secret' });
    expect(traversal.s.error).toBe('invalid_path');
    const header = await call(client, 'http_request', { source_id: HTTP_SOURCE, method: 'GET', path: '/items', headers: { authorization: 'Bearer x' } });
    expect(header.s.error).toBe('invalid_request');
    expect(header.text).toContain('authorization');
    const query = await call(client, 'http_request', { source_id: HTTP_SOURCE, method: 'GET', path: '/items?x=1' });
    expect(query.text).toContain('query');
    expect(mw.upstream.hits.length).toBe(before);
  });

  test('a writer POST with a JSON body reaches the upstream as JSON', async () => {
    const client = await mw.connect(writer.key);
    const r = await call(client, 'http_request', { source_id: HTTP_SOURCE, method: 'POST', path: '/items', body: { name: 'n' } });
    // POST is medium risk: the writer role's by_risk rule lets it through without an approval.
    expect(r.isError, r.text).toBe(false);
    expect(r.s).toMatchObject({ status: 201, body: { received: '{"name":"n"}', method: 'POST', type: 'application/json' } });
  });
});

describe('http_request approvals', () => {
  test('a DELETE needing approval is not sent; approved, it runs once and get_approval shows the upstream answer', async () => {
    const admin = await mw.world.agent('mcp-http-admin', [{ source_id: HTTP_SOURCE, role_key: 'admin' }]);
    const client = await mw.connect(admin.key);
    const before = mw.upstream.hits.filter((h) => h.method === 'DELETE').length;
    const r = await call(client, 'http_request', { source_id: HTTP_SOURCE, method: 'DELETE', path: '/items' });
    expect(r.isError).toBe(true);
    expect(r.s).toMatchObject({ error: 'approval_required', approval_id: expect.any(Number), approval_state: 'pending' });
    expect(mw.upstream.hits.filter((h) => h.method === 'DELETE').length).toBe(before);
    const approved = await mw.world.admin('POST', `/api/approvals/${r.s.approval_id}/approve`, {});
    expect(approved.status, approved.text).toBeLessThan(300);
    expect(mw.upstream.hits.filter((h) => h.method === 'DELETE').length).toBe(before + 1);
    const done = await call(client, 'get_approval', { approval_id: r.s.approval_id });
    expect(done.s).toMatchObject({ status: 'executed', result: { status: 201 } });
    const entries = await mw.audit('identity_id = $1', [admin.id]);
    expect(entries.map((e) => [e.action, e.decision, e.status])).toEqual([
      ['mcp.http_request', 'require_approval', 202],
      ['mcp.get_approval', 'allow', 200],
    ]);
  });
});

describe('audit', () => {
  test('every call emits exactly one entry on channel mcp', async () => {
    const agent = await mw.world.agent('mcp-audited', [{ source_id: PG_SOURCE, role_key: 'reader' }]);
    const client = await mw.connect(agent.key);
    await client.listTools();
    await call(client, 'list_sources', {});
    await call(client, 'describe_source', { source_id: PG_SOURCE });
    await call(client, 'query', { source_id: PG_SOURCE, sql: 'select 1 as one' });
    await call(client, 'query', { source_id: PG_SOURCE, sql: "delete from customers where id = 1" });
    await call(client, 'get_approval', { approval_id: 1 });
    await call(client, 'query', { source_id: PG_SOURCE, bogus: true });
    const entries = await mw.audit('identity_id = $1', [agent.id]);
    expect(entries.map((e) => [e.action, e.decision])).toEqual([
      ['mcp.list_sources', 'allow'],
      ['mcp.describe_source', 'allow'],
      ['mcp.query', 'allow'],
      ['mcp.query', 'deny'],
      ['mcp.get_approval', 'error'],
      ['mcp.query', 'error'],
    ]);
    expect(entries.map((e) => e.operation)).toEqual(['list_sources', 'describe_source', 'read', 'write', 'get_approval', 'query']);
    expect(entries[2]).toMatchObject({ source_id: PG_SOURCE, status: 200, sql_fingerprint: expect.any(String) });
    expect(entries[3]).toMatchObject({ status: 403, error_code: 'forbidden' });
  });
});

describe('client encoding', () => {
  test('a query whose function switches client_encoding leaves no upstream connection behind in that encoding', async () => {
    await mw.direct(`create or replace function sneaky_encoding() returns text language sql as $$ select set_config('client_encoding', 'BIG5', false) $$`);
    // A function of the source's own runs only when a role names it (deny by default); this one does.
    const role = await mw.world.admin('POST', `/api/data-sources/${PG_SOURCE}/roles`, {
      role_key: 'sneaky-caller',
      rules: { sql: [{ operations: ['read'], tables: ['*.*'], functions: ['sneaky_encoding'] }] },
    });
    expect(role.status, role.text).toBe(201);
    const caller = await mw.world.agent('mcp-sneaky', [{ source_id: PG_SOURCE, role_key: 'sneaky-caller' }]);
    const refused = await call(await mw.connect(reader.key), 'query', { source_id: PG_SOURCE, sql: 'select sneaky_encoding()' });
    expect(refused.isError).toBe(true);
    const client = await mw.connect(caller.key);
    expect((await call(client, 'query', { source_id: PG_SOURCE, sql: 'select sneaky_encoding()' })).isError).toBe(false);
    // Every later query, on whatever pooled connection, is read by PostgreSQL as the UTF8 the gateway governed: a
    // released connection is reset with DISCARD ALL, which restores the session's UTF8.
    for (let i = 0; i < 4; i++) {
      const r = await call(client, 'query', { source_id: PG_SOURCE, sql: 'show client_encoding' });
      expect(r.isError).toBe(false);
      expect(r.s.rows).toEqual([['UTF8']]);
    }
  });
});
