// PostgreSQL must read every statement the way the gateway governed it: UTF8 only (in BIG5, GBK or SJIS a character can end in the byte of a backslash and hide a quote) and standard conforming strings (off, 'a\'' ends where the gateway reads '' continuing it). Other settings are refused at startup, by statement and, if a function changes them, by ending the session.
import { execFile } from 'node:child_process';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startWireWorld, wireAudit, sqlError, type WireWorld } from './fixture.js';

let ww: WireWorld;
let reader: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({
    setupSql: `create table customers (id int primary key, name text);
      insert into customers values (1, 'Ada');
      create function sneaky_encoding() returns text language sql as $$ select set_config('client_encoding', 'BIG5', false) $$;
      create function sneaky_strings() returns text language sql as $$ select set_config('standard_conforming_strings', 'off', false) $$;`,
  });
  // The functions are the source's own: deny by default refuses them unless a role names them. This role does, so the
  // session's own defence (ending a session whose encoding changed) is what these tests still reach.
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'sneaky-caller',
    rules: { sql: [{ operations: ['read'], tables: ['*.*'], functions: ['sneaky_encoding', 'sneaky_strings'] }] },
  });
  if (role.status !== 201) throw new Error(role.text);
  reader = await ww.world.agent('enc-reader', [{ source_id: ww.sourceId, role_key: 'reader' }, { source_id: ww.sourceId, role_key: 'sneaky-caller' }]);
}, 60_000);
afterAll(async () => ww?.stop());

// psycopg2 encodes the statement in the connection's client encoding: U+4E48 is A4 5C in BIG5, U+4E57 is 81 5C in
// GBK, U+4E88 is 97 5C in SJIS. Read as UTF8, the gateway sees E'<U+FFFD>\'; …' — one string literal, a harmless
// SELECT; read in BIG5, PostgreSQL sees E'<char>' and then an INSERT.
const SMUGGLE = `
import sys, psycopg2
try:
    conn = psycopg2.connect(host='127.0.0.1', port=int(sys.argv[1]), user='enc-reader', password=sys.argv[2], dbname=sys.argv[3], sslmode='disable', client_encoding=sys.argv[4])
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("select E'" + chr(int(sys.argv[5], 16)) + "'; insert into customers(id, name) select 999, current_user; -- '")
    print('EXECUTED')
except Exception as e:
    print('ERROR', getattr(e, 'pgcode', None), str(e).strip().splitlines()[0])
`;

function smuggle(encoding: string, codepoint: string): Promise<string> {
  return new Promise((resolve) =>
    execFile('/usr/bin/python3', ['-c', SMUGGLE, String(ww.port), reader.key, ww.sourceId, encoding, codepoint], { timeout: 30_000 }, (_err, stdout, stderr) => resolve(`${stdout}${stderr}`.trim())),
  );
}

const smuggledRows = () => ww.direct(async (c) => (await c.query<{ n: number }>('select count(*)::int as n from customers where id = 999')).rows[0]!.n);


/**
 * Runs `check` on four sessions opened while the source database has the given defaults (`ALTER DATABASE … <set>`),
 * then resets them: four at once, so that some need new upstream connections, which start with those defaults.
 */
