// Statement class of one parsed statement: its kind, operation and traps, from the root node type plus the walker's facts.
import { pgBoolean, settingChangeTraps, type SettingRules } from './functions.js';
import { strongerOperation } from './types.js';
import type { Operation, StatementKind, TrapCode } from './types.js';
import type { StatementFacts } from './walk.js';

type Json = Record<string, unknown>;

export interface StatementClass {
  readonly kind: StatementKind;
  readonly operation: Operation;
  readonly traps: readonly TrapCode[];
  readonly statementTimeouts?: readonly (string | null)[];
}

interface Draft {
  kind: StatementKind;
  operation: Operation;
  traps: TrapCode[];
  /** Values SET gives statement_timeout (null: unreadable); RESET and DEFAULT return to the bound and are not listed. */
  statementTimeouts?: (string | null)[];
}

type Fixed = readonly [StatementKind, Operation, ...TrapCode[]];

/**
 * Statements whose class does not depend on their contents. Admin: anything that changes who may
 * do what (privilege_change), the server, database or cluster (system_change), or runs maintenance
 * that takes heavy locks or I/O (maintenance). DDL: changes to the schema of objects.
 * docs/governance/sql.md gives the reasons per row.
 */
const FIXED: Readonly<Record<string, Fixed>> = {
  FetchStmt: ['fetch', 'read'],
  ClosePortalStmt: ['close_cursor', 'read'],
  DeallocateStmt: ['deallocate', 'read'],
  VariableShowStmt: ['show', 'read'],
  ConstraintsSetStmt: ['set_constraints', 'read'],
  ListenStmt: ['listen', 'read'],
  UnlistenStmt: ['unlisten', 'read'],
  NotifyStmt: ['notify', 'write', 'notify'],
  ExecuteStmt: ['execute', 'write', 'execute_prepared'],
  CallStmt: ['call', 'write', 'call_procedure'],
  LockStmt: ['lock', 'write', 'lock_table'],
  DoStmt: ['do', 'admin', 'do_block'],
  TruncateStmt: ['truncate', 'ddl', 'truncate'],
  ClusterStmt: ['cluster', 'admin', 'maintenance'],
  ReindexStmt: ['reindex', 'admin', 'maintenance'],
  CheckPointStmt: ['checkpoint', 'admin', 'maintenance'],
  LoadStmt: ['load', 'admin', 'system_change'],
  AlterDefaultPrivilegesStmt: ['alter_default_privileges', 'admin', 'privilege_change'],
  CreateRoleStmt: ['create_role', 'admin', 'privilege_change'],
  AlterRoleStmt: ['alter_role', 'admin', 'privilege_change'],
  AlterRoleSetStmt: ['alter_role', 'admin', 'privilege_change'],
  DropRoleStmt: ['drop_role', 'admin', 'privilege_change'],
  AlterOwnerStmt: ['alter_owner', 'admin', 'privilege_change'],
  ReassignOwnedStmt: ['reassign_owned', 'admin', 'privilege_change'],
  DropOwnedStmt: ['drop_owned', 'admin', 'privilege_change'],
  CreatePolicyStmt: ['create_policy', 'admin', 'privilege_change'],
  AlterPolicyStmt: ['alter_policy', 'admin', 'privilege_change'],
  SecLabelStmt: ['security_label', 'admin', 'privilege_change'],
  CreateUserMappingStmt: ['user_mapping', 'admin', 'privilege_change'],
  AlterUserMappingStmt: ['user_mapping', 'admin', 'privilege_change'],
  DropUserMappingStmt: ['user_mapping', 'admin', 'privilege_change'],
  AlterSystemStmt: ['alter_system', 'admin', 'system_change'],
  CreatedbStmt: ['database', 'admin', 'system_change'],
  AlterDatabaseStmt: ['database', 'admin', 'system_change'],
  AlterDatabaseSetStmt: ['database', 'admin', 'system_change'],
  AlterDatabaseRefreshCollStmt: ['database', 'admin', 'system_change'],
  DropdbStmt: ['database', 'admin', 'system_change'],
  CreateTableSpaceStmt: ['tablespace', 'admin', 'system_change'],
  DropTableSpaceStmt: ['tablespace', 'admin', 'system_change'],
  AlterTableSpaceOptionsStmt: ['tablespace', 'admin', 'system_change'],
  AlterTableMoveAllStmt: ['tablespace', 'admin', 'system_change'],
  CreateExtensionStmt: ['extension', 'admin', 'system_change'],
  AlterExtensionStmt: ['extension', 'admin', 'system_change'],
  AlterExtensionContentsStmt: ['extension', 'admin', 'system_change'],
  CreateFdwStmt: ['foreign_data_wrapper', 'admin', 'system_change'],
  AlterFdwStmt: ['foreign_data_wrapper', 'admin', 'system_change'],
  CreateForeignServerStmt: ['foreign_server', 'admin', 'system_change'],
  AlterForeignServerStmt: ['foreign_server', 'admin', 'system_change'],
  CreateEventTrigStmt: ['event_trigger', 'admin', 'system_change'],
  AlterEventTrigStmt: ['event_trigger', 'admin', 'system_change'],
  CreatePLangStmt: ['create_language', 'admin', 'system_change'],
  CreatePublicationStmt: ['publication', 'admin', 'system_change'],
  AlterPublicationStmt: ['publication', 'admin', 'system_change'],
  CreateSubscriptionStmt: ['subscription', 'admin', 'system_change'],
  AlterSubscriptionStmt: ['subscription', 'admin', 'system_change'],
  DropSubscriptionStmt: ['subscription', 'admin', 'system_change'],
  CreateAmStmt: ['create_access_method', 'admin', 'system_change'],
  CreateSchemaStmt: ['create_schema', 'ddl'],
  CreateStmt: ['create_table', 'ddl'],
  CreateForeignTableStmt: ['create_foreign_table', 'ddl'],
  ImportForeignSchemaStmt: ['import_foreign_schema', 'ddl'],
  IndexStmt: ['create_index', 'ddl'],
  ViewStmt: ['create_view', 'ddl'],
  RefreshMatViewStmt: ['refresh_materialized_view', 'ddl'],
  CreateSeqStmt: ['create_sequence', 'ddl'],
  AlterSeqStmt: ['alter_sequence', 'ddl'],
  CreateFunctionStmt: ['create_function', 'ddl'],
  AlterFunctionStmt: ['alter_function', 'ddl'],
  CreateTrigStmt: ['create_trigger', 'ddl'],
  RuleStmt: ['create_rule', 'ddl'],
  CompositeTypeStmt: ['create_type', 'ddl'],
  CreateEnumStmt: ['create_type', 'ddl'],
  CreateRangeStmt: ['create_type', 'ddl'],
  AlterEnumStmt: ['alter_type', 'ddl'],
  AlterTypeStmt: ['alter_type', 'ddl'],
  CreateDomainStmt: ['create_domain', 'ddl'],
  AlterDomainStmt: ['alter_domain', 'ddl'],
  DefineStmt: ['define', 'ddl'],
  CreateStatsStmt: ['create_statistics', 'ddl'],
  AlterStatsStmt: ['alter_statistics', 'ddl'],
  CreateCastStmt: ['create_cast', 'ddl'],
  CreateConversionStmt: ['create_conversion', 'ddl'],
  CreateTransformStmt: ['create_transform', 'ddl'],
  CreateOpClassStmt: ['operator_class', 'ddl'],
  CreateOpFamilyStmt: ['operator_class', 'ddl'],
  AlterOpFamilyStmt: ['operator_class', 'ddl'],
  AlterOperatorStmt: ['alter_operator', 'ddl'],
  AlterCollationStmt: ['alter_collation', 'ddl'],
  AlterTSDictionaryStmt: ['text_search', 'ddl'],
  AlterTSConfigurationStmt: ['text_search', 'ddl'],
  CommentStmt: ['comment', 'ddl'],
  AlterObjectSchemaStmt: ['alter_object_schema', 'ddl'],
  AlterObjectDependsStmt: ['alter_object_depends', 'ddl'],
};

