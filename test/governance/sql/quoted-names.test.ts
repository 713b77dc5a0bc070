// Qualified names whose parts hold dots, quotes, capitals or non-ASCII letters keep their parts: the classifier reports `"my.schema"."my.table"` as two parts, and role and policy globs match part by part, so `*.*` covers it and `my.*` does not. Before, the joined string my.schema.my.table read as four parts and matched nothing (a `*.*` grant refused the table).
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { SqlClassifier, initSqlParser } from '../../../src/governance/sql/index.js';
import { joinName, splitName } from '../../../src/governance/sql/names.js';
import { compileColumnGlobs, compileGlobs, GLOB_SEP } from '../../../src/governance/policy/glob.js';

let classifier: SqlClassifier;
beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier();
});

const quoteIdent = (s: string): string => `"${s.replace(/"/g, '""')}"`;
/** Identifiers PostgreSQL accepts quoted: dots, quotes, spaces, capitals, stars, non-ASCII; never NUL, never empty. */
const ident = fc
  .array(fc.constantFrom('a', 'b', 'Z', '.', '"', ' ', '*', 'é', 'ß', '表', '_', '1', '$'), { minLength: 1, maxLength: 8 })
  .map((cs) => cs.join(''))
  .filter((s) => s.trim() !== '');

describe('qualified names', () => {
  it('round-trip through joinName and splitName', () => {
    fc.assert(
      fc.property(fc.array(ident, { minLength: 1, maxLength: 3 }), (parts) => {
        expect(splitName(joinName(...parts))).toEqual(parts);
      }),
    );
  });

  it('the classifier reports a quoted schema.table as its two parts, and its columns as three', () => {
    fc.assert(
      fc.property(ident, ident, ident, (schema, table, column) => {
        const r = classifier.classify(`SELECT ${quoteIdent(column)} FROM ${quoteIdent(schema)}.${quoteIdent(table)}`);
        expect(r.ok).toBe(true);
        if (!r.ok) return;
        expect(r.tables.map(splitName)).toEqual([[schema, table]]);
        expect(r.columns.map(splitName)).toEqual([[schema, table, column]]);
      }),
      { numRuns: 300 },
    );
  });

  it('role and policy globs match part by part', () => {
    fc.assert(
      fc.property(ident, ident, ident, (schema, table, other) => {
        const name = joinName(schema, table);
        expect(compileGlobs(['*.*'], GLOB_SEP.table)(name)).toBe(true);
        expect(compileGlobs(['**'], GLOB_SEP.table)(name)).toBe(true);
        expect(compileGlobs([`${joinName(schema)}.*`], GLOB_SEP.table)(name)).toBe(true);
        expect(compileGlobs([name], GLOB_SEP.table)(name)).toBe(true);
        // One part is never two: `*` stops at a separator, not at a dot inside a quoted part.
        expect(compileGlobs(['*'], GLOB_SEP.table)(name)).toBe(false);
        expect(compileGlobs(['*.*.*'], GLOB_SEP.table)(name)).toBe(false);
        // A `*` inside a name is a wildcard in a pattern (the glob dialect has no escape).
        if (other !== schema && !other.includes('*')) expect(compileGlobs([`${joinName(other)}.*`], GLOB_SEP.table)(name)).toBe(false);
        expect(compileColumnGlobs([joinName(other)])(joinName(schema, table, other))).toBe(true);
        expect(compileColumnGlobs(['*.*.*'])(joinName(schema, table, other))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('an unquoted pattern keeps its meaning for plain names', () => {
    expect(compileGlobs(['public.*'], GLOB_SEP.table)('public.users')).toBe(true);
    expect(compileGlobs(['public.*'], GLOB_SEP.table)('"public.x".users')).toBe(false);
    expect(compileGlobs(['my.*'], GLOB_SEP.table)('"my.schema"."my.table"')).toBe(false);
    expect(compileGlobs(['"my.schema".*'], GLOB_SEP.table)('"my.schema"."my.table"')).toBe(true);
    expect(compileColumnGlobs(['email'])('public.users.email')).toBe(true);
    expect(compileColumnGlobs(['email'])('public.users."x.email"')).toBe(false);
  });
});
