// Cache and options: results cached by exact text and shared frozen, LRU bound, long texts uncached, configurable lists.
import { beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_SIDE_EFFECT_FUNCTIONS, SqlClassifier, initSqlParser,
} from '../../../src/governance/sql/index.js';

beforeAll(async () => {
  await initSqlParser();
});

describe('cache', () => {
  it('returns the same frozen object for the same text', () => {
    const c = new SqlClassifier();
    const a = c.classify('SELECT * FROM users WHERE id = 1');
    const b = c.classify('SELECT * FROM users WHERE id = 1');
    expect(b).toBe(a);
    expect(c.cachedEntries).toBe(1);
    expect(Object.isFrozen(a)).toBe(true);
    if (!a.ok) throw new Error('expected ok');
    expect(Object.isFrozen(a.tables)).toBe(true);
    expect(Object.isFrozen(a.statements[0])).toBe(true);
    expect(Object.isFrozen(a.statements[0]?.traps)).toBe(true);
    expect(() => (a.tables as string[]).push('public.other')).toThrow(TypeError);
  });

  it('keys on the exact text: whitespace or case differences are separate entries with equal fingerprints', () => {
    const c = new SqlClassifier();
    const a = c.classify('SELECT * FROM users');
    const b = c.classify('select *  from users');
    expect(b).not.toBe(a);
    expect(a.ok && b.ok && a.fingerprint === b.fingerprint).toBe(true);
    expect(c.cachedEntries).toBe(2);
  });

  it('caches refusals too, so a repeated bad text costs a lookup', () => {
    const c = new SqlClassifier();
    const a = c.classify('SELEC 1');
    expect(c.classify('SELEC 1')).toBe(a);
    expect(c.cachedEntries).toBe(1);
  });

  it('evicts the least recently used entry at cacheSize', () => {
    const c = new SqlClassifier({ cacheSize: 2 });
    const a = c.classify('SELECT 1');
    c.classify('SELECT 2');
    c.classify('SELECT 1'); // touch: SELECT 2 is now the oldest
    c.classify('SELECT 3');
    expect(c.cachedEntries).toBe(2);
    expect(c.classify('SELECT 1')).toBe(a);
    const two = c.classify('SELECT 2');
    expect(c.classify('SELECT 2')).toBe(two);
  });

  it('does not cache with cacheSize 0, nor texts longer than cacheMaxTextLength', () => {
    const off = new SqlClassifier({ cacheSize: 0 });
    const x = off.classify('SELECT 1');
    expect(off.classify('SELECT 1')).not.toBe(x);
    expect(off.classify('SELECT 1')).toEqual(x);
    expect(off.cachedEntries).toBe(0);

    const small = new SqlClassifier({ cacheMaxTextLength: 20 });
    small.classify('SELECT 1');
    small.classify('SELECT * FROM a_rather_long_table_name');
    expect(small.cachedEntries).toBe(1);
  });

  it('never caches too-long texts', () => {
    const c = new SqlClassifier({ maxLength: 16 });
    expect(c.classify('SELECT 1234567890123').ok).toBe(false);
    expect(c.cachedEntries).toBe(0);
  });

  it('serves a cached statement in well under the 2 µs budget', () => {
    const c = new SqlClassifier();
    const sql = 'SELECT u.id, u.email FROM users u WHERE u.id = $1';
    c.classify(sql);
    const n = 20_000;
    const t0 = performance.now();
    for (let i = 0; i < n; i += 1) c.classify(sql);
    const perCall = ((performance.now() - t0) * 1000) / n;
    // Generous for a shared 2-core machine; bench/governance-sql.ts measures the real figure.
    expect(perCall).toBeLessThan(10);
  });
});

describe('options', () => {
  it('replaces the deny/write list, and keeps the admin list on its own', () => {
    const c = new SqlClassifier({ sideEffectFunctions: ['audit_touch', 'my_*'] });
    const op = (sql: string): string => {
      const r = c.classify(sql);
      return r.ok ? r.operation : r.error.code;
    };
    expect(op('SELECT audit_touch(1)')).toBe('write');
    expect(op('SELECT my_counter_bump()')).toBe('write');
    expect(op("SELECT nextval('s')")).toBe('read');
    expect(op('SELECT pg_terminate_backend(1)')).toBe('admin');
  });

  it('extends the default list by spreading it', () => {
    const c = new SqlClassifier({ sideEffectFunctions: [...DEFAULT_SIDE_EFFECT_FUNCTIONS, 'bump'] });
    const r1 = c.classify('SELECT bump()');
    const r2 = c.classify("SELECT nextval('s')");
    expect(r1.ok && r1.operation).toBe('write');
    expect(r2.ok && r2.operation).toBe('write');
  });

  it('can clear the admin list explicitly', () => {
    const c = new SqlClassifier({ sideEffectFunctions: [], adminFunctions: [], dynamicSqlFunctions: [] });
    const r = c.classify('SELECT pg_terminate_backend(1), query_to_xml($1, true, true, $2)');
    expect(r.ok && r.operation).toBe('read');
  });

  it('matches function names case-insensitively and ignores the schema', () => {
    const c = new SqlClassifier();
    const r = c.classify('SELECT "pg_catalog"."NEXTVAL"(\'s\')');
    expect(r.ok && r.traps).toEqual(['side_effect_function']);
  });

  it('takes a guarded settings list', () => {
    const c = new SqlClassifier({ guardedSettings: ['work_mem'] });
    const a = c.classify("SET work_mem = '1GB'");
    const b = c.classify('SET statement_timeout = 0');
    const d = c.classify("SET app.tenant = '1'");
    expect(a.ok && [a.operation, a.traps]).toEqual(['admin', ['guarded_setting']]);
    expect(b.ok && b.operation).toBe('read');
    expect(d.ok && d.operation).toBe('admin');
  });

  it('checks its options', () => {
    expect(() => new SqlClassifier({ defaultSchema: '' })).toThrow(TypeError);
    expect(() => new SqlClassifier({ defaultSchema: 'a.b' })).toThrow(TypeError);
    expect(() => new SqlClassifier({ cacheSize: -1 })).toThrow(RangeError);
    expect(() => new SqlClassifier({ maxLength: 0 })).toThrow(RangeError);
    expect(() => new SqlClassifier({ maxDepth: 100_000 })).toThrow(RangeError);
    expect(() => new SqlClassifier({ sideEffectFunctions: [''] })).toThrow(TypeError);
    expect(() => new SqlClassifier({ sideEffectFunctions: ['a*b*'] })).toThrow(TypeError);
    expect(() => new SqlClassifier().classify(42 as unknown as string)).toThrow(TypeError);
  });

  it('initSqlParser is idempotent', async () => {
    await Promise.all([initSqlParser(), initSqlParser()]);
    const c = await SqlClassifier.create();
    expect(c.classify('SELECT 1').ok).toBe(true);
  });
});
