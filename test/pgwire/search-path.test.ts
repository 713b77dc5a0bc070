// SET search_path (SET, SET LOCAL, SET SCHEMA, set_config, RESET, rollback of either) is allowed on a wire session and every later statement is governed under the path PostgreSQL then holds: an unqualified name must be allowed in every schema it may resolve in. Before, every change but `= public` was refused (42501).
import { execFile } from 'node:child_process';
import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { bindMessage, executeMessage, parseMessage, queryMessage, syncMessage } from '../../src/gateway/pgwire/protocol.js';
import { openRawSession, sqlError, startWireWorld, type WireWorld } from './fixture.js';

const MAPPED = 'gh_sp_mapped';
const SETUP = `
create table users (id int primary key, name text, ssn text);
insert into users values (1, 'pub', '111-11-1111');
create schema secret;
create table secret.users (id int primary key, name text, ssn text);
insert into secret.users values (1, 'sec', '999-99-9999');
create schema app;
create table app.orders (id int primary key, item text);
insert into app.orders values (1, 'lamp');
create schema "Mixed Case";
create table "Mixed Case".users (id int, name text);
insert into "Mixed Case".users values (1, 'mixed');
`;

let ww: WireWorld;
let pub: { id: number; key: string };
let pubWriter: { id: number; key: string };
let appReader: { id: number; key: string };
let appDdl: { id: number; key: string };
let secretReader: { id: number; key: string };
let mapped: { id: number; key: string };

async function role(role_key: string, sql: unknown[]): Promise<void> {
  const r = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, { role_key, rules: { sql } });
  if (r.status >= 300) throw new Error(`role: ${r.status} ${r.text}`);
}

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'pathsrc', setupSql: SETUP });
  await ww.direct(async (c) => {
    await c.query(`do $$ begin if not exists (select from pg_roles where rolname = '${MAPPED}') then create role ${MAPPED}; end if; end $$`);
    await c.query(`drop schema if exists ${MAPPED} cascade; create schema ${MAPPED}; create table ${MAPPED}.users (id int, name text)`);
    await c.query(`grant usage on schema ${MAPPED}, secret, app to ${MAPPED}; grant select on all tables in schema public, ${MAPPED}, secret to ${MAPPED}`);
  });
  await role('public-reader', [{ operations: ['read'], tables: ['public.*'], approval: 'never' }]);
  await role('public-writer', [{ operations: ['read', 'write'], tables: ['public.*'], approval: 'never' }]);
  await role('app-reader', [{ operations: ['read'], tables: ['public.*', 'app.*'], approval: 'never' }]);
  await role('app-ddl', [{ operations: ['read', 'ddl'], tables: ['app.*'], approval: 'never' }]);
  await role('secret-reader', [{ operations: ['read'], tables: ['public.*', 'secret.*'], approval: 'never' }]);
  pub = await ww.world.agent('sp-public', [{ source_id: ww.sourceId, role_key: 'public-reader' }]);
  pubWriter = await ww.world.agent('sp-public-writer', [{ source_id: ww.sourceId, role_key: 'public-writer' }]);
  appReader = await ww.world.agent('sp-app', [{ source_id: ww.sourceId, role_key: 'app-reader' }]);
  appDdl = await ww.world.agent('sp-app-ddl', [{ source_id: ww.sourceId, role_key: 'app-ddl' }]);
  secretReader = await ww.world.agent('sp-secret', [{ source_id: ww.sourceId, role_key: 'secret-reader' }]);
  mapped = await ww.world.agent('sp-mapped', [{ source_id: ww.sourceId, role_key: 'public-reader' }], { mapped_pg_role: MAPPED });
  await ww.world.policy({ name: 'redact secret ssn', conditions: { identity_ids: [secretReader.id] }, actions: { effect: 'allow', redact_columns: ['secret.users.ssn'], pii_mode: 'off' } });
}, 90_000);
afterAll(async () => ww?.stop());

