// The Kysely type of the audit_entries table (migration 0002_audit), joined to the control-store Database type.
import type { ColumnType } from 'kysely';
import type { Database } from '../store/schema.js';
import type { AuditChanges, AuditEntry, AuditTarget } from './entry.js';

/** Written as ISO strings, read back as Date; the entry's ts fixes the partition. */
type Ts = ColumnType<Date, string, never>;
/** jsonb written as a JSON string, read parsed. */
type Jsonb<T> = ColumnType<T | null, string | null, never>;

/**
 * audit_entries rows are immutable: no column is updatable. The row is the entry (one field list,
 * entry.ts), except ts and the jsonb columns, whose written and read types differ.
 */
export type AuditEntriesTable = Omit<AuditEntry, 'ts' | 'target' | 'changes'> & {
  ts: Ts;
  target: Jsonb<AuditTarget>;
  changes: Jsonb<AuditChanges>;
};

export type AuditDatabase = Database & { audit_entries: AuditEntriesTable };
