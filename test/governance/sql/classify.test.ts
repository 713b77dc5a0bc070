// Table-driven classification: every row of statements.table.ts, and the table's coverage of every trap.
import { beforeAll, describe, expect, it } from 'vitest';
import { SqlClassifier, TRAP_CODES, initSqlParser } from '../../../src/governance/sql/index.js';
import type { SqlClassified, TrapCode } from '../../../src/governance/sql/index.js';
import { ROWS } from './statements.table.js';

let classifier: SqlClassifier;

beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier();
});

function ok(sql: string): SqlClassified {
  const r = classifier.classify(sql);
  if (!r.ok) throw new Error(`expected ${sql} to parse: ${r.error.code} ${r.error.message}`);
  return r;
}

const sorted = (xs: readonly string[]): string[] => [...xs].sort();

describe('classification table', () => {
  it.each(ROWS.map((r) => [r.sql, r] as const))('%s', (_sql, row) => {
    const r = ok(row.sql);
    expect({
      kinds: r.statements.map((s) => s.kind),
      op: r.operation,
      tables: sorted(r.tables),
      traps: sorted(r.traps),
      multi: r.multiStatement,
    }).toEqual({
      kinds: row.kinds,
      op: row.op,
      tables: sorted(row.tables),
      traps: sorted(row.traps),
      multi: row.kinds.length > 1,
    });
  });

  it('holds at least 100 statements', () => {
    expect(ROWS.length).toBeGreaterThanOrEqual(100);
    expect(new Set(ROWS.map((r) => r.sql)).size).toBe(ROWS.length);
  });

  it('covers every trap code that parsed SQL can produce', () => {
    const seen = new Set<TrapCode>(ROWS.flatMap((r) => r.traps));
    // unknown_statement is the fallback for a node type the table does not know; statement-types.test.ts covers it.
    const missing = TRAP_CODES.filter((t) => t !== 'unknown_statement' && !seen.has(t));
    expect(missing).toEqual([]);
  });

  it('covers every operation', () => {
    expect(new Set(ROWS.map((r) => r.op))).toEqual(new Set(['read', 'write', 'ddl', 'admin']));
  });
});

describe('per-statement results', () => {
  it('gives each statement of a multi-statement text its own class, tables and traps', () => {
    const r = ok('SELECT * FROM a; DELETE FROM b WHERE id = 1; SET ROLE x');
    expect(r.statements.map((s) => [s.kind, s.operation, s.tables, s.traps])).toEqual([
      ['select', 'read', ['public.a'], []],
      ['delete', 'write', ['public.b'], []],
      ['set', 'admin', [], ['role_change']],
    ]);
    expect(r.operation).toBe('admin');
    expect(r.traps).toContain('multi_statement');
  });

  it('reports functions as written, deduplicated', () => {
    const r = ok('SELECT lower(a), lower(b), pg_catalog.pg_sleep(0) FROM t');
    expect(r.functions).toEqual(['lower', 'pg_catalog.pg_sleep']);
    expect(r.statements[0]?.functions).toEqual(['lower', 'pg_catalog.pg_sleep']);
  });

  it('fingerprints ignore constants and normalized text replaces literals', () => {
    const a = ok("SELECT * FROM users WHERE id = 1 AND email = 'a@b.c'");
    const b = ok("SELECT * FROM users WHERE id = 2 AND email = 'z@y.x'");
    const c = ok('SELECT * FROM orders WHERE id = 1');
    expect(a.fingerprint).toBe(b.fingerprint);
    expect(a.fingerprint).not.toBe(c.fingerprint);
    expect(a.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(a.normalized).toBe('SELECT * FROM users WHERE id = $1 AND email = $2');
    expect(a.normalized).not.toContain('a@b.c');
  });
});

describe('statement_timeout values (bounded by the source in the resolve_source stage)', () => {
  it.each([
    ['SET statement_timeout = 0', ['0']],
    ["SET LOCAL statement_timeout TO '5s'", ['5s']],
    ['set session STATEMENT_TIMEOUT = 1500', ['1500']],
    ["SELECT set_config('Statement_Timeout', '1h', false)", ['1h']],
    ["SELECT set_config('statement_timeout', $1, true)", [null]],
    ["SELECT set_config(n, '1', true) FROM t", [null]],
    ["SELECT set_config('lock_timeout', '0', false)", []],
    ['RESET statement_timeout', []],
    ['SET statement_timeout TO DEFAULT', []],
    ['SET statement_timeout = 10; SET statement_timeout = 0', ['10', '0']],
  ])('%s', (sql, values) => {
    expect(ok(sql).statementTimeouts).toEqual(values);
  });
});