/** DROP/RENAME of these object types are admin, not DDL: they touch the server or access rules. */
const SYSTEM_OBJECTS = new Set([
  'OBJECT_EXTENSION', 'OBJECT_EVENT_TRIGGER', 'OBJECT_FDW', 'OBJECT_FOREIGN_SERVER', 'OBJECT_PUBLICATION',
  'OBJECT_SUBSCRIPTION', 'OBJECT_ACCESS_METHOD', 'OBJECT_LANGUAGE', 'OBJECT_DATABASE', 'OBJECT_TABLESPACE',
]);
const ACCESS_OBJECTS = new Set(['OBJECT_ROLE', 'OBJECT_POLICY']);
const ACCESS_SUBCOMMANDS = new Set([
  'AT_ChangeOwner', 'AT_EnableRowSecurity', 'AT_DisableRowSecurity', 'AT_ForceRowSecurity', 'AT_NoForceRowSecurity',
]);

/** Settings whose role or database default the gateway relies on for every new session. */
const SESSION_DEFAULTS: ReadonlySet<string> = new Set(['search_path', 'role', 'session_authorization', 'client_encoding', 'default_transaction_read_only', 'transaction_read_only']);

const DML_KIND: Readonly<Record<string, StatementKind>> = {
  InsertStmt: 'insert', UpdateStmt: 'update', DeleteStmt: 'delete', MergeStmt: 'merge',
};

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function root(node: unknown): { type: string; body: Json } | null {
  if (!isObj(node)) return null;
  const keys = Object.keys(node);
  const type = keys[0];
  if (keys.length !== 1 || type === undefined || !isObj(node[type])) return null;
  return { type, body: node[type] };
}

