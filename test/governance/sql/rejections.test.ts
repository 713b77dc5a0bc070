// Input the classifier refuses: empty, too long, unparseable, NUL, pathological nesting — denied, never guessed.
import { beforeAll, describe, expect, it } from 'vitest';
import { SqlClassifier, initSqlParser } from '../../../src/governance/sql/index.js';
import type { SqlErrorCode } from '../../../src/governance/sql/index.js';

let classifier: SqlClassifier;

beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier();
});

function code(sql: string, c: SqlClassifier = classifier): SqlErrorCode | 'ok' {
  const r = c.classify(sql);
  return r.ok ? 'ok' : r.error.code;
}

describe('empty input', () => {
  it.each(['', '   ', '\n\t ', ';', ' ; ;; ', '-- only a comment', '/* block */', '/* a */ -- b\n;'])('%j is sql_empty', (sql) => {
    expect(code(sql)).toBe('sql_empty');
  });
});

describe('unparseable input', () => {
  it.each([
    'SELEC 1',
    'SELECT * FROM',
    'SELECT 1 +',
    "SELECT 'unterminated",
    'SELECT "unterminated',
    'DELETE users',
    'SELECT 1; SELEC 2',
    'DROP TABLE',
    '$$ not sql $$',
    'SELECT * FROM t WHERE',
    'INSERT INTO t VALUES (1',
    'UPDATE t SET',
  ])('%j is sql_parse_error', (sql) => {
    const r = classifier.classify(sql);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.code).toBe('sql_parse_error');
      expect(r.error.message.length).toBeGreaterThan(0);
    }
  });

  it('names the position of a syntax error', () => {
    const r = classifier.classify('SELECT * FROM users WHER id = 1');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.message).toMatch(/syntax error at or near "id" \(at character \d+\)/);
  });

  it('refuses a NUL character, which would hide the rest of the text from the parser', () => {
    expect(code('SELECT 1\u0000; DROP TABLE users')).toBe('sql_parse_error');
  });

  it('refuses a text whose second statement does not parse, as a whole', () => {
    expect(code('SELECT 1; DROP TABLE users WHERE')).toBe('sql_parse_error');
  });
});

describe('length bound', () => {
  it('refuses text over the default 1 MiB', () => {
    const sql = `SELECT '${'x'.repeat(1024 * 1024)}'`;
    expect(code(sql)).toBe('sql_too_long');
  });

  it('counts UTF-8 bytes, not characters', () => {
    const c = new SqlClassifier({ maxLength: 40 });
    expect(code(`SELECT '${'a'.repeat(20)}'`, c)).toBe('ok');
    expect(code(`SELECT '${'é'.repeat(20)}'`, c)).toBe('sql_too_long');
  });

  it('accepts a large flat statement under the bound (bulk insert)', () => {
    const values = Array.from({ length: 5000 }, (_, i) => `(${i}, 'name ${i}', -${i})`).join(', ');
    const r = classifier.classify(`INSERT INTO t (id, name, delta) VALUES ${values}`);
    expect(r.ok && r.operation).toBe('write');
  });
});

describe('pathological nesting', () => {
  const deep: readonly (readonly [string, string])[] = [
    ['short operator chain past maxDepth', `SELECT ${Array(400).fill('1').join('+')}`],
    ['long operator chain', `SELECT ${Array(12000).fill('1').join('+')}`],
    ['nested sub-selects', `SELECT ${'(SELECT '.repeat(3000)}1${')'.repeat(3000)}`],
    ['nested subqueries in FROM', `SELECT * FROM ${'(SELECT * FROM '.repeat(2000)}t${') x'.repeat(2000)}`],
    ['long join chain', `SELECT * FROM t0 ${Array.from({ length: 3000 }, (_, i) => `JOIN t${i + 1} ON true`).join(' ')}`],
    ['long union chain', Array(3000).fill('SELECT 1').join(' UNION ')],
    ['nested subscripts', `SELECT ${'a['.repeat(6000)}1${']'.repeat(6000)}`],
    ['nested casts', `SELECT 1${'::int'.repeat(10000)}`],
    ['nested parentheses', `SELECT ${'('.repeat(20000)}1${')'.repeat(20000)}`],
    ['nested function calls', `SELECT ${'f('.repeat(6000)}1${')'.repeat(6000)}`],
  ];

  // A RangeError inside the WASM parser leaks its stack and, repeated, corrupts the module for every
  // caller: each refusal must come from a bound checked before the recursion (or the parser's own clean
  // "memory exhausted"), never from a caught stack overflow ("too deeply nested to parse").
  it.each(deep)('%s is refused before the parser overflows', (_name, sql) => {
    const r = classifier.classify(sql);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.code).toBe('sql_parse_error');
    expect(r.error.message).toMatch(/nesting estimate|nested deeper than|memory exhausted/);
    expect(r.error.message).not.toMatch(/too deeply nested to parse/);
  });

  it('leaves the parser healthy after refusals', () => {
    const c = new SqlClassifier({ cacheSize: 0 });
    for (let i = 0; i < 2; i += 1) {
      for (const [, sql] of deep) expect(code(`${sql} -- ${i}`, c)).toBe('sql_parse_error');
    }
    const r = c.classify('SELECT email FROM users WHERE id = 1');
    expect(r.ok && r.tables).toEqual(['public.users']);
  });

  it('accepts realistic nesting', () => {
    const sql = `SELECT * FROM t WHERE a IN ${'(SELECT a FROM t WHERE a IN '.repeat(10)}(1)${')'.repeat(10)}`;
    expect(code(sql)).toBe('ok');
    expect(code(`SELECT ${Array(50).fill('a').join(' || ')} FROM t`)).toBe('ok');
    expect(code(`SELECT * FROM t WHERE ${Array(2000).fill('a = 1').join(' OR ')}`)).toBe('ok');
  });

  it('honours a configured maxDepth', () => {
    const c = new SqlClassifier({ maxDepth: 10 });
    expect(code(`SELECT ${Array(20).fill('1').join('+')}`, c)).toBe('sql_parse_error');
    expect(code('SELECT 1 + 1', c)).toBe('ok');
  });
});

describe('control characters inside tokens', () => {
  // libpg-query's scanner (nesting bound, literal scrubbing) wrote them unescaped into its JSON, and the statement was refused with
  // "Bad control character in string literal in JSON": valid SQL must parse whatever its literals hold.
  const padding = `/* ${'x'.repeat(2100)} */`;
  const controls = [...Array(31).keys()].map((i) => i + 1);
  it.each(controls)('U+%s in a long statement\'s literal, quoted identifier and comment is classified', (c) => {
    const ch = String.fromCharCode(c);
    const sql = `SELECT 'a${ch}b' AS "q${ch}", $$d${ch}$$ FROM t /* ${ch} */`;
    for (const text of [sql, `${sql} ${padding}`]) {
      const r = classifier.classify(text);
      expect(r.ok ? 'ok' : r.error.message).toBe('ok');
      expect(r.ok && r.operation).toBe('read');
      // The audit's literal-free text drops the literals and the comment, control characters and all.
      expect(r.ok && r.normalized).not.toMatch(/a.b|d.\$/);
    }
  });

  it('a control character outside a token is still a syntax error', () => {
    expect(code(`SELECT 1 \u0001 ${padding}`)).toBe('sql_parse_error');
  });
});
