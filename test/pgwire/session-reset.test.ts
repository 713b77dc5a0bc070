// Session resets (DISCARD ALL, RESET ALL, RESET ROLE, SET ROLE NONE, … SESSION AUTHORIZATION DEFAULT) are allowed on a wire session and never leave it outside its governed state: the relay re-applies the mapped role and the client's startup settings before the client's next statement runs. Before, every one of them was refused (42501), so pools that reset between borrowers failed.
import { execFile } from 'node:child_process';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { sqlError, startWireWorld, type WireWorld } from './fixture.js';

const MAPPED = 'gh_wire_mapped';
let ww: WireWorld;
let mapped: { id: number; key: string };
let plain: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'resetsrc', sourceConfig: { statement_timeout_ms: 20_000 } });
  await ww.direct(async (c) => {
    await c.query(`do $$ begin if not exists (select from pg_roles where rolname = '${MAPPED}') then create role ${MAPPED}; end if; end $$`);
    await c.query(`grant select on customers to ${MAPPED}`);
  });
  mapped = await ww.world.agent('reset-mapped', [{ source_id: ww.sourceId, role_key: 'reader' }], { mapped_pg_role: MAPPED });
  plain = await ww.world.agent('reset-plain', [{ source_id: ww.sourceId, role_key: 'reader' }]);
}, 60_000);
afterAll(async () => ww?.stop());

/** Role resets in the spellings PostgreSQL accepts: case, `=`/`TO`, SESSION/LOCAL, quoted none, comments. */
const roleReset = fc
  .tuple(
    fc.constantFrom('RESET ROLE', 'SET ROLE NONE', "SET ROLE 'none'", 'SET ROLE "none"', 'SET SESSION ROLE NONE', 'SET LOCAL ROLE NONE', 'SET role TO DEFAULT', 'SET role = DEFAULT', 'RESET SESSION AUTHORIZATION', 'SET SESSION AUTHORIZATION DEFAULT', 'SET session_authorization TO DEFAULT', 'RESET session_authorization', 'DISCARD ALL', 'RESET ALL'),
    fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }),
    fc.constantFrom('', ' ', '/* c */ ', '\n'),
  )
  .map(([text, upper, pad]) => pad + [...text].map((ch, i) => (text.includes("'none'") || text.includes('"none"') ? ch : upper[i % 40] ? ch.toUpperCase() : ch.toLowerCase())).join(''));