/** The one constant a `SET name = value` gives (a string, or a keyword such as on/off), or null for anything else. */
function setValue(varKind: string, args: unknown): string | null {
  const list = Array.isArray(args) ? (args as unknown[]) : [];
  const value = list[0];
  if (varKind !== 'VAR_SET_VALUE' || list.length !== 1 || !isObj(value) || !isObj(value.A_Const) || !isObj(value.A_Const.sval)) return null;
  return String(value.A_Const.sval.sval ?? '');
}

/**
 * `RESET ROLE`, `SET [SESSION | LOCAL] ROLE NONE` (PostgreSQL reads exactly `none` as no role), `SET role TO DEFAULT`,
 * `RESET SESSION AUTHORIZATION`, `SET SESSION AUTHORIZATION DEFAULT`: back to the login role, never to another one.
 */
function isRoleReset(name: string, varKind: string, args: unknown): boolean {
  if (name !== 'role' && name !== 'session_authorization') return false;
  if (varKind === 'VAR_RESET' || varKind === 'VAR_SET_DEFAULT') return true;
  return name === 'role' && setValue(varKind, args) === 'none';
}

/** A SET's single value as text, numbers included (`SET statement_timeout = 5000`); null for anything else. */
function settingText(args: unknown): string | null {
  const list = Array.isArray(args) ? (args as unknown[]) : [];
  const c = list.length === 1 && isObj(list[0]) && isObj(list[0].A_Const) ? list[0].A_Const : null;
  if (c === null) return null;
  if (isObj(c.sval)) return String(c.sval.sval ?? '');
  // proto3 JSON omits zero values: `ival: {}` is 0.
  if (isObj(c.ival)) return String(c.ival.ival ?? 0);
  if (isObj(c.fval)) return String(c.fval.fval ?? '');
  return null;
}

function escalate(d: Draft, op: Operation, trap?: TrapCode): void {
  d.operation = strongerOperation(d.operation, op);
  if (trap !== undefined && !d.traps.includes(trap)) d.traps.push(trap);
}

