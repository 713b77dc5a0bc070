// Function and setting lists that escalate a statement, and the compiled matcher the walker asks per call.
import type { TrapCode } from './types.js';

/**
 * Calls that change state although they sit in a SELECT: sequences, advisory locks, transaction ids,
 * notifications, sleeping (holds a connection). Escalate to `write`.
 * The admin and dynamic-SQL lists are part of the default too, so this list is the whole "deny/write list".
 */
export const DEFAULT_WRITE_FUNCTIONS: readonly string[] = Object.freeze([
  'nextval', 'setval',
  'pg_sleep*',
  'pg_advisory_lock*', 'pg_advisory_xact_lock*', 'pg_try_advisory_lock*', 'pg_try_advisory_xact_lock*',
  'pg_advisory_unlock*',
  'txid_current', 'pg_current_xact_id',
  'pg_notify',
  'pg_logical_emit_message',
]);

/**
 * Calls that reach beyond the caller's own rows: other sessions, the server's files and configuration,
 * other servers, large objects (server-side file import/export), replication, statistics resets.
 * Escalate to `admin`.
 */
export const DEFAULT_ADMIN_FUNCTIONS: readonly string[] = Object.freeze([
  'pg_terminate_backend', 'pg_cancel_backend',
  'set_config',
  'pg_reload_conf', 'pg_rotate_logfile', 'pg_switch_wal', 'pg_create_restore_point', 'pg_promote',
  'pg_backup_start', 'pg_backup_stop', 'pg_wal_replay_pause', 'pg_wal_replay_resume',
  'pg_read_file', 'pg_read_binary_file', 'pg_ls_*', 'pg_stat_file',
  'pg_file_write', 'pg_file_rename', 'pg_file_unlink', 'pg_file_sync', 'pg_logdir_ls',
  'lo_*', 'loread', 'lowrite',
  'dblink*',
  'pg_create_*_replication_slot', 'pg_drop_replication_slot', 'pg_copy_*_replication_slot',
  'pg_replication_slot_advance', 'pg_logical_slot_*', 'pg_replication_origin_*',
  'pg_stat_reset*', 'pg_stat_statements_reset',
  'pg_import_system_collations',
]);

/** Calls that execute SQL passed as a string: the tables they read are invisible here. Escalate to `admin`. */
export const DEFAULT_DYNAMIC_SQL_FUNCTIONS: readonly string[] = Object.freeze([
  'query_to_xml*', 'cursor_to_xml*', 'table_to_xml*', 'schema_to_xml*', 'database_to_xml*',
]);

/** The whole default deny/write list, for callers that want to extend rather than replace it. */
export const DEFAULT_SIDE_EFFECT_FUNCTIONS: readonly string[] = Object.freeze([
  ...DEFAULT_WRITE_FUNCTIONS, ...DEFAULT_ADMIN_FUNCTIONS, ...DEFAULT_DYNAMIC_SQL_FUNCTIONS,
]);

/**
 * Settings a session must not change behind the gateway's back: the gateway's own bounds (timeouts,
 * read-only transactions), replication role (disables triggers and foreign keys), row security,
 * library preloading. Custom settings (`app.tenant`, any name with a dot) are guarded too, because
 * row-level security policies commonly read them. role/session_authorization/search_path have their own traps.
 */
export const DEFAULT_GUARDED_SETTINGS: readonly string[] = Object.freeze([
  'session_replication_role', 'default_transaction_read_only', 'transaction_read_only', 'row_security',
  'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout', 'idle_session_timeout', 'transaction_timeout',
  'local_preload_libraries', 'session_preload_libraries', 'allow_system_table_mods', 'ignore_system_indexes',
  'zero_damaged_pages', 'default_tablespace', 'temp_tablespaces',
]);

/** What a call escalates to: null for an ordinary function. */
export type FunctionEffect = 'write' | 'admin' | 'dynamic_sql' | null;

/** Exact names in a Set, `prefix*` and `pre*suf` patterns as a short list: a call costs one hash lookup and a few startsWith. */
class NameList {
  private readonly exact = new Set<string>();
  private readonly patterns: { prefix: string; suffix: string }[] = [];

  constructor(entries: readonly string[], what: string) {
    for (const raw of entries) {
      if (typeof raw !== 'string' || raw.trim() === '') throw new TypeError(`${what}: entries must be non-empty strings`);
      const name = raw.trim().toLowerCase();
      const star = name.indexOf('*');
      if (star < 0) {
        this.exact.add(name);
      } else {
        if (name.indexOf('*', star + 1) >= 0) throw new TypeError(`${what}: "${raw}" may hold at most one *`);
        this.patterns.push({ prefix: name.slice(0, star), suffix: name.slice(star + 1) });
      }
    }
  }

