// Risk by effect, not by syntax: a write is measured on its source before it runs (the planner's estimate with its bound parameters), so tautologies, CTEs and MERGE over a big table queue through psql, node-postgres and the MCP query tool, while a targeted write runs; the approval shows the exact count of a rolled-back run that changed nothing.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startWireWorld, type WireWorld } from '../pgwire/fixture.js';

const BIG = 5_000;
const SETUP = `
create table accounts (id int primary key, flag boolean not null default false, note text not null default '');
insert into accounts select g, g % 2 = 0, '' from generate_series(1, ${BIG}) g;
create table small (id int primary key, note text not null default '');
insert into small select g, '' from generate_series(1, 40) g;
create table events (id serial primary key, body text);
create table audited (id int primary key, note text not null default '');
insert into audited select g, '' from generate_series(1, ${BIG}) g;
create table audit_log (n int);
create function log_change() returns trigger language plpgsql as $$ begin insert into audit_log values (1); return new; end $$;
create trigger audited_log after update on audited for each row execute function log_change();
analyze;
`;

let ww: WireWorld;
let writer: { id: number; key: string };
const mcpClients: Client[] = [];

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'effects', setupSql: SETUP });
  writer = await ww.world.agent('effect-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
}, 60_000);
afterAll(async () => {
  for (const c of mcpClients) await c.close().catch(() => undefined);
  await ww?.stop();
});

const scalar = async (sql: string): Promise<string> => ww.direct(async (c) => String(Object.values((await c.query(sql)).rows[0] as object)[0]));
const touched = () => scalar("select count(*) from accounts where note <> ''");

async function psqlWrite(sql: string): Promise<{ queued: boolean; approvalId: number | null; stderr: string }> {
  const r = await ww.psql('effect-writer', writer.key, ['-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', '-c', sql]);
  const id = /approval_id=(\d+)/.exec(r.stderr)?.[1];
  return { queued: r.stderr.includes('WA001'), approvalId: id ? Number(id) : null, stderr: r.stderr };
}