/** An option argument as PostgreSQL reads a boolean: absent means true; an unreadable form is taken as true. */
function optionTrue(arg: unknown): boolean {
  if (!isObj(arg)) return true;
  if (isObj(arg.String)) return pgBoolean(String(arg.String.sval ?? '')) ?? true;
  if (isObj(arg.Integer)) return (arg.Integer.ival ?? 0) !== 0;
  if (isObj(arg.Boolean)) return arg.Boolean.boolval === true;
  if (isObj(arg.A_Const)) return constTrue(arg.A_Const);
  return true;
}

/** A_Const as a boolean (proto3 JSON omits zero values: `ival: {}` is 0). */
function constTrue(c: Json): boolean {
  if (isObj(c.ival)) return (c.ival.ival ?? 0) !== 0;
  if (isObj(c.boolval)) return c.boolval.boolval === true;
  if (isObj(c.sval)) return !['false', 'off', 'no', '0'].includes(String(c.sval.sval ?? '').toLowerCase());
  return true;
}

function defElems(list: unknown): Json[] {
  const out: Json[] = [];
  if (Array.isArray(list)) for (const o of list) if (isObj(o) && isObj(o.DefElem)) out.push(o.DefElem);
  return out;
}

/** `READ WRITE` in BEGIN / SET TRANSACTION options: transaction_read_only = false. */
function asksReadWrite(options: unknown): boolean {
  return defElems(options).some((d) => d.defname === 'transaction_read_only' && !optionTrue(d.arg));
}

export class StatementClassifier {
  constructor(private readonly settings: SettingRules) {}

  classify(stmt: unknown, facts: StatementFacts): StatementClass {
    const r = root(stmt);
    if (r === null) return { kind: 'unknown', operation: 'admin', traps: ['unknown_statement'] };
    if (r.type === 'ExplainStmt') {
      const analyze = defElems(r.body.options).some((d) => d.defname === 'analyze' && optionTrue(d.arg));
      // Plain EXPLAIN plans without executing: nothing inside runs, so nothing inside escalates.
      if (!analyze) return { kind: 'explain', operation: 'read', traps: [] };
      const inner = this.executed(this.node(r.body.query, facts), facts);
      const d: Draft = { kind: 'explain', operation: inner.operation, traps: [...inner.traps] };
      if (inner.operation !== 'read') escalate(d, inner.operation, 'explain_analyze_write');
      return d;
    }
    return this.executed(this.node(stmt, facts), facts);
  }

  /** Functions run wherever they sit (a DEFAULT, an index expression, CREATE TABLE AS), so they escalate every executed statement. */
  private executed(d: Draft, facts: StatementFacts): Draft {
    if (facts.writeFunction) escalate(d, 'write', 'side_effect_function');
    if (facts.adminFunction) escalate(d, 'admin', 'side_effect_function');
    if (facts.dynamicSql) escalate(d, 'admin', 'dynamic_sql');
    for (const trap of facts.settingTraps) escalate(d, 'admin', trap);
    return d;
  }

