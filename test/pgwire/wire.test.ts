// The wire listener with real clients (psql, node-postgres) against a real PostgreSQL source: login, refusals with their SQLSTATEs, traps, approvals, redaction, cancel and audit.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import pg from 'pg';
import { startWireWorld, wireAudit, sqlError, type WireWorld } from './fixture.js';

let ww: WireWorld;
let reader: { id: number; key: string };
let writer: { id: number; key: string };
let redacted: { id: number; key: string };


beforeAll(async () => {
  ww = await startWireWorld();
  reader = await ww.world.agent('wire-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  writer = await ww.world.agent('wire-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
  redacted = await ww.world.agent('wire-redacted', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  await ww.world.policy({ name: 'redact ssn for wire-redacted', conditions: { identity_ids: [redacted.id], source_ids: [ww.sourceId] }, actions: { effect: 'allow', redact_columns: ['ssn'] } });
}, 60_000);
afterAll(async () => ww?.stop());

describe('login', () => {
  test('a wrong password is 28P01', async () => {
    const err = await sqlError(ww.client('wire-reader', 'not-the-key'));
    expect(err.code).toBe('28P01');
  });
  test('an unknown user is 28P01 too (no hint that the name does not exist)', async () => {
    const err = await sqlError(ww.client('nobody-here', 'whatever'));
    expect(err.code).toBe('28P01');
  });
  test('an unknown database (source) is 3D000', async () => {
    const err = await sqlError(ww.client('wire-reader', reader.key, { database: 'no_such_source' }));
    expect(err.code).toBe('3D000');
  });
});

describe('psql (simple protocol)', () => {
  test('select, multi-statement and \\d', async () => {
    const r = await ww.psql('wire-reader', reader.key, ['-c', 'select id, name from customers order by id; select count(*) as n from customers']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Ada');
    expect(r.stdout).toMatch(/n\s*\n-+\n\s*2/);
    const d = await ww.psql('wire-reader', reader.key, ['-c', '\\d customers']);
    expect(d.stderr).toBe('');
    expect(d.stdout).toContain('email');
  });

  test('a redacted column arrives redacted', async () => {
    const r = await ww.psql('wire-redacted', redacted.key, ['-A', '-t', '-c', 'select name, ssn from customers where id = 1']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Ada|');
    expect(r.stdout).not.toContain('123-45-6789');
  });

  test('a multi-statement query with one refused statement runs none', async () => {
    const r = await ww.psql('wire-reader', reader.key, ['-c', "select 1; insert into notes(body) values ('x')"]);
    expect(r.stderr).toContain('No source role allows this request');
    expect(await ww.direct(async (c) => (await c.query('select count(*)::int as n from notes')).rows[0].n)).toBe(0);
  });
});

describe('node-postgres (extended protocol)', () => {
  test('parameters, named prepared statements, a transaction', async () => {
    const c = await ww.client('wire-writer', writer.key);
    try {
      expect((await c.query('select name from customers where id = $1', [1])).rows).toEqual([{ name: 'Ada' }]);
      expect((await c.query({ name: 'byid', text: 'select name from customers where id = $1', values: [2] })).rows).toEqual([{ name: 'Bob' }]);
      expect((await c.query({ name: 'byid', text: 'select name from customers where id = $1', values: [1] })).rows).toEqual([{ name: 'Ada' }]);
      await c.query('begin');
      await c.query('insert into notes(body) values ($1)', ['in tx']);
      expect((await c.query("select count(*)::int as n from notes where body = 'in tx'")).rows[0].n).toBe(1);
      await c.query('rollback');
      expect(await ww.direct(async (d) => (await d.query("select count(*)::int as n from notes where body = 'in tx'")).rows[0].n)).toBe(0);
    } finally {
      await c.end();
    }
  });

  test('a read-only grant running INSERT is 42501 and the table is unchanged', async () => {
    const c = await ww.client('wire-reader', reader.key);
    try {
      const err = await sqlError(c.query('insert into notes(body) values ($1)', ['nope']));
      expect(err.code).toBe('42501');
      // The session still works after the refusal (error, then ReadyForQuery).
      expect((await c.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await c.end();
    }
    expect(await ww.direct(async (d) => (await d.query('select count(*)::int as n from notes')).rows[0].n)).toBe(0);
  });

  test('trap statements are refused', async () => {
    const c = await ww.client('wire-reader', reader.key);
    const w = await ww.client('wire-writer', writer.key);
    try {
      for (const sql of ['with d as (delete from customers returning *) select * from d', "select nextval('counter_seq')", "copy customers to program 'cat'"]) {
        expect((await sqlError(c.query(sql))).code, sql).toBe('42501');
      }
      for (const sql of ['SET ROLE postgres', "select set_config('search_path', 'pg_temp', false) where true", 'SET ROLE "NONE"', 'SET SESSION AUTHORIZATION postgres']) {
        expect((await sqlError(w.query(sql))).code, sql).toBe('42501');
      }
      expect((await sqlError(c.query('selec nonsense'))).code).toBe('42601');
    } finally {
      await c.end();
      await w.end();
    }
    expect(await ww.direct(async (d) => (await d.query('select count(*)::int as n from customers')).rows[0].n)).toBe(2);
  });

  test('a write needing approval answers the approval error with its id and does not run', async () => {
    const c = await ww.client('wire-writer', writer.key);
    let detail: string | undefined;
    try {
      // UPDATE without WHERE is high risk: the writer role approves by risk.
      const err = await sqlError(c.query("update customers set name = 'X'"));
      expect(err.code).toBe('WA001');
      expect(err.message).toBe('approval required');
      expect(err.detail).toMatch(/^approval_id=\d+$/);
      expect(err.hint).toContain('pending');
      detail = err.detail!;
    } finally {
      await c.end();
    }
    expect(await ww.direct(async (d) => (await d.query("select count(*)::int as n from customers where name = 'X'")).rows[0].n)).toBe(0);
    // Approving through the admin API executes it once, through the SQL approval executor.
    const id = Number(detail!.split('=')[1]);
    const approved = await ww.world.admin('POST', `/api/approvals/${id}/approve`, {});
    expect(approved.status, approved.text).toBeLessThan(300);
    expect(await ww.direct(async (d) => (await d.query("select count(*)::int as n from customers where name = 'X'")).rows[0].n)).toBe(2);
    const again = await ww.world.admin('POST', `/api/approvals/${id}/approve`, {});
    expect(again.status).toBeGreaterThanOrEqual(400);
    await ww.direct((d) => d.query("update customers set name = case id when 1 then 'Ada' else 'Bob' end"));
  });

  test('a redacted column requested in binary format is refused (0A000); text format is redacted', async () => {
    const c = await ww.client('wire-redacted', redacted.key, { binary: true } as Partial<pg.ClientConfig>);
    try {
      const err = await sqlError(c.query('select name, ssn from customers where id = $1', [1]));
      expect(err.code).toBe('0A000');
      const ok = await c.query('select id from customers where id = $1', [1]);
      expect(ok.rows).toEqual([{ id: 1 }]);
    } finally {
      await c.end();
    }
    const t = await ww.client('wire-redacted', redacted.key);
    try {
      const r = await t.query('select name, ssn from customers where id = $1', [1]);
      expect(r.rows[0].name).toBe('Ada');
      expect(r.rows[0].ssn).not.toBe('123-45-6789');
    } finally {
      await t.end();
    }
  });

  test('a long query is cancelled with the client cancel key', async () => {
    const c = await ww.client('wire-reader', reader.key);
    try {
      const running = sqlError(c.query('select count(*) from generate_series(1, 1e9::bigint)'));
      await new Promise((r) => setTimeout(r, 500));
      const canceller = new pg.Client({ host: '127.0.0.1', port: ww.port, user: 'wire-reader', password: reader.key, database: ww.sourceId });
      (canceller as unknown as { cancel(c: pg.Client, q: unknown): void }).cancel(c, (c as unknown as { activeQuery: unknown }).activeQuery);
      const started = Date.now();
      const err = await running;
      expect(err.code).toBe('57014');
      expect(Date.now() - started).toBeLessThan(10_000);
      expect((await c.query('select 2 as two')).rows).toEqual([{ two: 2 }]);
    } finally {
      await c.end();
    }
  });
});

test('a statement longer than an audit field holds runs and is audited with its normalized text cut', async () => {
  const c = await ww.client('wire-reader', reader.key);
  const marker = `long_${Date.now()}`;
  // 4,000 constants: the normalized text ($1, $2, …) is about 30,000 characters, past the entry's 16,384.
  const list = Array.from({ length: 4000 }, (_, i) => `'value-${i}'`).join(', ');
  const res = await c.query(`select id as ${marker} from customers where name in (${list})`);
  await c.end();
  expect(res.rows).toEqual([]);
  const entries = (await wireAudit(ww)).filter((e) => String(e.sql_normalized ?? '').includes(marker));
  expect(entries).toHaveLength(1);
  expect(entries[0]).toMatchObject({ identity_id: reader.id, decision: 'allow', status: 200 });
  expect(String(entries[0]!.sql_normalized)).toHaveLength(16_384);
  expect(String(entries[0]!.sql_normalized).endsWith('…')).toBe(true);
  expect(entries[0]!.sql_fingerprint).toBeTruthy();
});

test('a statement naming a 20,000-character table is refused by PostgreSQL and audited under the 63-byte name, the session intact', async () => {
  const c = await ww.client('wire-reader', reader.key);
  const name = `t${'x'.repeat(20_000)}`;
  const err = await sqlError(c.query(`select 1 from "${name}"`));
  // PostgreSQL truncates the identifier to 63 bytes and finds no such table.
  expect(err.code).toBe('42P01');
  expect((await c.query('select 1 as still_here')).rows).toEqual([{ still_here: 1 }]);
  await c.end();
  const entries = (await wireAudit(ww)).filter((e) => Array.isArray(e.tables) && (e.tables as string[]).some((t) => t.startsWith('public.txxxx')));
  expect(entries).toHaveLength(1);
  expect(entries[0]).toMatchObject({ identity_id: reader.id, reasons: ['upstream sqlstate 42P01'], error_code: 'upstream_sql_error' });
  // Identifiers are cut to PostgreSQL's 63 bytes, as the server itself reads them.
  expect(entries[0]!.tables).toEqual([`public.${name.slice(0, 63)}`]);
});

test('one audit entry per statement', async () => {
  const c = await ww.client('wire-reader', reader.key);
  const marker = `audit_${Date.now()}`;
  await c.query(`select 1 as ${marker}_a`);
  await c.query(`select 2 as ${marker}_b, $1::int as n`, [5]);
  await c.end();
  await ww.psql('wire-reader', reader.key, ['-c', `select 3 as ${marker}_c; select 4 as ${marker}_d`]);
  const entries = (await wireAudit(ww)).filter((e) => String(e.sql_normalized ?? '').includes(marker));
  // Exactly one entry per statement, each an allowed read of this identity.
  const byAlias = (suffix: string) => entries.filter((e) => String(e.sql_normalized).includes(`${marker}_${suffix}`));
  for (const suffix of ['a', 'b', 'c', 'd']) expect(byAlias(suffix), suffix).toHaveLength(1);
  expect(entries).toHaveLength(4);
  for (const e of entries) expect(e).toMatchObject({ identity_id: reader.id, decision: 'allow', status: 200 });
  // Request ids are `<session>:<n>`: the statements of one session share its id and are numbered in order.
  const ids = ['a', 'b', 'c', 'd'].map((suffix) => String(byAlias(suffix)[0]!.request_id).split(':'));
  for (const id of ids) expect(id).toHaveLength(2);
  expect(ids[0]![0]).toBe(ids[1]![0]);
  expect(ids[2]![0]).toBe(ids[3]![0]);
  expect(ids[0]![0]).not.toBe(ids[2]![0]);
  expect(Number(ids[1]![1])).toBeGreaterThan(Number(ids[0]![1]));
  expect(Number(ids[3]![1])).toBe(Number(ids[2]![1]) + 1);
  const denied = (await wireAudit(ww)).filter((e) => e.identity_id === reader.id && e.decision === 'deny');
  expect(denied.length).toBeGreaterThan(0);
});