async function mcpQuery(sql: string, params?: unknown[]): Promise<{ isError: boolean; s: Record<string, unknown>; text: string }> {
  const client = new Client({ name: 'risk-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${ww.world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${writer.key}` } } }));
  mcpClients.push(client);
  const r = await client.callTool({ name: 'query', arguments: { source_id: ww.sourceId, sql, ...(params ? { params } : {}) } });
  const content = r.content as Array<{ text?: string }>;
  return { isError: r.isError === true, s: (r.structuredContent ?? {}) as Record<string, unknown>, text: content.map((c) => c.text ?? '').join('\n') };
}

async function approval(id: number): Promise<Record<string, any>> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const r = await ww.world.admin('GET', `/api/approvals/${id}`);
  expect(r.status, r.text).toBe(200);
  return r.json;
}

/** Every spelling writes the whole table while its WHERE clause (if any) says nothing of the kind. */
const WHOLE_TABLE_WRITES = [
  "update accounts set note = 'x' where true",
  "update accounts set note = 'x' where 1 = 1",
  "update accounts set note = 'x' where id = id",
  "update accounts set note = 'x' where flag or not flag",
  "update accounts set note = 'x' where id > 0",
  'delete from accounts where true',
  "with u as (update accounts set note = 'x' returning 1) select count(*) from u",
  "with d as (update accounts set note = 'x' where id = id returning id) select 1",
  "merge into accounts a using (select 1) s on true when matched then update set note = 'x'",
  "insert into events (body) select 'x' from generate_series(1, 2000)",
];

describe('through psql', () => {
  test.each(WHOLE_TABLE_WRITES)('queued, nothing changed upstream: %s', async (sql) => {
    const r = await psqlWrite(sql);
    expect(r.queued, r.stderr).toBe(true);
    expect(r.approvalId).not.toBeNull();
    expect(await touched()).toBe('0');
    expect(await scalar('select count(*) from accounts')).toBe(String(BIG));
    expect(await scalar('select count(*) from events')).toBe('0');
    const a = await approval(r.approvalId!);
    expect(a.risk_level).toBe('high');
    expect(a.request_metadata.risk_reasons.join(' ')).toMatch(/rows \(more than max_rows 1000\)|of public\.accounts \(more than max_table_share/);
  });

  test('a targeted write runs at once', async () => {
    const r = await ww.psql('effect-writer', writer.key, ['-v', 'ON_ERROR_STOP=1', '-c', "update accounts set note = 'one' where id = 7"]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('UPDATE 1');
    expect(await scalar("select note from accounts where id = 7")).toBe('one');
    await ww.direct((c) => c.query("update accounts set note = '' where id = 7"));
  });

  test('the share of the table counts, not only the row count: all of a 40-row table queues, one row of it runs', async () => {
    const all = await psqlWrite("update small set note = 'x' where id = id");
    expect(all.queued, all.stderr).toBe(true);
    expect((await approval(all.approvalId!)).request_metadata.risk_reasons.join(' ')).toMatch(/of public\.small \(more than max_table_share 0\.5\)/);
    const one = await psqlWrite("update small set note = 'x' where id = 3");
    expect(one.queued, one.stderr).toBe(false);
    expect(await scalar("select count(*) from small where note = 'x'")).toBe('1');
  });
});

describe('the approval preview', () => {
  test('shows the exact count of a rolled-back run on the approval (admin API), and that run changed no row', async () => {
    const r = await psqlWrite("update accounts set note = 'x' where flag or not flag");
    const a = await approval(r.approvalId!);
    expect(a.status).toBe('pending');
    const effect = a.request_metadata.write_effect;
    expect(effect.exact_rows).toBe(BIG);
    expect(effect.exact_tables).toEqual([{ table: 'public.accounts', operation: 'update', rows: BIG }]);
    expect(effect.estimated_rows).toBeGreaterThan(1_000);
    // The planner's size of the table: rolled-back runs leave dead row versions until vacuum, so it may read high, never low.
    expect(effect.tables[0]).toMatchObject({ table: 'public.accounts', operation: 'update' });
    expect(effect.tables[0].table_rows).toBeGreaterThanOrEqual(BIG);
    expect(effect.thresholds).toEqual({ max_rows: 1000, max_table_share: 0.5, share_min_rows: 10 });
    expect(await touched()).toBe('0');
    // No lock or transaction is left behind: a direct write to the same rows goes through at once.
    await ww.direct((c) => c.query("set lock_timeout = '1s'; update accounts set note = '' where id = 1"));
  });

  test('a MERGE and a CTE are counted too', async () => {
    const merge = await approval((await psqlWrite("merge into accounts a using (select 1) s on true when matched and a.id <= 3000 then update set note = 'x'")).approvalId!);
    expect(merge.request_metadata.write_effect.exact_rows).toBe(3000);
    const cte = await approval((await psqlWrite("with u as (delete from accounts where id > 1000 returning 1) select count(*) from u")).approvalId!);
    expect(cte.request_metadata.write_effect).toMatchObject({ exact_rows: BIG - 1000, exact_tables: [{ table: 'public.accounts', operation: 'delete', rows: BIG - 1000 }] });
    expect(await scalar('select count(*) from accounts')).toBe(String(BIG));
  });

  test('rows stay; sequences a rolled-back run advanced stay advanced (documented)', async () => {
    const before = await scalar("select coalesce((select last_value from events_id_seq where is_called), 0)");
    const r = await psqlWrite("insert into events (body) select 'x' from generate_series(1, 1500)");
    expect((await approval(r.approvalId!)).request_metadata.write_effect.exact_rows).toBe(1500);
    expect(await scalar('select count(*) from events')).toBe('0');
    expect(Number(await scalar('select last_value from events_id_seq'))).toBe(Number(before) + 1500);
  });

  test('a table with a trigger is not run before approval: the approval says why and shows the estimate', async () => {
    const r = await psqlWrite("update audited set note = 'x' where true");
    expect(r.queued).toBe(true);
    const effect = (await approval(r.approvalId!)).request_metadata.write_effect;
    expect(effect).toMatchObject({ exact_rows: null, exact_error: expect.stringMatching(/triggers or rules/) });
    expect(effect.estimated_rows).toBeGreaterThan(1_000);
    expect(await scalar('select count(*) from audit_log')).toBe('0');
  });

  test('the approved write then runs once and touches the rows the preview counted', async () => {
    const r = await psqlWrite("update small set note = 'approved' where true");
    const counted = (await approval(r.approvalId!)).request_metadata.write_effect.exact_rows;
    expect(counted).toBe(40);
    const done = await ww.world.admin('POST', `/api/approvals/${r.approvalId}/approve`, {});
    expect(done.json).toMatchObject({ status: 'executed', executed: true });
    expect(await scalar("select count(*) from small where note = 'approved'")).toBe('40');
  });
});

describe('bound parameters', () => {
  test('the same prepared statement is measured per execution: small runs, large queues (no cached decision)', async () => {
    const c = await ww.client('effect-writer', writer.key);
    try {
      const text = "update accounts set note = 'p' where id <= $1";
      const small = await c.query({ name: 'upd', text, values: [2] });
      expect(small.rowCount).toBe(2);
      await expect(c.query({ name: 'upd', text, values: [BIG] })).rejects.toMatchObject({ code: 'WA001' });
      const again = await c.query({ name: 'upd', text, values: [3] });
      expect(again.rowCount).toBe(3);
    } finally {
      await c.end();
    }
    expect(await scalar("select count(*) from accounts where note = 'p'")).toBe('3');
    await ww.direct((c) => c.query("update accounts set note = '' where note = 'p'"));
  });

  test('a table that grew is measured as it is now, on the same session and statement', async () => {
    await ww.direct((c) => c.query("create table growing (id int primary key, note text); insert into growing select g, '' from generate_series(1, 20) g; analyze growing"));
    const c = await ww.client('effect-writer', writer.key);
    try {
      const stmt = { name: 'grow', text: "update growing set note = 'x' where id > $1", values: [19] };
      expect((await c.query(stmt)).rowCount).toBe(1);
      await ww.direct((d) => d.query("insert into growing select g, '' from generate_series(21, 5000) g; analyze growing"));
      await expect(c.query(stmt)).rejects.toMatchObject({ code: 'WA001' });
    } finally {
      await c.end();
    }
    expect(await scalar("select count(*) from growing where note = 'x'")).toBe('1');
  });
});

describe('through the MCP query tool', () => {
  test('a tautology queues, a CTE and a MERGE queue, nothing changes; a targeted write runs', async () => {
    for (const sql of ["update accounts set note = 'm' where 1 = 1", "with u as (update accounts set note = 'm' returning 1) select count(*) from u", "merge into accounts a using (select 1) s on true when matched then update set note = 'm'"]) {
      const r = await mcpQuery(sql);
      expect(r.isError, r.text).toBe(true);
      expect(r.s).toMatchObject({ error: 'approval_required', approval_state: 'pending' });
      const a = await approval(r.s.approval_id as number);
      expect(a.request_metadata.write_effect.exact_rows).toBe(BIG);
    }
    expect(await scalar("select count(*) from accounts where note = 'm'")).toBe('0');
    const param = await mcpQuery('update accounts set note = $1 where id > $2', ['m', 0]);
    expect(param.s).toMatchObject({ error: 'approval_required' });
    const small = await mcpQuery('update accounts set note = $1 where id = $2', ['m', 9]);
    expect(small.isError, small.text).toBe(false);
    expect(await scalar("select count(*) from accounts where note = 'm'")).toBe('1');
    await ww.direct((c) => c.query("update accounts set note = '' where note = 'm'"));
  });
});

describe('fail closed', () => {
  test('a write whose effect cannot be estimated queues instead of running', async () => {
    // The planner refuses (no such column): the gateway cannot know the effect, so a human decides.
    const r = await psqlWrite("update accounts set nosuchcolumn = 1 where id = 1");
    expect(r.queued, r.stderr).toBe(true);
    const a = await approval(r.approvalId!);
    expect(a.request_metadata.risk_reasons.join(' ')).toMatch(/could not be estimated \(the source refused to plan it \(SQLSTATE 42703\)\)/);
    expect(a.request_metadata.write_effect).toMatchObject({ estimated_rows: null, exact_rows: null });
  });
});

describe('the estimate is bounded on the source', () => {
  test('an estimate blocked on a lock is cancelled by the source at estimate_timeout_ms, and the write queues', async () => {
    await ww.direct(async (locker) => {
      await locker.query('begin; lock table small in access exclusive mode');
      try {
        const started = Date.now();
        const r = await psqlWrite("update small set note = 'x' where id = 1");
        expect(r.queued, r.stderr).toBe(true);
        expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
        const a = await approval(r.approvalId!);
        expect(a.request_metadata.risk_reasons.join(' ')).toMatch(/could not be estimated \(timed out\)/);
        // The measuring session's own statement_timeout (estimate_timeout_ms, 2 s by default) ends its EXPLAIN on the
        // source: nothing of the gateway is left waiting on the lock, while the lock is still held.
        const waiting = () => scalar("select count(*) from pg_stat_activity where state = 'active' and wait_event_type = 'Lock' and query like 'EXPLAIN%'");
        const deadline = Date.now() + 1_500;
        while ((await waiting()) !== '0' && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
        expect(await waiting()).toBe('0');
      } finally {
        await locker.query('rollback');
      }
    });
    expect(await scalar("select count(*) from small where note = 'x'")).toBe('0');
  });
});

describe('per-source thresholds', () => {
  test('write_risk in connection_config sets them: raised, the whole-table write runs; preview_max_rows bounds the exact count', async () => {
    const registry = ww.world.svc.running.services.registry;
    const base = { host: '127.0.0.1', port: 5432, database: ww.upstream.name, user: 'postgres', ssl_mode: 'disable', pool_max: 10 };
    const patch = async (writeRisk: Record<string, unknown>) => {
      const r = await ww.world.admin('PATCH', `/api/data-sources/${ww.sourceId}`, { connection_config: { ...base, write_risk: writeRisk } });
      expect(r.status, r.text).toBe(200);
      const deadline = Date.now() + 5_000;
      while (JSON.stringify(registry.get(ww.sourceId)?.connection_config.write_risk) !== JSON.stringify(r.json.connection_config.write_risk) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
      return r.json.connection_config.write_risk as Record<string, unknown>;
    };
    const bounded = await patch({ preview_max_rows: 10 });
    expect(bounded).toMatchObject({ max_rows: 1000, max_table_share: 0.5, share_min_rows: 10, preview_max_rows: 10, preview_exact_count: true });
    const q = await psqlWrite("update accounts set note = 'b' where true");
    expect((await approval(q.approvalId!)).request_metadata.write_effect).toMatchObject({ exact_rows: null, exact_error: 'estimated above preview_max_rows 10: not counted' });

    await patch({ max_rows: 1_000_000, max_table_share: 1 });
    const r = await psqlWrite("update accounts set note = 'r' where true");
    expect(r.queued, r.stderr).toBe(false);
    expect(await scalar("select count(*) from accounts where note = 'r'")).toBe(String(BIG));
    await ww.direct((c) => c.query("update accounts set note = ''"));
    await patch({});
  });
});

describe('an approved write that grew', () => {
  test('is not executed when it now writes far more rows than the approver was shown; an unchanged one runs', async () => {
    // Fresh statistics: the rolled-back runs above left dead row versions that inflate every estimate alike.
    await ww.direct((c) => c.query('vacuum analyze accounts'));
    const q = await mcpQuery('update accounts set note = $1 where id > $2', ['g', 3500]);
    expect(q.s).toMatchObject({ error: 'approval_required' });
    const id = q.s.approval_id as number;
    expect((await approval(id)).request_metadata.write_effect.exact_rows).toBe(1500);
    // Before anyone decides, the same condition comes to match 5500 rows.
    await ww.direct((c) => c.query("insert into accounts select g, false, '' from generate_series(5001, 9000) g; analyze accounts"));
    const done = await ww.world.admin('POST', `/api/approvals/${id}/approve`, {});
    expect(done.json).toMatchObject({ status: 'failed', executed: false });
    expect((await approval(id)).status).toBe('failed');
    expect(await scalar("select count(*) from accounts where note = 'g'")).toBe('0');
    await ww.direct((c) => c.query('delete from accounts where id > 5000'));
    await ww.direct((c) => c.query('vacuum analyze accounts'));

    const same = await mcpQuery('update accounts set note = $1 where id > $2', ['g', 3500]);
    const ran = await ww.world.admin('POST', `/api/approvals/${same.s.approval_id as number}/approve`, {});
    expect(ran.json).toMatchObject({ status: 'executed', executed: true });
    expect(await scalar("select count(*) from accounts where note = 'g'")).toBe('1500');
    await ww.direct((c) => c.query("update accounts set note = '' where note = 'g'"));
  });
});