  private node(stmt: unknown, facts: StatementFacts): Draft {
    const r = root(stmt);
    if (r === null) return { kind: 'unknown', operation: 'admin', traps: ['unknown_statement'] };
    const { type, body } = r;
    const fixed = FIXED[type];
    if (fixed !== undefined) {
      const [kind, operation, ...traps] = fixed;
      // ALTER ROLE / DATABASE … SET changes what later sessions start with, before the gateway's governance of them:
      // a default search_path, role, encoding or guarded setting would put those sessions where the gateway does not
      // think they are (docs/pgwire.md "search_path"). Refused like the same change made by SET.
      if ((type === 'AlterRoleSetStmt' || type === 'AlterDatabaseSetStmt') && this.changesSessionDefaults(body.setstmt)) traps.push('session_default_change');
      return { kind, operation, traps: [...traps] };
    }
    switch (type) {
      case 'SelectStmt':
        return this.query({ kind: 'select', operation: 'read', traps: [] }, facts, 0);
      case 'UpdateStmt':
      case 'DeleteStmt': {
        const d = this.query({ kind: DML_KIND[type] as StatementKind, operation: 'write', traps: [] }, facts, 1);
        // Without a WHERE clause every row changes: the risk classifier treats that as high risk.
        if (body.whereClause === undefined) d.traps.push('unbounded_write');
        return d;
      }
      case 'InsertStmt':
      case 'MergeStmt':
        return this.query({ kind: DML_KIND[type] as StatementKind, operation: 'write', traps: [] }, facts, 1);
      case 'CopyStmt':
        return this.copy(body, facts);
      case 'PrepareStmt':
        return { ...this.node(body.query, facts), kind: 'prepare' };
      case 'DeclareCursorStmt':
        return { ...this.node(body.query, facts), kind: 'declare_cursor' };
      case 'CreateTableAsStmt': {
        const d: Draft = { ...this.node(body.query, facts), kind: body.objtype === 'OBJECT_MATVIEW' ? 'create_materialized_view' : 'create_table_as' };
        escalate(d, 'ddl');
        return d;
      }
      case 'ExplainStmt': {
        const c = this.classify(stmt, facts);
        return { kind: c.kind, operation: c.operation, traps: [...c.traps] };
      }
      case 'VariableSetStmt':
        return this.set(body);
      case 'TransactionStmt':
        return this.transaction(body);
      case 'DiscardStmt':
        // DISCARD ALL includes SET SESSION AUTHORIZATION DEFAULT and RESET ALL: a session reset (see set()).
        return body.target === 'DISCARD_ALL' ? { kind: 'discard', operation: 'read', traps: ['session_reset'] } : { kind: 'discard', operation: 'read', traps: [] };
      case 'GrantStmt':
        return { kind: body.is_grant === true ? 'grant' : 'revoke', operation: 'admin', traps: ['privilege_change'] };
      case 'GrantRoleStmt':
        return { kind: body.is_grant === true ? 'grant_role' : 'revoke_role', operation: 'admin', traps: ['privilege_change'] };
      case 'VacuumStmt':
        return { kind: body.is_vacuumcmd === true ? 'vacuum' : 'analyze', operation: 'admin', traps: ['maintenance'] };
      case 'AlterTableStmt':
        return this.alterTable(body);
      case 'DropStmt':
        return this.objectChange('drop', String(body.removeType ?? ''));
      case 'RenameStmt':
        return this.objectChange('rename', String(body.renameType ?? ''));
      default:
        // A statement type this table does not know is not guessed at: strongest class.
        return { kind: 'unknown', operation: 'admin', traps: ['unknown_statement'] };
    }
  }

  /** SELECT and DML: the traps hidden inside a query. `own` is how many DML nodes the root itself accounts for. */
  private query(d: Draft, facts: StatementFacts, own: number): Draft {
    if (facts.dmlCount > own) escalate(d, 'write', 'writable_cte');
    if (facts.locking) escalate(d, 'write', 'locking_read');
    if (facts.selectInto) escalate(d, 'ddl', 'select_into');
    return d;
  }

  private copy(body: Json, facts: StatementFacts): Draft {
    const d: Draft = body.query !== undefined ? { ...this.node(body.query, facts), kind: 'copy' } : { kind: 'copy', operation: 'read', traps: [] };
    if (body.is_from === true) escalate(d, 'write', 'copy_from');
    // A server-side program or file runs with the server's rights (pg_execute_server_program / pg_*_server_files).
    if (body.is_program === true) escalate(d, 'admin', 'copy_program');
    else if (typeof body.filename === 'string') escalate(d, 'admin', 'copy_file');
    return d;
  }

  /** ALTER TABLE is DDL, except the subcommands that change who may read the rows: owner and row-level security. */
  private alterTable(body: Json): Draft {
    for (const c of Array.isArray(body.cmds) ? body.cmds : []) {
      const sub = isObj(c) && isObj(c.AlterTableCmd) ? String(c.AlterTableCmd.subtype ?? '') : '';
      if (ACCESS_SUBCOMMANDS.has(sub)) return { kind: 'alter_table', operation: 'admin', traps: ['privilege_change'] };
    }
    return { kind: 'alter_table', operation: 'ddl', traps: [] };
  }