describe('node-postgres, an identity with a mapped role', () => {
  test('every spelling of a role or session reset is allowed and the session keeps its mapped role and settings', async () => {
    const c = await ww.client('reset-mapped', mapped.key, { application_name: 'pool-app', options: '-c TimeZone=Asia/Tokyo' } as never);
    try {
      await fc.assert(
        fc.asyncProperty(roleReset, fc.boolean(), async (stmt, inBlock) => {
          // A failed run leaves no open block behind for the next (or the shrinker's) run.
          await c.query('ROLLBACK');
          if (inBlock) await c.query('BEGIN');
          if (!(inBlock && /discard/i.test(stmt))) await c.query(stmt);
          const r = await c.query('select current_user as u, session_user = current_user as same');
          const tz = (await c.query('show TimeZone')).rows[0].TimeZone;
          const app = (await c.query('show application_name')).rows[0].application_name;
          if (inBlock) await c.query('COMMIT');
          expect({ ...r.rows[0], tz, app }).toEqual({ u: MAPPED, same: false, tz: 'Asia/Tokyo', app: 'pool-app' });
          // The database's own privileges still apply: the mapped role may read customers, not notes.
          expect((await sqlError(c.query('select * from notes'))).code).toBe('42501');
        }),
        { numRuns: 40 },
      );
    } finally {
      await c.end();
    }
  });

  test('a reset through the extended protocol (a named prepared statement) is re-applied inside the batch', async () => {
    const c = await ww.client('reset-mapped', mapped.key);
    try {
      for (const [i, text] of ['RESET ROLE', 'DISCARD ALL', 'SET SESSION AUTHORIZATION DEFAULT', 'SET ROLE NONE'].entries()) {
        await c.query({ name: `reset${i}`, text });
        expect((await c.query({ name: `who${i}`, text: 'select current_user as u' })).rows[0].u).toBe(MAPPED);
      }
    } finally {
      await c.end();
    }
  });

  test('a role reset that does not end its query string is refused, so nothing can run between it and the re-apply', async () => {
    const c = await ww.client('reset-mapped', mapped.key);
    try {
      for (const text of ['RESET ROLE; select current_user', 'BEGIN; SET ROLE NONE; SAVEPOINT a', 'DISCARD PLANS; RESET ALL; select 1']) {
        const e = await sqlError(c.query(text));
        expect(e.code).toBe('42501');
        expect(e.message).toContain('last statement');
        if (text.startsWith('BEGIN')) await c.query('ROLLBACK');
      }
      // Changing to another role stays refused, "NONE" quoted in capitals (a role of that name) included.
      for (const text of ['SET ROLE postgres', 'SET ROLE "NONE"', 'SET SESSION AUTHORIZATION postgres', "select set_config('role', 'none', false)"]) {
        expect((await sqlError(c.query(text))).code, text).toBe('42501');
      }
      // At the end of a string it is allowed, in a transaction block too.
      await c.query('BEGIN; SAVEPOINT a; RESET ROLE');
      await c.query('ROLLBACK TO a');
      expect((await c.query('select current_user as u')).rows[0].u).toBe(MAPPED);
      await c.query('RESET ROLE; ');
      await c.query('COMMIT');
      expect(((await c.query('select 1 as x; RESET ALL')) as unknown as unknown[]).length).toBe(2);
      expect((await c.query('select current_user as u')).rows[0].u).toBe(MAPPED);
    } finally {
      await c.end();
    }
  });

  test('a reset inside a failed transaction block fails as in PostgreSQL and the session stays governed', async () => {
    const c = await ww.client('reset-mapped', mapped.key);
    try {
      await c.query('BEGIN');
      await sqlError(c.query('select 1/0'));
      expect((await sqlError(c.query('RESET ROLE'))).code).toBe('25P02');
      await c.query('ROLLBACK');
      expect((await sqlError(c.query('BEGIN; DISCARD ALL'))).code).toBe('25001');
      await c.query('ROLLBACK');
      expect((await c.query('select current_user as u')).rows[0].u).toBe(MAPPED);
    } finally {
      await c.end();
    }
  });

  test('ParameterStatus after DISCARD ALL names the wire user, never the upstream login user', async () => {
    const c = await ww.client('reset-mapped', mapped.key, { application_name: 'pool-app' } as never);
    const seen: Array<[string, string]> = [];
    (c as unknown as { connection: { on(e: string, f: (m: { parameterName: string; parameterValue: string }) => void): void } }).connection.on('parameterStatus', (m) => seen.push([m.parameterName, m.parameterValue]));
    try {
      await c.query('DISCARD ALL');
      expect(seen.length).toBeGreaterThan(0);
      for (const [name, value] of seen) {
        if (name === 'session_authorization') expect(value).toBe('reset-mapped');
        if (name === 'is_superuser') expect(value).toBe('off');
      }
      // DISCARD ALL reports application_name reset; the re-apply reports the client's own again.
      expect(seen.filter(([n]) => n === 'application_name').at(-1)).toEqual(['application_name', 'pool-app']);
      expect(seen.some(([, v]) => v === 'postgres')).toBe(false);
    } finally {
      await c.end();
    }
  });
});

test('an identity without a mapped role: resets are allowed, the client\'s startup settings come back', async () => {
  const c = await ww.client('reset-plain', plain.key, { statement_timeout: 3000 } as never);
  try {
    await c.query('SET statement_timeout = 1000').catch(() => undefined);
    await c.query('RESET ALL');
    expect((await c.query('show statement_timeout')).rows[0].statement_timeout).toBe('3s');
    await c.query('DISCARD ALL');
    expect((await c.query('show statement_timeout')).rows[0].statement_timeout).toBe('3s');
    expect((await c.query('show search_path')).rows[0].search_path).toBe('public');
  } finally {
    await c.end();
  }
});

function run(cmd: string, args: string[], env: Record<string, string>): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, timeout: 30_000 }, (_e, stdout, stderr) => resolve({ stdout, stderr }));
  });
}

test('psql: DISCARD ALL, RESET ALL and RESET ROLE keep the mapped role', async () => {
  const r = await ww.psql('reset-mapped', mapped.key, ['-A', '-t', '-v', 'ON_ERROR_STOP=1'], 'DISCARD ALL;\nselect current_user;\nRESET ALL;\nselect current_user;\nBEGIN;\nRESET ROLE;\nselect current_user;\nCOMMIT;\nselect current_user;\n');
  expect(r.stderr).toBe('');
  expect(r.stdout.split('\n').filter((l) => l === MAPPED)).toHaveLength(4);
});

test('psycopg2: reset between borrowers (DISCARD ALL) keeps the mapped role', async () => {
  const script = `
import psycopg2, sys
c = psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='reset-mapped', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable')
c.autocommit = True
cur = c.cursor()
for stmt in ['DISCARD ALL', 'RESET ALL', 'SET SESSION AUTHORIZATION DEFAULT']:
    cur.execute(stmt)
    cur.execute('select current_user')
    print(cur.fetchone()[0])
`;
  const r = await run('/usr/bin/python3', ['-c', script, mapped.key], {});
  expect(r.stderr).toBe('');
  expect(r.stdout.split('\n')).toEqual([MAPPED, MAPPED, MAPPED, '']);
});
