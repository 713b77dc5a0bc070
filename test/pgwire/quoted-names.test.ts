// Tables whose quoted names hold dots are matched by role rules part by part through the wire: a `*.*` grant reads "my.schema"."my.table" and public."a.b", a rule naming "my.schema".* does too, and my.* does not. Before, the joined name my.schema.my.table matched no `*.*` rule and every client got 42501.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { sqlError, startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
const agents: Record<string, { id: number; key: string }> = {};

beforeAll(async () => {
  ww = await startWireWorld({
    sourceId: 'dotsrc',
    setupSql: `create schema "my.schema"; create table "my.schema"."my.table" (id int, "odd.col" text); insert into "my.schema"."my.table" values (1, 'x');
      create table "a.b" (id int); insert into "a.b" values (7); create schema my; create table my.schema (id int);`,
  });
  for (const [key, tables] of Object.entries({ stars: ['*.*'], quoted: ['"my.schema".*', 'public."a.b"'], plain: ['my.*'] })) {
    const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, { role_key: `dots-${key}`, rules: { sql: [{ operations: ['read'], tables, approval: 'never' }] } });
    if (role.status !== 201) throw new Error(role.text);
    agents[key] = await ww.world.agent(`dots-${key}`, [{ source_id: ww.sourceId, role_key: `dots-${key}` }]);
  }
}, 60_000);
afterAll(async () => ww?.stop());

test('node-postgres: *.* and a quoted rule cover dotted names; my.* does not', async () => {
  for (const who of ['stars', 'quoted']) {
    const c = await ww.client(`dots-${who}`, agents[who]!.key);
    try {
      expect((await c.query('select id, "odd.col" from "my.schema"."my.table"')).rows).toEqual([{ id: 1, 'odd.col': 'x' }]);
      expect((await c.query({ text: 'select id from "a.b" where id = $1', values: [7] })).rows).toEqual([{ id: 7 }]);
    } finally {
      await c.end();
    }
  }
  const c = await ww.client('dots-plain', agents.plain!.key);
  try {
    expect((await sqlError(c.query('select * from "my.schema"."my.table"'))).code).toBe('42501');
    expect((await c.query('select id from my.schema')).rows).toEqual([]);
  } finally {
    await c.end();
  }
});

test('psql and psycopg2 read the dotted table through a *.* grant', async () => {
  const r = await ww.psql('dots-stars', agents.stars!.key, ['-A', '-t', '-c', 'select count(*) from "my.schema"."my.table"']);
  expect(r.stderr).toBe('');
  expect(r.stdout.trim()).toBe('1');
  const script = `
import psycopg2, sys
c = psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='dots-stars', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable')
cur = c.cursor()
cur.execute('select id from "a.b"')
print(cur.fetchone()[0])
`;
  const out = await new Promise<string>((resolve) => execFile('/usr/bin/python3', ['-c', script, agents.stars!.key], { timeout: 30_000 }, (_e, stdout, stderr) => resolve(stdout + stderr)));
  expect(out.trim()).toBe('7');
});