  private objectChange(kind: 'drop' | 'rename', objectType: string): Draft {
    if (ACCESS_OBJECTS.has(objectType)) return { kind, operation: 'admin', traps: ['privilege_change'] };
    if (SYSTEM_OBJECTS.has(objectType)) return { kind, operation: 'admin', traps: ['system_change'] };
    return { kind, operation: 'ddl', traps: [] };
  }

  /** Whether a role's or database's default setting could change what the gateway assumes of a new session. */
  private changesSessionDefaults(setstmt: unknown): boolean {
    if (!isObj(setstmt)) return true;
    const varKind = String(setstmt.kind ?? '');
    if (varKind === 'VAR_RESET_ALL') return true;
    const lower = String(setstmt.name ?? '').toLowerCase();
    if (SESSION_DEFAULTS.has(lower)) return true;
    return settingChangeTraps(lower, setValue(varKind, setstmt.args)).length > 0 || this.settings.isGuarded(lower);
  }

  private set(body: Json): Draft {
    const varKind = String(body.kind ?? '');
    const kind: StatementKind = varKind.startsWith('VAR_RESET') ? 'reset' : 'set';
    // A session reset returns settings and the role to the session's defaults, which are the gateway's governed ones:
    // a front door with a session re-applies what the gateway set after login (docs/pgwire.md "Session resets"); the
    // others refuse it (pipeline/decide.ts session_escape). Every other change of role or authorization is refused.
    if (varKind === 'VAR_RESET_ALL') return { kind, operation: 'read', traps: ['session_reset'] };
    const name = String(body.name ?? '');
    if (isRoleReset(name.toLowerCase(), varKind, body.args)) return { kind, operation: 'read', traps: ['session_reset'] };
    // search_path: what a session's path tracking can prove is governed by it (the classifier adds search_path_set, or
    // search_path_change for what it cannot prove; docs/pgwire.md "search_path").
    if (name.toLowerCase() === 'search_path') return { kind, operation: 'read', traps: [] };
    if (varKind === 'VAR_SET_MULTI') {
      if (!asksReadWrite(body.args)) return { kind, operation: 'read', traps: [] };
      // SESSION CHARACTERISTICS changes the session default (= default_transaction_read_only); TRANSACTION only this one.
      return name === 'SESSION CHARACTERISTICS'
        ? { kind, operation: 'admin', traps: ['guarded_setting'] }
        : { kind, operation: 'write', traps: ['read_write_transaction'] };
    }
    const lower = name.toLowerCase();
    // The same rule set_config calls are held to (walk.ts): SET and set_config change the same settings.
    const traps = settingChangeTraps(lower, setValue(varKind, body.args));
    if (traps.length > 0) return { kind, operation: 'admin', traps };
    const d: Draft = this.settings.isGuarded(lower) ? { kind, operation: 'admin', traps: ['guarded_setting'] } : { kind, operation: 'read', traps: [] };
    if (lower === 'statement_timeout' && varKind === 'VAR_SET_VALUE') d.statementTimeouts = [settingText(body.args)];
    return d;
  }

  private transaction(body: Json): Draft {
    const k = String(body.kind ?? '');
    if (k === 'TRANS_STMT_PREPARE' || k === 'TRANS_STMT_COMMIT_PREPARED' || k === 'TRANS_STMT_ROLLBACK_PREPARED') {
      // Two-phase commit outlives the session, and COMMIT PREPARED finishes another session's work.
      return { kind: 'transaction', operation: 'admin', traps: ['transaction_control', 'two_phase_commit'] };
    }
    if ((k === 'TRANS_STMT_BEGIN' || k === 'TRANS_STMT_START') && asksReadWrite(body.options)) {
      return { kind: 'transaction', operation: 'write', traps: ['transaction_control', 'read_write_transaction'] };
    }
    return { kind: 'transaction', operation: 'read', traps: ['transaction_control'] };
  }
}
