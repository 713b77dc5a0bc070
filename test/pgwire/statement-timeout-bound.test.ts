// A statement may lower the source's statement_timeout but never raise it above the source's statement_timeout_ms or turn it off: SET, SET LOCAL and set_config in any spelling are refused (42501) above the bound, so even an identity with every operation granted cannot run a statement longer than the operator allows. Before, `SET statement_timeout = 0` lifted the bound for the rest of the session.
import { execFile } from 'node:child_process';
import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { sqlError, startWireWorld, type WireWorld } from './fixture.js';

const BOUND_MS = 20_000;
let ww: WireWorld;
let all: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'timeoutsrc', sourceConfig: { statement_timeout_ms: BOUND_MS } });
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'everything',
    rules: { sql: [{ operations: ['read', 'write', 'ddl', 'admin'], tables: ['*.*'], functions: ['set_config'], approval: 'never' }] },
  });
  if (role.status !== 201) throw new Error(role.text);
  all = await ww.world.agent('timeout-all', [{ source_id: ww.sourceId, role_key: 'everything' }]);
}, 60_000);
afterAll(async () => ww?.stop());

const UNITS: Array<[string, number]> = [['', 1], ['ms', 1], ['s', 1000], ['min', 60_000], ['h', 3_600_000]];

async function shown(c: pg.Client): Promise<number> {
  const v = (await c.query('show statement_timeout')).rows[0].statement_timeout as string;
  const m = /^(\d+)(ms|s|min|h|d)?$/.exec(v)!;
  return Number(m[1]) * ({ ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 } as Record<string, number>)[m[2] ?? 'ms']!;
}

test('every spelling of SET, SET LOCAL and set_config: allowed at or below the bound, refused above it or at 0', async () => {
  const c = await ww.client('timeout-all', all.key);
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3 * BOUND_MS })),
        fc.constantFrom(...UNITS),
        fc.constantFrom('set', 'set local', 'set session', 'set_config', 'set_config local'),
        fc.constantFrom('statement_timeout', 'STATEMENT_TIMEOUT', 'Statement_Timeout'),
        fc.boolean(),
        async (ms, [unit, factor], form, name, quoted) => {
          await c.query('ROLLBACK');
          const amount = Math.max(ms === 0 ? 0 : 1, Math.round(ms / factor));
          const value = `${amount}${unit}`;
          const literal = quoted || unit !== '' ? `'${value}'` : value;
          const sql = form.startsWith('set_config')
            ? `select set_config('${name}', '${value}', ${form === 'set_config local'})`
            : `${form} ${name} ${quoted ? '=' : 'to'} ${literal}`;
          const effective = amount * factor;
          await c.query('BEGIN');
          if (effective > 0 && effective <= BOUND_MS) {
            await c.query(sql);
            expect(await shown(c)).toBe(effective);
            await c.query('ROLLBACK');
          } else {
            const e = await sqlError(c.query(sql));
            expect(e.code, sql).toBe('42501');
            expect(e.message).toContain(`${BOUND_MS} ms`);
            await c.query('ROLLBACK');
          }
          expect(await shown(c)).toBeLessThanOrEqual(BOUND_MS);
        },
      ),
      { numRuns: 60 },
    );
  } finally {
    await c.end();
  }
});

test('a value that is not a constant is refused; RESET and DEFAULT return to the bound', async () => {
  const c = await ww.client('timeout-all', all.key);
  try {
    expect((await sqlError(c.query("select set_config('statement_timeout', (select '0'), false)"))).code).toBe('42501');
    expect((await sqlError(c.query({ text: "select set_config('statement_timeout', $1, false)", values: ['0'] }))).code).toBe('42501');
    await c.query("SET statement_timeout = '5s'");
    expect(await shown(c)).toBe(5000);
    await c.query('RESET statement_timeout');
    expect(await shown(c)).toBe(BOUND_MS);
    await c.query('SET statement_timeout = 100');
    await c.query('SET statement_timeout TO DEFAULT');
    expect(await shown(c)).toBe(BOUND_MS);
  } finally {
    await c.end();
  }
});

test('psql and psycopg2 see the refusal as PostgreSQL errors', async () => {
  const r = await ww.psql('timeout-all', all.key, ['-A', '-t', '-c', 'SET statement_timeout = 0']);
  expect(r.stderr).toContain('statement_timeout');
  const script = `
import psycopg2, sys
c = psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='timeout-all', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable')
cur = c.cursor()
try:
    cur.execute("SET LOCAL statement_timeout = '1h'")
except psycopg2.Error as e:
    print(e.pgcode)
`;
  const out = await new Promise<string>((resolve) => execFile('/usr/bin/python3', ['-c', script, all.key], { timeout: 30_000 }, (_e, stdout) => resolve(stdout)));
  expect(out.trim()).toBe('42501');
});
