// Startup settings reach the upstream session as they would reach PostgreSQL — parameters, `options` -c switches (node-postgres, psql's PGOPTIONS, psycopg2's options) — except those that could escape governance, which end the login with a FATAL naming the setting; statement_timeout is bounded by the source's. Before, all but five were dropped silently.
import { execFile } from 'node:child_process';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startWireWorld, sqlError, type WireWorld } from './fixture.js';

let ww: WireWorld;
let reader: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'startsrc', sourceConfig: { statement_timeout_ms: 20_000 } });
  reader = await ww.world.agent('start-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
}, 60_000);
afterAll(async () => ww?.stop());

async function show(opts: Partial<pg.ClientConfig>, names: string[]): Promise<string[]> {
  const c = await ww.client('start-reader', reader.key, opts);
  try {
    const out: string[] = [];
    for (const n of names) out.push(Object.values((await c.query(`SHOW ${n}`)).rows[0] as Record<string, string>)[0]!);
    return out;
  } finally {
    await c.end();
  }
}

describe('node-postgres', () => {
  test('parameters and options are applied', async () => {
    const got = await show(
      {
        application_name: 'my-app',
        statement_timeout: 3000,
        idle_in_transaction_session_timeout: 4000,
        options: '-c default_transaction_isolation=serializable -c DateStyle=SQL,DMY --extra-float-digits=1',
      } as Partial<pg.ClientConfig>,
      ['application_name', 'statement_timeout', 'idle_in_transaction_session_timeout', 'default_transaction_isolation', 'DateStyle', 'extra_float_digits'],
    );
    expect(got).toEqual(['my-app', '3s', '4s', 'serializable', 'SQL, DMY', '1']);
  });

  test('no application_name is an empty one, as with PostgreSQL (not the gateway\'s)', async () => {
    expect(await show({}, ['application_name'])).toEqual(['']);
  });

  test('statement_timeout is bounded by the source\'s statement_timeout_ms, 0 (none) included', async () => {
    expect(await show({ statement_timeout: 3_600_000 } as Partial<pg.ClientConfig>, ['statement_timeout'])).toEqual(['20s']);
    expect(await show({ options: '-c statement_timeout=0' }, ['statement_timeout'])).toEqual(['20s']);
  });

  test.each([
    ['-c role=postgres', 'role'],
    ['-c session_authorization=postgres', 'session_authorization'],
    ['-c session_replication_role=replica', 'session_replication_role'],
    ['-c standard_conforming_strings=off', 'standard_conforming_strings'],
    ['-c client_encoding=SJIS', 'client_encoding'],
  ])('options %s ends the login with FATAL 42501 naming it', async (options, name) => {
    const e = await sqlError(ww.client('start-reader', reader.key, { options }));
    expect(e.code).toBe('42501');
    expect(e.message).toContain(name);
  });

  test('search_path is accepted and read as a list, as PostgreSQL reads a startup option (the session is governed under it: search-path.test.ts)', async () => {
    expect(await show({ options: '-c search_path=public' }, ['search_path'])).toEqual(['public']);
    expect(await show({ options: '-c search_path=other,public' }, ['search_path'])).toEqual(['other,public']);
    expect(await show({ options: '-c search_path="Mixed\\ Case",public' }, ['search_path'])).toEqual(['"Mixed Case",public']);
  });

  test('an unknown setting fails the login as PostgreSQL does (42704)', async () => {
    expect((await sqlError(ww.client('start-reader', reader.key, { options: '-c no_such_setting=1' }))).code).toBe('42704');
  });
});

test('psql applies PGOPTIONS', async () => {
  const r = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
    execFile(
      'psql',
      ['-X', '-A', '-t', '-h', '127.0.0.1', '-p', String(ww.port), '-U', 'start-reader', '-d', ww.sourceId, '-c', 'show lock_timeout'],
      { env: { ...process.env, PGPASSWORD: reader.key, PGSSLMODE: 'disable', PGOPTIONS: '-c lock_timeout=7s' }, timeout: 30_000 },
      (_e, stdout, stderr) => resolve({ stdout, stderr }),
    );
  });
  expect(r.stderr).toBe('');
  expect(r.stdout.trim()).toBe('7s');
});

test('psycopg2 applies options and sees a refused one as an error', async () => {
  const script = `
import psycopg2, sys
c = psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='start-reader', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable', options='-c TimeZone=Asia/Tokyo')
cur = c.cursor()
cur.execute('show TimeZone')
print(cur.fetchone()[0])
try:
    psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='start-reader', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable', options='-c session_replication_role=replica')
except psycopg2.Error as e:
    print('refused', 'session_replication_role' in str(e))
`;
  const r = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
    execFile('/usr/bin/python3', ['-c', script, reader.key], { timeout: 30_000 }, (_e, stdout, stderr) => resolve({ stdout, stderr }));
  });
  expect(r.stderr).toBe('');
  expect(r.stdout.split('\n')).toEqual(['Asia/Tokyo', 'refused True', '']);
});
