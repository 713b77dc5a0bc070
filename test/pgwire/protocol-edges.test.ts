// Protocol edges drivers meet: a Terminate before the startup packet, the process id clients see (pg_backend_pid, NOTIFY), an administrator's termination forwarded as PostgreSQL's own FATAL 57P01, a database that is not a source (3D000 saying why), and SQL with control characters in literals.
import { execFile } from 'node:child_process';
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startWireWorld, sqlError, type WireWorld } from './fixture.js';

let ww: WireWorld;
let writer: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'edgesrc' });
  // pg_backend_pid and pg_sleep are outside the built-in function allowlist: the role names them (docs/governance/sql.md).
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'edge',
    rules: { http: [], sql: [{ operations: ['read', 'write'], tables: ['public.*'], approval: 'never', functions: ['pg_backend_pid', 'pg_sleep'] }] },
  });
  if (role.status >= 300) throw new Error(role.text);
  writer = await ww.world.agent('edge-writer', [{ source_id: ww.sourceId, role_key: 'edge' }]);
}, 60_000);
afterAll(async () => ww?.stop());

function python(script: string): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('/usr/bin/python3', ['-c', script, writer.key], { timeout: 30_000 }, (_e, stdout, stderr) => resolve({ stdout, stderr }));
  });
}

const connect = `import psycopg2, sys\nc = psycopg2.connect(host='127.0.0.1', port=${0}, user='edge-writer', password=sys.argv[1], dbname='DB', sslmode='disable')\n`;
const psyConnect = (db?: string) => connect.replace(`port=${0}`, `port=${ww.port}`).replace('DB', db ?? ww.sourceId);

describe('a Terminate in the startup phase', () => {
  test('node-postgres ending a client before it connected emits no error (it sends Terminate ahead of the startup packet)', async () => {
    const c = new pg.Client({ host: '127.0.0.1', port: ww.port, user: 'edge-writer', password: writer.key, database: ww.sourceId });
    const errors: unknown[] = [];
    c.on('error', (e) => errors.push(e));
    void c.connect().catch((e: unknown) => errors.push(e));
    await c.end();
    await new Promise((r) => setTimeout(r, 200));
    expect(errors.map(String).filter((e) => !/Connection terminated/.test(e))).toEqual([]);
  });

  test('the raw bytes: the connection closes without an error message', async () => {
    const got = await new Promise<Buffer>((resolve) => {
      const s = net.connect(ww.port, '127.0.0.1', () => s.write(Buffer.from([0x58, 0, 0, 0, 4])));
      const chunks: Buffer[] = [];
      s.on('data', (d) => chunks.push(d));
      s.on('close', () => resolve(Buffer.concat(chunks)));
    });
    expect(got.length).toBe(0);
  });
});

describe('the process id', () => {
  test('BackendKeyData, pg_backend_pid() and a NOTIFY sender are the same id (node-postgres)', async () => {
    const c = await ww.client('edge-writer', writer.key);
    try {
      const pid = (c as unknown as { processID: number }).processID;
      expect((await c.query('select pg_backend_pid() as p')).rows[0].p).toBe(pid);
      const note = new Promise<pg.Notification>((resolve) => c.on('notification', resolve));
      await c.query('LISTEN edges');
      await c.query("NOTIFY edges, 'x'");
      expect((await note).processId).toBe(pid);
    } finally {
      await c.end();
    }
  });

  test('psycopg2 sees the same id in get_backend_pid() and pg_backend_pid()', async () => {
    const r = await python(`${psyConnect()}cur = c.cursor()\ncur.execute('select pg_backend_pid()')\nprint(cur.fetchone()[0] == c.get_backend_pid())\n`);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('True');
  });

  test('a cancel with that id reaches the statement', async () => {
    const c = await ww.client('edge-writer', writer.key);
    try {
      const slow = sqlError(c.query('select pg_sleep(10)'));
      await new Promise((r) => setTimeout(r, 300));
      const canceller = new pg.Client({ host: '127.0.0.1', port: ww.port, user: 'edge-writer', password: writer.key, database: ww.sourceId });
      (canceller as unknown as { cancel(c: pg.Client, q: unknown): void }).cancel(c, (c as unknown as { activeQuery: unknown }).activeQuery);
      expect((await slow).code).toBe('57014');
    } finally {
      await c.end();
    }
  });
});

describe('an administrator terminating the backend', () => {
  test('node-postgres gets PostgreSQL\'s FATAL 57P01, not the gateway\'s 08006', async () => {
    const c = await ww.client('edge-writer', writer.key);
    const pid = (c as unknown as { processID: number }).processID;
    const err = sqlError(c.query('select pg_sleep(5)')) as Promise<{ code?: string; message: string; severity?: string }>;
    await new Promise((r) => setTimeout(r, 200));
    await ww.direct((d) => d.query('select pg_terminate_backend($1)', [pid]));
    const e = await err;
    expect(e.code).toBe('57P01');
    expect(e.severity).toBe('FATAL');
    expect(e.message).toBe('terminating connection due to administrator command');
  });

  // libpq (psycopg2 too) reports a terminated backend by its message only, with no SQLSTATE even straight from PostgreSQL.
  test('psql prints PostgreSQL\'s FATAL message', async () => {
    const run = ww.psql('edge-writer', writer.key, ['-c', 'select pg_sleep(5)']);
    let pid: number | undefined;
    for (let i = 0; i < 50 && pid === undefined; i++) {
      await new Promise((r) => setTimeout(r, 100));
      pid = await ww.direct(async (d) => (await d.query("select pid from pg_stat_activity where query = 'select pg_sleep(5)'")).rows[0]?.pid as number | undefined);
    }
    await ww.direct((d) => d.query('select pg_terminate_backend($1)', [pid]));
    const r = await run;
    expect(r.stderr).toContain('FATAL:  terminating connection due to administrator command');
    expect(r.stderr).not.toContain('upstream connection was lost');
  });
});

describe('a database that is not a source', () => {
  test('3D000 says why (node-postgres, psql)', async () => {
    const e = await sqlError(ww.client('edge-writer', writer.key, { database: 'template1' }));
    expect(e.code).toBe('3D000');
    expect(e.detail).toMatch(/only|sources/);
    const p = await ww.psql('edge-writer', writer.key, ['-d', 'template1', '-c', 'select 1']);
    expect(p.stderr).toContain('does not exist');
    expect(p.stderr).toMatch(/DETAIL:.*sources/);
  });
});

describe('control characters inside literals', () => {
  const value = `a${String.fromCharCode(1)}b${String.fromCharCode(27)}c`;
  test('node-postgres, simple and extended protocol', async () => {
    const c = await ww.client('edge-writer', writer.key);
    try {
      expect((await c.query(`select '${value}' as v`)).rows[0].v).toBe(value);
      expect((await c.query(`select '${value}' || $1 as v`, ['!'])).rows[0].v).toBe(`${value}!`);
    } finally {
      await c.end();
    }
  });

  test('psycopg2 and psql', async () => {
    const r = await python(`${psyConnect()}cur = c.cursor()\ncur.execute("select 'a\\x01b'")\nprint(repr(cur.fetchone()[0]))\n`);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe("'a\\x01b'");
    const p = await ww.psql('edge-writer', writer.key, ['-A', '-t', '-c', `select length('${value}')`]);
    expect(p.stderr).toBe('');
    expect(p.stdout.trim()).toBe('5');
  });
});
