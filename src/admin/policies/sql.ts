// The dry-run's SQL understanding: the governance SQL classifier (libpg-query), initialised once per process on first use.
import { initSqlParser, SqlClassifier } from '../../governance/sql/index.js';
import type { SqlClassification, SqlClassifierOptions } from '../../governance/sql/types.js';

/**
 * A classify function for the dry-run. The parser (WASM) is loaded on the first SQL dry-run rather than
 * at start-up; if it cannot be loaded the SQL counts as not understood, which the dry-run answers with deny.
 */
export function createSqlClassifier(options?: SqlClassifierOptions): (sql: string) => Promise<SqlClassification> {
  let ready: Promise<SqlClassifier> | null = null;
  return async (sql) => {
    ready ??= initSqlParser().then(() => new SqlClassifier(options));
    let classifier: SqlClassifier;
    try {
      classifier = await ready;
    } catch (err) {
      ready = null;
      return { ok: false, error: { code: 'sql_parse_error', message: `the SQL parser could not be loaded (${(err as Error).name})` } };
    }
    return classifier.classify(sql);
  };
}
