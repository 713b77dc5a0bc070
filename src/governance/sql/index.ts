// Public surface of SQL understanding (docs/governance/sql.md): the classifier, its result types and the default lists.
export { SqlClassifier } from './classifier.js';
export { initSqlParser, sqlParserReady, SqlParserNotReadyError } from './parser.js';
export {
  DEFAULT_ADMIN_FUNCTIONS, DEFAULT_DYNAMIC_SQL_FUNCTIONS, DEFAULT_GUARDED_SETTINGS, DEFAULT_SIDE_EFFECT_FUNCTIONS,
  DEFAULT_WRITE_FUNCTIONS,
} from './functions.js';
export { DEFAULT_SCHEMA, OPERATION_RANK, strongerOperation, TRAP_CODES } from './types.js';
export type {
  Operation, SqlClassification, SqlClassified, SqlClassifierOptions, SqlErrorCode, SqlRejected, StatementInfo, StatementKind,
  TrapCode,
} from './types.js';