  has(name: string): boolean {
    if (this.exact.has(name)) return true;
    for (const p of this.patterns) {
      if (name.length >= p.prefix.length + p.suffix.length && name.startsWith(p.prefix) && name.endsWith(p.suffix)) return true;
    }
    return false;
  }
}

export class FunctionRules {
  private readonly write: NameList;
  private readonly admin: NameList;
  private readonly dynamic: NameList;

  constructor(write: readonly string[], admin: readonly string[], dynamic: readonly string[]) {
    this.write = new NameList(write, 'sideEffectFunctions');
    this.admin = new NameList(admin, 'adminFunctions');
    this.dynamic = new NameList(dynamic, 'dynamicSqlFunctions');
  }

  /** `name` is the unqualified function name: a schema does not make pg_catalog.pg_sleep harmless. */
  effectOf(name: string): FunctionEffect {
    const n = name.toLowerCase();
    if (this.dynamic.has(n)) return 'dynamic_sql';
    if (this.admin.has(n)) return 'admin';
    if (this.write.has(n)) return 'write';
    return null;
  }
}

export class SettingRules {
  private readonly guarded: Set<string>;

  constructor(names: readonly string[]) {
    this.guarded = new Set();
    for (const n of names) {
      if (typeof n !== 'string' || n.trim() === '') throw new TypeError('guardedSettings: entries must be non-empty strings');
      this.guarded.add(n.trim().toLowerCase());
    }
  }

  isGuarded(name: string): boolean {
    const n = name.toLowerCase();
    return this.guarded.has(n) || n.includes('.');
  }
}

/** An encoding name as PostgreSQL compares them (pg_char_to_encoding: case and non-alphanumerics ignored). */
export function encodingKey(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/** Whether an encoding name is UTF8 (`UTF8`, `utf-8`, `Unicode` …). */
export function isUtf8EncodingName(name: string): boolean {
  const n = encodingKey(name);
  return n === 'utf8' || n === 'unicode';
}

/**
 * A setting or option value as PostgreSQL's parse_bool reads it: true/false, yes/no and their prefixes, on/off (`of`
 * too), 1/0; null when it is no boolean at all. Callers decide which way an unreadable value fails.
 */
export function pgBoolean(value: string): boolean | null {
  const v = value.trim().toLowerCase();
  if (v === '') return null;
  if ('true'.startsWith(v) || 'yes'.startsWith(v) || v === 'on' || v === '1') return true;
  if ('false'.startsWith(v) || 'no'.startsWith(v) || (v.length >= 2 && 'off'.startsWith(v)) || v === '0') return false;
  return null;
}

/**
 * The session escapes of setting `name` to `value`, by SET or by set_config alike: the role or session authorization
 * (role_change), search_path (search_path_change), client_encoding to anything but UTF8 (encoding_change; under BIG5 or
 * GBK a character can end in the byte of a backslash), standard_conforming_strings to anything but on
 * (string_syntax_change; off, PostgreSQL reads a backslash before a quote as an escape where the gateway reads text).
 * A null name or value is one the caller could not read as a constant (or a RESET / DEFAULT): it may be any of them.
 */
export function settingChangeTraps(name: string | null, value: string | null): TrapCode[] {
  const setting = name?.trim().toLowerCase() ?? null;
  const traps: TrapCode[] = [];
  if (setting === null || setting === 'role' || setting === 'session_authorization') traps.push('role_change');
  if (setting === null || setting === 'search_path') traps.push('search_path_change');
  if ((setting === null || setting === 'client_encoding') && (value === null || !isUtf8EncodingName(value))) traps.push('encoding_change');
  if ((setting === null || setting === 'standard_conforming_strings') && (value === null || pgBoolean(value) !== true)) traps.push('string_syntax_change');
  return traps;
}

const UNIT_MS: Readonly<Record<string, number>> = { us: 0.001, ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 };

/** A time setting in milliseconds (PostgreSQL's units; a bare number is milliseconds), or null when unreadable. */
export function durationMs(value: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*$/.exec(value.replace(/^'|'$/g, ''));
  if (!m) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2] ?? 'ms']!;
  return Number.isFinite(ms) ? Math.round(ms) : null;
}
