// The static, ordered list of control-store migrations (no file scanning: dist/ must find them too).
import type { Migration } from 'kysely/migration';
import { foundation } from './0001_foundation.js';
import { audit } from './0002_audit.js';
import { approvalsExecution } from './0003_approvals_execution.js';
import { adminSessions } from './0004_admin_sessions.js';
import { oidcSubjects } from './0007_oidc_subjects.js';
import { alerts } from './0008_alerts.js';
import { catalog } from './0009_catalog.js';
import { ingestion } from './0010_ingestion.js';
import { catalogRenames } from './0013_catalog_renames.js';
import { consoleOverview } from './0014_console_overview.js';
import { auditStore } from './0017_audit_store.js';
import { syncSchedules } from './0018_sync_schedules.js';
import { documentSearch } from './0019_document_search.js';
import { documentSearchKeys } from './0020_document_search_keys.js';
import { auditSealFormat } from './0021_audit_seal_format.js';
import { auditTimeKey } from './0022_audit_time_key.js';
import { auditSealLocators } from './0023_audit_seal_locators.js';
import { auditSealTimeOrder } from './0024_audit_seal_time_order.js';

/** Every migration, keyed by its sortable name; Kysely applies them in key order. Append only. */
export const migrations: Readonly<Record<string, Migration>> = Object.freeze({
  '0001_foundation': foundation,
  '0002_audit': audit,
  '0003_approvals_execution': approvalsExecution,
  '0004_admin_sessions': adminSessions,
  '0007_oidc_subjects': oidcSubjects,
  '0008_alerts': alerts,
  '0009_catalog': catalog,
  '0010_ingestion': ingestion,
  '0013_catalog_renames': catalogRenames,
  '0014_console_overview': consoleOverview,
  '0017_audit_store': auditStore,
  '0018_sync_schedules': syncSchedules,
  '0019_document_search': documentSearch,
  '0020_document_search_keys': documentSearchKeys,
  '0021_audit_seal_format': auditSealFormat,
  '0022_audit_time_key': auditTimeKey,
  '0023_audit_seal_locators': auditSealLocators,
  '0024_audit_seal_time_order': auditSealTimeOrder,
});
