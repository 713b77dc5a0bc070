// Result and option types of SQL understanding (docs/governance/sql.md): statement kinds, operations, traps, classifications.
import type { Operation } from '../policy/schema.js';
import type { CallInfo } from './allowlist.js';
import type { PathEffect } from './search-path.js';

export type { Operation };

/** Strength order used to merge operations: the strongest wins (admin > ddl > write > read). */
export const OPERATION_RANK: Readonly<Record<Operation, number>> = Object.freeze({ read: 0, write: 1, ddl: 2, admin: 3 });

export function strongerOperation(a: Operation, b: Operation): Operation {
  return OPERATION_RANK[a] >= OPERATION_RANK[b] ? a : b;
}

/**
 * Why a statement was escalated above what its kind suggests, or a fact the front doors must see.
 * docs/governance/sql.md lists what each one maps to and why.
 */
export const TRAP_CODES = [
  'multi_statement',
  'writable_cte',
  'locking_read',
  'select_into',
  'side_effect_function',
  'dynamic_sql',
  'copy_program',
  'copy_file',
  'copy_from',
  'do_block',
  'call_procedure',
  'explain_analyze_write',
  'role_change',
  'session_reset',
  'search_path_change',
  'search_path_set',
  'session_default_change',
  'encoding_change',
  'string_syntax_change',
  'guarded_setting',
  'read_write_transaction',
  'transaction_control',
  'two_phase_commit',
  'notify',
  'maintenance',
  'privilege_change',
  'system_change',
  'execute_prepared',
  'lock_table',
  'truncate',
  'unbounded_write',
  'unknown_statement',
  'statistics_read',
] as const;
export type TrapCode = (typeof TRAP_CODES)[number];

/** Statement kinds outside DDL, plus the DDL kinds named in docs/governance/sql.md. */
export type StatementKind =
  | 'select' | 'insert' | 'update' | 'delete' | 'merge' | 'copy' | 'explain'
  | 'prepare' | 'execute' | 'deallocate' | 'declare_cursor' | 'fetch' | 'close_cursor'
  | 'call' | 'do' | 'set' | 'reset' | 'show' | 'discard' | 'set_constraints' | 'transaction'
  | 'listen' | 'unlisten' | 'notify' | 'lock' | 'truncate'
  | 'vacuum' | 'analyze' | 'cluster' | 'reindex' | 'checkpoint' | 'load'
  | 'grant' | 'revoke' | 'grant_role' | 'revoke_role' | 'alter_default_privileges'
  | 'create_role' | 'alter_role' | 'drop_role' | 'alter_owner' | 'reassign_owned' | 'drop_owned'
  | 'create_policy' | 'alter_policy' | 'security_label' | 'user_mapping'
  | 'alter_system' | 'database' | 'tablespace' | 'extension' | 'foreign_data_wrapper' | 'foreign_server'
  | 'event_trigger' | 'create_language' | 'publication' | 'subscription' | 'create_access_method'
  | 'create_schema' | 'create_table' | 'create_table_as' | 'create_materialized_view' | 'refresh_materialized_view'
  | 'create_foreign_table' | 'import_foreign_schema' | 'alter_table' | 'create_index' | 'create_view'
  | 'create_sequence' | 'alter_sequence' | 'create_function' | 'alter_function' | 'create_trigger' | 'create_rule'
  | 'create_type' | 'alter_type' | 'create_domain' | 'alter_domain' | 'define' | 'create_statistics' | 'alter_statistics'
  | 'create_cast' | 'create_conversion' | 'create_transform' | 'operator_class' | 'alter_operator' | 'alter_collation'
  | 'text_search' | 'drop' | 'rename' | 'comment' | 'alter_object_schema' | 'alter_object_depends'
  | 'unknown';

