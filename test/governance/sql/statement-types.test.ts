// Every statement node type of the PostgreSQL 18 grammar has a deliberate class; an unknown one is admin, not guessed.
import { describe, expect, it } from 'vitest';
import { SettingRules, DEFAULT_GUARDED_SETTINGS } from '../../../src/governance/sql/functions.js';
import { StatementClassifier } from '../../../src/governance/sql/statements.js';
import type { StatementFacts } from '../../../src/governance/sql/walk.js';

/** The *Stmt node types of @pgsql/types 18 that can be a top-level statement. */
const STATEMENT_TYPES = `InsertStmt DeleteStmt UpdateStmt MergeStmt SelectStmt CreateSchemaStmt AlterTableStmt
AlterCollationStmt AlterDomainStmt GrantStmt GrantRoleStmt AlterDefaultPrivilegesStmt CopyStmt VariableSetStmt
VariableShowStmt CreateStmt CreateTableSpaceStmt DropTableSpaceStmt AlterTableSpaceOptionsStmt AlterTableMoveAllStmt
CreateExtensionStmt AlterExtensionStmt AlterExtensionContentsStmt CreateFdwStmt AlterFdwStmt CreateForeignServerStmt
AlterForeignServerStmt CreateForeignTableStmt CreateUserMappingStmt AlterUserMappingStmt DropUserMappingStmt
ImportForeignSchemaStmt CreatePolicyStmt AlterPolicyStmt CreateAmStmt CreateTrigStmt CreateEventTrigStmt
AlterEventTrigStmt CreatePLangStmt CreateRoleStmt AlterRoleStmt AlterRoleSetStmt DropRoleStmt CreateSeqStmt AlterSeqStmt
DefineStmt CreateDomainStmt CreateOpClassStmt CreateOpFamilyStmt AlterOpFamilyStmt DropStmt TruncateStmt CommentStmt
SecLabelStmt DeclareCursorStmt ClosePortalStmt FetchStmt IndexStmt CreateStatsStmt AlterStatsStmt CreateFunctionStmt
AlterFunctionStmt DoStmt CallStmt RenameStmt AlterObjectDependsStmt AlterObjectSchemaStmt AlterOwnerStmt
AlterOperatorStmt AlterTypeStmt RuleStmt NotifyStmt ListenStmt UnlistenStmt TransactionStmt CompositeTypeStmt
CreateEnumStmt CreateRangeStmt AlterEnumStmt ViewStmt LoadStmt CreatedbStmt AlterDatabaseStmt
AlterDatabaseRefreshCollStmt AlterDatabaseSetStmt DropdbStmt AlterSystemStmt ClusterStmt VacuumStmt ExplainStmt
CreateTableAsStmt RefreshMatViewStmt CheckPointStmt DiscardStmt LockStmt ConstraintsSetStmt ReindexStmt
CreateConversionStmt CreateCastStmt CreateTransformStmt PrepareStmt ExecuteStmt DeallocateStmt DropOwnedStmt
ReassignOwnedStmt AlterTSDictionaryStmt AlterTSConfigurationStmt CreatePublicationStmt AlterPublicationStmt
CreateSubscriptionStmt AlterSubscriptionStmt DropSubscriptionStmt`.split(/\s+/);

function facts(): StatementFacts {
  return {
    tables: new Set(), columns: new Set(), functions: new Set(), calls: new Map(),
    writeFunction: false, adminFunction: false, dynamicSql: false, settingTraps: new Set(), statementTimeouts: [], dmlCount: 0, locking: false, selectInto: false, uncertainCatalog: false,
  };
}

const classifier = new StatementClassifier(new SettingRules(DEFAULT_GUARDED_SETTINGS));

describe('statement types', () => {
  it.each(STATEMENT_TYPES)('%s has a class of its own', (type) => {
    const body = type === 'ExplainStmt' || type === 'PrepareStmt' || type === 'DeclareCursorStmt' || type === 'CreateTableAsStmt'
      ? { query: { SelectStmt: {} } }
      : {};
    const r = classifier.classify({ [type]: body }, facts());
    expect(r.kind).not.toBe('unknown');
    expect(r.traps).not.toContain('unknown_statement');
  });

  it('classifies a node type it does not know as admin with unknown_statement', () => {
    expect(classifier.classify({ FutureStmt: {} }, facts())).toEqual({ kind: 'unknown', operation: 'admin', traps: ['unknown_statement'] });
    expect(classifier.classify(null, facts())).toEqual({ kind: 'unknown', operation: 'admin', traps: ['unknown_statement'] });
    expect(classifier.classify({ PrepareStmt: { query: { FutureStmt: {} } } }, facts()).operation).toBe('admin');
  });

  it('escalates by facts: functions everywhere but under plain EXPLAIN', () => {
    const f = { ...facts(), adminFunction: true };
    expect(classifier.classify({ CreateStmt: {} }, f).operation).toBe('admin');
    expect(classifier.classify({ ExplainStmt: { query: { SelectStmt: {} } } }, f).operation).toBe('read');
  });
});