async function withDatabaseDefaults(sets: readonly string[], check: (c: pg.Client) => Promise<void>): Promise<void> {
  for (const set of sets) await ww.direct((d) => d.query(`alter database "${ww.upstream.name}" ${set}`));
  try {
    const clients = await Promise.all(Array.from({ length: 4 }, () => ww.client('enc-reader', reader.key)));
    try {
      for (const c of clients) await check(c);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  } finally {
    await ww.direct((d) => d.query(`alter database "${ww.upstream.name}" reset all`));
  }
}

describe('client encodings', () => {
  test('a startup client_encoding other than UTF8 is refused (22023), so a BIG5/GBK/SJIS smuggle never reaches PostgreSQL', async () => {
    for (const [encoding, codepoint] of [['BIG5', '4e48'], ['GBK', '4e57'], ['SJIS', '4e88'], ['LATIN1', 'e9']] as const) {
      const out = await smuggle(encoding, codepoint);
      expect(out, encoding).toMatch(/speaks UTF8 only/);
    }
    expect(await smuggledRows()).toBe(0);
  });

  test('UTF8 and SQL_ASCII clients connect, and the same statement is governed as the INSERT it contains', async () => {
    for (const encoding of ['UTF8', 'SQL_ASCII', 'utf-8']) {
      const out = await smuggle(encoding, '4e48');
      expect(out, encoding).toMatch(/^ERROR 42501/);
    }
    expect(await smuggledRows()).toBe(0);
  });

  test('statements that change client_encoding are refused; SET to UTF8 itself is harmless and allowed', async () => {
    const c = await ww.client('enc-reader', reader.key);
    try {
      for (const sql of [`set client_encoding to 'BIG5'`, `set names 'GBK'`, `set local client_encoding = sjis`, `reset client_encoding`, `select set_config('client_encoding', 'BIG5', false)`, `select set_config('CLIENT_ENCODING', 'big5', true)`]) {
        const err = await sqlError(c.query(sql));
        expect(err.code, sql).toBe('42501');
        expect(err.message, sql).toBe('Changing client_encoding is not allowed through the gateway: it speaks UTF8 only.');
      }
      // A setting named by an expression may be any setting: refused as every session escape it could be.
      const dynamic = await sqlError(c.query(`select set_config(current_setting('application_name'), 'BIG5', false)`));
      expect(dynamic.code).toBe('42501');
      expect(dynamic.message).toMatch(/is not allowed through the gateway/);
      await c.query(`set client_encoding to 'UTF8'`);
      expect((await c.query('show client_encoding')).rows).toEqual([{ client_encoding: 'UTF8' }]);
    } finally {
      await c.end();
    }
    // Each refusal is audited and attributed to the session's identity, although it came before the role check.
    const refused = (await wireAudit(ww)).filter((e) => e.identity_id === reader.id && (e.reasons as string[]).includes('encoding_change refused'));
    expect(refused).toHaveLength(6);
    for (const e of refused) expect(e).toMatchObject({ decision: 'deny', status: 403 });
  });

  test('standard_conforming_strings stays on: turning it off is refused, so the backslash-quote smuggle stays the one string literal the gateway read', async () => {
    const c = await ww.client('enc-reader', reader.key);
    try {
      for (const sql of [`set standard_conforming_strings = off`, `set standard_conforming_strings to false`, `set standard_conforming_strings to default`, `reset standard_conforming_strings`, `select set_config('standard_conforming_strings', 'off', false)`]) {
        const err = await sqlError(c.query(sql));
        expect(err.code, sql).toBe('42501');
        expect(err.message, sql).toBe('Turning standard_conforming_strings off is not allowed through the gateway.');
      }
      await c.query(`set standard_conforming_strings = on`);
      // With the setting off, PostgreSQL would read 'a\'' as the literal a' and run the INSERT; on, it reads the one
      // literal the gateway read and governed: a SELECT of a string.
      const smuggled = await c.query(`select 'a\\''; insert into customers(id, name) select 998, current_user; -- ' as literal`);
      expect(smuggled.rows).toEqual([{ literal: `a\\'; insert into customers(id, name) select 998, current_user; -- ` }]);
      expect((await c.query('show standard_conforming_strings')).rows).toEqual([{ standard_conforming_strings: 'on' }]);
    } finally {
      await c.end();
    }
    expect(await ww.direct(async (d) => (await d.query<{ n: number }>('select count(*)::int as n from customers where id = 998')).rows[0]!.n)).toBe(0);
  });

  test('a database default cannot change how upstream sessions read statements: the gateway starts them UTF8 with standard conforming strings', async () => {
    await withDatabaseDefaults([`set standard_conforming_strings = off`, `set client_encoding = 'BIG5'`], async (c) => {
      expect((await c.query('show standard_conforming_strings')).rows).toEqual([{ standard_conforming_strings: 'on' }]);
      expect((await c.query('show client_encoding')).rows).toEqual([{ client_encoding: 'UTF8' }]);
    });
  });

  test('unqualified names resolve in public, where the gateway governs them, whatever the database search_path', async () => {
    // A schema shadowing customers, first on the database's search_path (and a schema named after a role would be
    // first on PostgreSQL's default "$user", public).
    await ww.direct((d) => d.query(`create schema if not exists shadow; create table if not exists shadow.customers (id int, name text); insert into shadow.customers values (42, 'shadowed')`));
    await withDatabaseDefaults(['set search_path = shadow, public'], async (c) => {
      expect((await c.query('show search_path')).rows).toEqual([{ search_path: 'public' }]);
      expect((await c.query('select name from customers where id = 1')).rows).toEqual([{ name: 'Ada' }]);
    });
  });

  test.each([
    ['turns standard_conforming_strings off', 'select sneaky_strings()', 'show standard_conforming_strings', { standard_conforming_strings: 'on' }],
    ['switches the encoding', 'select sneaky_encoding()', 'show client_encoding', { client_encoding: 'UTF8' }],
  ])('a function that %s ends the session, and its upstream connection is not reused', async (_what, call, show, expected) => {
    const c = await ww.client('enc-reader', reader.key);
    c.on('error', () => undefined);
    const err = await sqlError(c.query(call));
    expect(err.message).toMatch(/left UTF8 or standard_conforming_strings/);
    await c.end().catch(() => undefined);
    // The next sessions read SQL as governed, whatever connection the pool gives them.
    for (let i = 0; i < 3; i++) {
      const next = await ww.client('enc-reader', reader.key);
      expect((await next.query(show)).rows).toEqual([expected]);
      await next.end();
    }
  });
});