export interface StatementInfo {
  readonly kind: StatementKind;
  readonly operation: Operation;
  /** Schema-qualified (`public.users`), deduplicated, in order of first appearance. */
  readonly tables: readonly string[];
  /** `schema.table.column` where the table is determinable; `schema.table.*` for a star. */
  readonly columns: readonly string[];
  /** Called functions as written (`nextval`, `pg_catalog.pg_sleep`), deduplicated. */
  readonly functions: readonly string[];
  /** Every function, operator and cast target called, judged against the built-in allowlist (allowlist.ts). */
  readonly calls: readonly CallInfo[];
  readonly traps: readonly TrapCode[];
  /** Values the statement gives statement_timeout by SET or set_config, as written (null: not a constant). */
  readonly statementTimeouts?: readonly (string | null)[];
  /** What the statement does to the session's search_path, its transaction and SQL prepared statements (search-path.ts). */
  readonly pathEffects?: readonly PathEffect[];
}

export interface SqlClassified {
  readonly ok: true;
  readonly statements: readonly StatementInfo[];
  /** The strongest operation across the statements. */
  readonly operation: Operation;
  readonly multiStatement: boolean;
  readonly tables: readonly string[];
  readonly columns: readonly string[];
  /** libpg-query fingerprint: equal for statements that differ only in constants. */
  readonly fingerprint: string;
  /**
   * The text with every literal replaced by `$n` and comments dropped, in every statement kind (parser.ts
   * scrubLiterals): what audit entries and approval summaries show.
   */
  readonly normalized: string;
  readonly traps: readonly TrapCode[];
  readonly functions: readonly string[];
  /** The union of the statements' calls (deduplicated by kind and name). */
  readonly calls: readonly CallInfo[];
  /** Every value the statements give statement_timeout (null: not a constant): bounded by the source's (pipeline/decide.ts). */
  readonly statementTimeouts: readonly (string | null)[];
}

export type SqlErrorCode = 'sql_parse_error' | 'sql_too_long' | 'sql_empty';

export interface SqlRejected {
  readonly ok: false;
  readonly error: { readonly code: SqlErrorCode; readonly message: string };
}

export type SqlClassification = SqlClassified | SqlRejected;

export interface SqlClassifierOptions {
  /**
   * The deny/write list: functions whose call escalates a statement to at least `write` (names or
   * globs with one `*`, matched on the unqualified, lower-cased name). Replaces
   * DEFAULT_SIDE_EFFECT_FUNCTIONS; spread that to extend it. Names that also match `adminFunctions`
   * or `dynamicSqlFunctions` escalate to `admin`; those two lists apply on their own, so a short
   * list here cannot drop the superuser-ish functions by accident.
   */
  readonly sideEffectFunctions?: readonly string[];
  /** Functions that escalate to `admin` (superuser-ish, file/network/other-session reach). Replaces DEFAULT_ADMIN_FUNCTIONS. */
  readonly adminFunctions?: readonly string[];
  /** Functions that run SQL given as a string, invisible to table governance: escalate to `admin`. Replaces DEFAULT_DYNAMIC_SQL_FUNCTIONS. */
  readonly dynamicSqlFunctions?: readonly string[];
  /** Settings whose SET/RESET escalates to `admin` (trap `guarded_setting`). Replaces DEFAULT_GUARDED_SETTINGS. */
  readonly guardedSettings?: readonly string[];
  /** Schema given to unqualified table names (the first schema of the source's search_path). Default `public`. */
  readonly defaultSchema?: string;
  /** Cached classifications (entries). 0 disables the cache. Default 10,000. */
  readonly cacheSize?: number;
  /** Texts longer than this (characters) are classified but not cached. Default 16 KiB. */
  readonly cacheMaxTextLength?: number;
  /** Longest accepted text in UTF-8 bytes. Default 1 MiB. */
  readonly maxLength?: number;
  /** Deepest accepted parse tree, counted in parse nodes. Default 200. */
  readonly maxDepth?: number;
}

/**
 * The schema unqualified table names resolve in. Upstream sessions are started with it as their search_path
 * (connectors/postgres-exec.ts), so PostgreSQL resolves names where the classifier does.
 */
export const DEFAULT_SCHEMA = 'public';
