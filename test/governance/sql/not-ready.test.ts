// Using a classifier before the parser is loaded is a caller bug: it throws a typed error instead of denying everything.
import { describe, expect, it } from 'vitest';
import { SqlClassifier, SqlParserNotReadyError, initSqlParser, sqlParserReady } from '../../../src/governance/sql/index.js';

describe('before initSqlParser()', () => {
  it('throws SqlParserNotReadyError, then works once loaded', async () => {
    expect(sqlParserReady()).toBe(false);
    const c = new SqlClassifier();
    let caught: unknown;
    try {
      c.classify('SELECT 1');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SqlParserNotReadyError);
    expect((caught as SqlParserNotReadyError).code).toBe('sql_parser_not_ready');
    // The length bound needs no parser.
    expect(new SqlClassifier({ maxLength: 4 }).classify('SELECT 1').ok).toBe(false);
    await initSqlParser();
    expect(c.classify('SELECT 1').ok).toBe(true);
  });
});
