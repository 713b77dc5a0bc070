// The Kysely type of the audit_entries table (migration 0002_audit), joined to the control-store Database type.
import type { ColumnType } from 'kysely';
import type { Database } from '../store/schema.js';
import type { AuditCacheOutcome, AuditChanges, AuditChannel, AuditDecision, AuditTarget } from './entry.js';

/** Written as ISO strings, read back as Date; the entry's ts fixes the partition. */
type Ts = ColumnType<Date, string, never>;
/** jsonb written as a JSON string, read parsed. */
type Jsonb<T> = ColumnType<T | null, string | null, never>;

/** audit_entries rows are immutable: no column is updatable. */
export interface AuditEntriesTable {
  id: string;
  ts: Ts;
  request_id: string;
  channel: AuditChannel;
  identity_id: number | null;
  admin_user_id: number | null;
  source_id: string | null;
  operation: string | null;
  method: string | null;
  path: string | null;
  sql_fingerprint: string | null;
  sql_normalized: string | null;
  tables: string[];
  decision: AuditDecision;
  reasons: string[];
  policy_ids: number[];
  approval_id: number | null;
  status: number;
  upstream_status: number | null;
  cache: AuditCacheOutcome | null;
  redactions: number;
  bytes_in: number;
  bytes_out: number;
  duration_ms: number;
  client_ip: string | null;
  action: string | null;
  target: Jsonb<AuditTarget>;
  changes: Jsonb<AuditChanges>;
  error_code: string | null;
}

export type AuditDatabase = Database & { audit_entries: AuditEntriesTable };