async function withClient<T>(user: string, key: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = await ww.client(user, key);
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function names(c: pg.Client, sql = 'select name from users'): Promise<string[]> {
  return (await c.query(sql)).rows.map((r: { name: string }) => r.name);
}

/** A spelling of "the path now includes secret" as PostgreSQL accepts it: keyword case, `=`/`TO`, quoting, comments, lists. */
const secretSpelling = fc
  .tuple(
    fc.constantFrom(
      'SET search_path = %',
      'SET search_path TO %',
      'SET SESSION search_path = %',
      'set Search_Path to %',
      "SELECT set_config('search_path', '%Q', false)",
      "select pg_catalog.set_config('SEARCH_PATH', '%Q', 'off')",
      "SET SCHEMA 'secret'",
    ),
    fc.constantFrom(['secret'], ['secret', 'public'], ['public', 'secret'], ['"secret"'], ['app', 'secret'], ["'secret'", 'public'], ['secret', '"$user"']),
    fc.constantFrom('', ' ', '/* path */ ', '\n\t', '-- c\n'),
  )
  .map(([form, list, pad]) => {
    const text = form.replace('%Q', list.map((s) => s.replace(/'/g, '')).join(', ')).replace('%', list.join(' , '));
    return pad + text;
  });

describe('a grant on public.* only', () => {
  test('every spelling that puts secret on the path is allowed, and then secret.users is unreachable unqualified (42501)', async () => {
    await withClient('sp-public', pub.key, async (c) => {
      await fc.assert(
        fc.asyncProperty(secretSpelling, fc.boolean(), async (set, extended) => {
          await c.query('RESET search_path');
          await c.query(set);
          const err = await sqlError(extended ? c.query('select name, ssn from users where id = $1', [1]) : c.query('select name from users'));
          expect(err.code, set).toBe('42501');
          expect(err.message, set).toMatch(/No source role allows/);
          // Qualified, public stays reachable; the session itself is fine.
          expect(await names(c, 'select name from public.users')).toEqual(['pub']);
        }),
        { numRuns: 40 },
      );
      await c.query('RESET search_path');
      expect(await names(c)).toEqual(['pub']);
    });
  });

  test('RESET, SET … TO DEFAULT, = public, RESET ALL and DISCARD ALL return to public', async () => {
    await withClient('sp-public', pub.key, async (c) => {
      for (const back of ['RESET search_path', 'SET search_path TO DEFAULT', 'SET search_path = public', 'RESET ALL', 'DISCARD ALL', "select set_config('search_path', 'public', false)"]) {
        await c.query('SET search_path = secret');
        expect((await sqlError(c.query('select name from users'))).code, back).toBe('42501');
        await c.query(back);
        expect(await names(c), back).toEqual(['pub']);
      }
    });
  });

  test('transactions: ROLLBACK undoes SET, COMMIT ends SET LOCAL, ROLLBACK TO undoes what followed the savepoint, RELEASE keeps it, a failed block changes nothing', async () => {
    await withClient('sp-public', pub.key, async (c) => {
      const refused = async (why: string) => expect((await sqlError(c.query('select name from users'))).code, why).toBe('42501');
      await c.query('BEGIN');
      await c.query('SET search_path = secret');
      await refused('inside the block');
      await c.query('ROLLBACK');
      expect(await names(c)).toEqual(['pub']);

      await c.query('BEGIN');
      await c.query('SET LOCAL search_path = secret');
      await refused('SET LOCAL inside the block');
      await c.query('COMMIT');
      expect(await names(c)).toEqual(['pub']);

      await c.query('BEGIN');
      await c.query("select set_config('search_path', 'secret', true)");
      await refused('set_config local inside the block');
      await c.query('COMMIT');
      expect(await names(c)).toEqual(['pub']);

      // SET LOCAL outside a block lasts for its own statement only (PostgreSQL warns).
      await c.query('SET LOCAL search_path = secret');
      expect(await names(c)).toEqual(['pub']);

      await c.query('BEGIN');
      await c.query('SAVEPOINT a');
      await c.query('SET search_path = secret');
      await c.query('ROLLBACK TO SAVEPOINT a');
      expect(await names(c)).toEqual(['pub']);
      await c.query('SET search_path = secret');
      await c.query('RELEASE a');
      await c.query('COMMIT');
      await refused('RELEASE then COMMIT keeps the SET');
      await c.query('RESET search_path');

      await c.query('BEGIN');
      await sqlError(c.query('select 1/0'));
      expect((await sqlError(c.query('SET search_path = secret'))).code).toBe('25P02');
      await c.query('ROLLBACK');
      expect(await names(c)).toEqual(['pub']);

      // SET then SET LOCAL: the SET is what a commit keeps.
      await c.query('BEGIN');
      await c.query('SET search_path = secret');
      await c.query('SET LOCAL search_path = public');
      expect(await names(c)).toEqual(['pub']);
      await c.query('COMMIT');
      await refused('the SET outlives the SET LOCAL');
      await c.query('RESET search_path');
    });
  });

  test('a query string that sets the path and reads in one go is governed under both paths: refused whole, nothing runs', async () => {
    await withClient('sp-public', pub.key, async (c) => {
      expect((await sqlError(c.query('SET search_path = secret; select name from users'))).code).toBe('42501');
      expect((await c.query('show search_path')).rows[0].search_path).toBe('public');
      // A path that adds only granted schemas is fine.
      await c.query('SET search_path = public, public');
      expect(await names(c)).toEqual(['pub']);
    });
  });

  test('a prepared statement allowed under public is decided again under the new path (extended protocol and SQL EXECUTE)', async () => {
    await withClient('sp-public-writer', pubWriter.key, async (c) => {
      const q = { name: 'byid', text: 'select name from users where id = $1', values: [1] };
      expect((await c.query(q)).rows).toEqual([{ name: 'pub' }]);
      await c.query('SET search_path = secret');
      expect((await sqlError(c.query(q))).code).toBe('42501');
      await c.query('RESET search_path');
      expect((await c.query(q)).rows).toEqual([{ name: 'pub' }]);

      await c.query('PREPARE p AS select name from users');
      expect((await c.query('EXECUTE p')).rows).toEqual([{ name: 'pub' }]);
      await c.query('SET search_path = secret');
      const err = await sqlError(c.query('EXECUTE p'));
      expect(err.code).toBe('42501');
      expect(err.message).toMatch(/another search_path/);
    });
  });

  test('a portal bound under one path is governed under it even when the path changes before its Execute', async () => {
    // Raw protocol: Bind under public, then SET search_path = secret as a simple statement is not possible mid-batch;
    // the extended SET in the same batch is: Parse/Bind P1, Parse/Bind/Execute SET, Execute P1, Sync.
    const s = await openRawSession(ww, 'sp-public', pub.key);
    try {
      const out = await s.send(
        parseMessage('s1', 'select name from users'),
        bindMessage('p1', 's1', []),
        parseMessage('', 'SET search_path = secret'),
        bindMessage('', '', []),
        executeMessage('', 0),
        executeMessage('p1', 0),
        syncMessage(),
      );
      // p1 was planned under public (allowed), and it is decided under both paths (the SET may or may not have run): refused.
      expect(out.errors).toEqual(['42501']);
      // The refusal rolled the batch's implicit transaction back: the SET did not stay.
      const after = await s.send(queryMessage('select name from users'));
      expect(after.errors).toEqual([]);
    } finally {
      await s.close();
    }
  });

  test('$user is the session role: a schema named after the mapped role is not public', async () => {
    await withClient('sp-mapped', mapped.key, async (c) => {
      expect(await names(c)).toEqual(['pub']);
      await c.query('SET search_path = "$user", public');
      expect((await sqlError(c.query('select name from users'))).code).toBe('42501');
      await c.query('SET search_path = public, "$user"');
      expect((await sqlError(c.query('select name from users'))).code).toBe('42501');
    });
  });

  test('quoted names are schema names as written: "Mixed Case" is not public', async () => {
    await withClient('sp-public', pub.key, async (c) => {
      await c.query('SET search_path = "Mixed Case"');
      expect((await sqlError(c.query('select name from users'))).code).toBe('42501');
      await c.query(`select set_config('search_path', '"Mixed Case"', false)`);
      expect((await sqlError(c.query('select name from users'))).code).toBe('42501');
    });
  });

  test('pg_catalog searched after another schema: unqualified built-ins are no longer trusted', async () => {
    await withClient('sp-public', pub.key, async (c) => {
      expect((await c.query("select lower('A') as l")).rows).toEqual([{ l: 'a' }]);
      await c.query('SET search_path = public, pg_catalog');
      expect((await sqlError(c.query("select lower('A') as l"))).code).toBe('42501');
      expect((await c.query("select pg_catalog.lower('A') as l")).rows).toEqual([{ l: 'a' }]);
      await c.query('SET search_path = pg_catalog, public');
      expect((await c.query("select lower('A') as l")).rows).toEqual([{ l: 'a' }]);
      expect(await names(c)).toEqual(['pub']);
    });
  });

  test('set_config whose value or running the gateway cannot know is refused', async () => {
    await withClient('sp-public', pub.key, async (c) => {
      for (const [sql, values] of [
        ["select set_config('search_path', $1, false)", ['secret']],
        ["select set_config('search_path', 'secret', false) from users", []],
        ["select set_config('search_path', 'secret', false) where false", []],
        ["select coalesce(set_config('search_path', 'secret', false), 'x')", []],
        ["select set_config(lower('SEARCH_PATH'), 'secret', false)", []],
        ["select (select set_config('search_path', 'secret', false))", []],
        ["select set_config('search_path', 'secret', $1::bool)", [false]],
      ] as const) {
        expect((await sqlError(c.query(sql, [...values]))).code, sql).toBe('42501');
      }
      expect(await names(c)).toEqual(['pub']);
      // FROM CURRENT keeps the value in effect.
      await c.query('SET search_path FROM CURRENT');
      expect(await names(c)).toEqual(['pub']);
    });
  });
});

describe('grants on several schemas', () => {
  test('a name is allowed when every schema of the path is granted, and reads the table PostgreSQL finds first', async () => {
    await withClient('sp-app', appReader.key, async (c) => {
      await c.query('SET search_path = app, public');
      expect((await c.query('select item from orders')).rows).toEqual([{ item: 'lamp' }]);
      expect(await names(c)).toEqual(['pub']);
      await c.query('SET search_path = app, secret');
      expect((await sqlError(c.query('select item from orders'))).code).toBe('42501');
    });
  });

  test('CREATE without a schema needs the DDL grant in every schema of the path (it creates in the first that exists)', async () => {
    await withClient('sp-app-ddl', appDdl.key, async (c) => {
      await c.query('SET search_path = app, public');
      expect((await sqlError(c.query('create table made_here (a int)'))).code).toBe('42501');
      await c.query('SET search_path = app');
      await c.query('create table made_here (a int)');
    });
    expect(await ww.direct(async (d) => (await d.query("select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where relname = 'made_here'")).rows)).toEqual([{ nspname: 'app' }]);
  });

  test('redaction of secret.users applies to the unqualified spelling under the path', async () => {
    await withClient('sp-secret', secretReader.key, async (c) => {
      // Result columns named otherwise than the redacted column: only provenance (which table feeds them) decides.
      const spellings = ['select lower(ssn) as x from users', 'select u.ssn as x from users u', 'select (select ssn from users) as x', 'with w as (select * from users) select ssn as x from w'];
      for (const sql of spellings) expect((await c.query(sql)).rows, `public: ${sql}`).toEqual([{ x: '111-11-1111' }]);
      await c.query('SET search_path = secret, public');
      for (const sql of spellings) {
        const rows = (await c.query(sql)).rows as { x: string | null }[];
        expect(rows.length, sql).toBe(1);
        expect(rows[0]!.x ?? '', sql).not.toMatch(/999-99|111-11/);
      }
      expect((await c.query('select name from users')).rows).toEqual([{ name: 'sec' }]);
      // A later schema of the path is searched only when the earlier ones lack the name: public.users is read in clear.
      await c.query('SET search_path = public, secret');
      expect((await c.query('select lower(ssn) as x from users')).rows).toEqual([{ x: '111-11-1111' }]);
    });
  });
});

describe('startup options and resets', () => {
  test('-c search_path=secret at login governs the session under it; RESET ALL and DISCARD ALL return to it', async () => {
    const c = await ww.client('sp-public', pub.key, { options: '-c search_path=secret' } as never);
    try {
      expect((await c.query('show search_path')).rows[0].search_path).toBe('secret');
      expect((await sqlError(c.query('select name from users'))).code).toBe('42501');
      await c.query('SET search_path = public');
      expect(await names(c)).toEqual(['pub']);
      for (const reset of ['RESET ALL', 'DISCARD ALL', 'RESET search_path']) {
        await c.query(reset);
        expect((await c.query('show search_path')).rows[0].search_path, reset).toBe(reset === 'RESET search_path' ? 'secret' : 'secret');
        expect((await sqlError(c.query('select name from users'))).code, reset).toBe('42501');
        await c.query('SET search_path = public');
      }
      // A string ending in RESET ALL: the statements before it run under public, the next one under the startup path.
      expect((await c.query('select name from users; RESET ALL')) as unknown as pg.QueryResult[]).toHaveLength(2);
      expect((await sqlError(c.query('select name from users'))).code).toBe('42501');
    } finally {
      await c.end();
    }
    const allowed = await ww.client('sp-secret', secretReader.key, { options: '-c search_path=secret,public' } as never);
    try {
      expect((await allowed.query('select name from users')).rows).toEqual([{ name: 'sec' }]);
    } finally {
      await allowed.end();
    }
  });

  test('a DISCARD ALL PostgreSQL skips in a failed batch, or refuses in a block, leaves the statement names in place', async () => {
    const s = await openRawSession(ww, 'sp-public', pub.key);
    try {
      expect((await s.send(parseMessage('kept', 'select 1'), syncMessage())).errors).toEqual([]);
      const batch = await s.send(parseMessage('', 'select 1/0'), bindMessage('', '', []), executeMessage('', 0), parseMessage('', 'DISCARD ALL'), bindMessage('', '', []), executeMessage('', 0), syncMessage());
      expect(batch.errors).toEqual(['22012']);
      expect((await s.send(bindMessage('', 'kept', []), executeMessage('', 0), syncMessage())).errors).toEqual([]);
      expect((await s.send(queryMessage('begin'))).errors).toEqual([]);
      expect((await s.send(parseMessage('', 'DISCARD ALL'), bindMessage('', '', []), executeMessage('', 0), syncMessage())).errors).toEqual(['25001']);
      expect((await s.send(queryMessage('rollback'))).errors).toEqual([]);
      expect((await s.send(bindMessage('', 'kept', []), executeMessage('', 0), syncMessage())).errors).toEqual([]);
      // Completed, it drops them, as PostgreSQL does.
      expect((await s.send(parseMessage('', 'DISCARD ALL'), bindMessage('', '', []), executeMessage('', 0), syncMessage())).errors).toEqual([]);
      expect((await s.send(bindMessage('', 'kept', []), executeMessage('', 0), syncMessage())).errors).toEqual(['26000']);
    } finally {
      await s.close();
    }
  });
});

describe('other clients', () => {
  test('psql: SET search_path then an unqualified read of a schema the grant does not cover is 42501', async () => {
    const r = await ww.psql('sp-public', pub.key, ['-v', 'VERBOSITY=verbose', '-c', 'SET search_path = secret', '-c', 'select name from users', '-c', 'RESET search_path', '-c', 'select name from users']);
    expect(r.stderr).toMatch(/42501/);
    expect(r.stdout).toMatch(/pub/);
    expect(r.stdout).not.toMatch(/sec\b/);
  });

  test('psycopg2: set_config and SET SCHEMA, then the read is refused with 42501', async () => {
    const script = `
import psycopg2, sys
c = psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='sp-public', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable')
c.autocommit = True
cur = c.cursor()
for s in ["select set_config('search_path', 'secret', false)", "SET SCHEMA 'secret'"]:
    cur.execute(s)
    try:
        cur.execute('select name from users')
        print('READ', cur.fetchall())
    except psycopg2.Error as e:
        print('refused', e.pgcode)
    cur.execute('reset search_path')
cur.execute('select name from users')
print('back', cur.fetchall())
`;
    const out = await new Promise<string>((resolve, reject) =>
      execFile('/usr/bin/python3', ['-c', script, pub.key], { timeout: 30_000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(stdout))),
    );
    expect(out).toBe("refused 42501\nrefused 42501\nback [('pub',)]\n");
  });
});
