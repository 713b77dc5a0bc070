// The dry-run's SQL understanding: the governance SQL classifier (libpg-query), initialised once per process on first use.
import type { SqlClassification, SqlClassifierOptions } from '../governance/sql/types.js';

interface ClassifierModule {
  initSqlParser(): Promise<void>;
  SqlClassifier: new (options?: SqlClassifierOptions) => { classify(sql: string): SqlClassification };
}

// Resolved at run time: the classifier module is built alongside this one (issue 4 item 3).
const CLASSIFIER_MODULE = '../governance/sql/index.js';

/**
 * A classify function for the dry-run. The parser is loaded on the first SQL dry-run, not at start-up;
 * if it cannot be loaded the SQL is reported as not understood, which the dry-run answers with deny.
 */
export function createSqlClassifier(options?: SqlClassifierOptions): (sql: string) => Promise<SqlClassification> {
  let ready: Promise<{ classify(sql: string): SqlClassification }> | null = null;
  const load = async () => {
    const mod = (await import(CLASSIFIER_MODULE)) as ClassifierModule;
    await mod.initSqlParser();
    return new mod.SqlClassifier(options);
  };
  return async (sql) => {
    ready ??= load();
    try {
      return (await ready).classify(sql);
    } catch (err) {
      ready = null;
      return { ok: false, error: { code: 'sql_parse_error', message: `the SQL classifier is unavailable (${(err as Error).name})` } };
    }
  };
}
