// The Kysely Database type: one interface per control table, matching migrations/ at head.
import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';

/** A JSON value as stored in jsonb. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/**
 * jsonb column: read as parsed JSON, written as a JSON string. Writing the string is deliberate:
 * node-postgres turns a JS array parameter into a PostgreSQL array literal, not JSON.
 */
export type Json<T extends JsonValue = JsonValue> = ColumnType<T, string, string>;
/** jsonb column with a database default. */
export type JsonDefault<T extends JsonValue = JsonValue> = ColumnType<T, string | undefined, string>;

/** timestamptz: read as Date, written as Date or ISO string. */
export type Timestamp = ColumnType<Date, Date | string, Date | string>;
export type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
/** timestamptz with default now(). */
export type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
export type UpdatedAt = ColumnType<Date, Date | string | undefined, Date | string>;

/** Column with a database default that may still be set on insert. */
export type Defaulted<T> = ColumnType<T, T | undefined, T>;

export type AdminRole = 'owner' | 'admin' | 'approver' | 'auditor' | 'viewer';
export const ADMIN_ROLES: readonly AdminRole[] = ['owner', 'admin', 'approver', 'auditor', 'viewer'];

export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'expired' | 'executed' | 'failed';
export const APPROVAL_STATUSES: readonly ApprovalStatus[] = ['pending', 'approved', 'rejected', 'expired', 'executed', 'failed'];

export type IngestionJobStatus = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';
export const INGESTION_JOB_STATUSES: readonly IngestionJobStatus[] = ['pending', 'running', 'completed', 'failed', 'cancelled'];

export interface AdminUsersTable {
  id: Generated<number>;
  username: string;
  /** argon2id PHC string; null for SSO-only accounts. */
  password_hash: string | null;
  roles: Defaulted<AdminRole[]>;
  enabled: Defaulted<boolean>;
  must_change_password: Defaulted<boolean>;
  /** spec §5.3: advanced when username, roles, enabled or SSO subject change. */
  auth_version: Defaulted<number>;
  /** The issuer the subject belongs to (auth.oidc.issuer_url when it was mapped); subjects are unique per issuer. */
  oidc_issuer: string | null;
  oidc_subject: string | null;
  oidc_email: string | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
  last_login_at: NullableTimestamp;
}

export interface AdminTokensTable {
  id: Generated<number>;
  admin_user_id: number;
  name: string;
  token_hash: string;
  created_at: CreatedAt;
  last_used_at: NullableTimestamp;
  expires_at: NullableTimestamp;
}

export interface IdentitiesTable {
  id: Generated<number>;
  name: string;
  agent_type: Defaulted<string>;
  roles: Defaulted<string[]>;
  enabled: Defaulted<boolean>;
  metadata: JsonDefault<JsonObject>;
  mapped_pg_role: string | null;
  team: string | null;
  /** HMAC-SHA256(pepper, key), lowercase hex. */
  api_key_digest: string | null;
  /** Unpeppered SHA-256 hex of a legacy key, cleared once rehashed. */
  api_key_legacy_digest: string | null;
  scram_verifier: string | null;
  pg_username: string | null;
  /** The issuer the subject belongs to (auth.oidc.issuer_url when it was mapped); subjects are unique per issuer. */
  oidc_issuer: string | null;
  oidc_subject: string | null;
  oidc_email: string | null;
  auth_version: Defaulted<number>;
  /** Advanced by trigger on every change to the identity's grants or their roles. */
  grant_version: Generated<number>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface DataSourcesTable {
  id: Generated<number>;
  source_id: string;
  name: string;
  source_type: string;
  connector_key: string | null;
  connection_config: JsonDefault<JsonObject>;
  cache_strategy: Defaulted<string>;
  enabled: Defaulted<boolean>;
  metadata: JsonDefault<JsonObject>;
  /** Cache generation: advanced on mutations through the source (bigint, read as number). */
  generation: Defaulted<number>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface SourceRolesTable {
  id: Generated<number>;
  source_id: string;
  role_key: string;
  description: Defaulted<string>;
  enabled: Defaulted<boolean>;
  /** DESIGN §6 rule entries; validated by the roles module, stored as given. */
  rules: JsonDefault;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface SourceRoleGrantsTable {
  id: Generated<number>;
  identity_id: number;
  source_id: string;
  role_id: number;
  enabled: Defaulted<boolean>;
  expires_at: NullableTimestamp;
  granted_by: number | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface PoliciesTable {
  id: Generated<number>;
  name: string;
  priority: Defaulted<number>;
  conditions: JsonDefault<JsonObject>;
  actions: JsonDefault<JsonObject>;
  enabled: Defaulted<boolean>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

/** Single row (id = true): version of the compiled policy set, advanced by trigger on any policy change. */
export interface PolicySetVersionTable {
  id: ColumnType<boolean, never, never>;
  version: ColumnType<number, never, number>;
  updated_at: UpdatedAt;
}

export interface ApprovalsTable {
  id: Generated<number>;
  identity_id: number;
  source_id: string;
  /** The SQL text, or "METHOD /path" for HTTP writes; shown to approvers. */
  sql_text: string;
  /** The original request, encrypted by the approvals module; never shown. */
  request_payload: Uint8Array | null;
  risk_level: string;
  status: Defaulted<ApprovalStatus>;
  approved_by: string | null;
  decided_at: NullableTimestamp;
  created_at: CreatedAt;
  executed_at: NullableTimestamp;
  expires_at: NullableTimestamp;
  request_metadata: JsonDefault<JsonObject>;
  result: ColumnType<JsonValue | null, string | null | undefined, string | null>;
}

export interface IngestionJobsTable {
  /** bigint identity, read as number. */
  id: Generated<number>;
  source_id: string;
  file_path: string;
  status: Defaulted<IngestionJobStatus>;
  priority_score: Defaulted<number>;
  metadata: JsonDefault<JsonObject>;
  stage: string | null;
  worker_id: string | null;
  error_message: string | null;
  llm_cost: Defaulted<number>;
  ocr_cost: Defaulted<number>;
  ocr_pages: Defaulted<number>;
  progress_current: Defaulted<number>;
  progress_total: number | null;
  retry_count: Defaulted<number>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
  started_at: NullableTimestamp;
  completed_at: NullableTimestamp;
  last_error_at: NullableTimestamp;
  lease_expires_at: NullableTimestamp;
  /** Not claimed before this (retry backoff); migration 0010. */
  run_after: NullableTimestamp;
  /** Proves which claim a worker holds; migration 0010. */
  lease_token: string | null;
  /** The asset version (ETag, mtime and size, hash) source sync last saw; migration 0010. */
  asset_version: string | null;
}

/** A source's sync schedule (migration 0018, docs/ingestion.md "Scheduled sync"). */
export interface IngestionSyncSchedulesTable {
  source_id: string;
  interval_seconds: number;
  enabled: Defaulted<boolean>;
  /** The start of the next due period; a claim moves it forward. */
  next_sync_at: Timestamp;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export type SyncTrigger = 'schedule' | 'manual';
export type SyncRunStatus = 'running' | 'succeeded' | 'failed';

/** One source sync, scheduled or asked for (migration 0018). */
export interface IngestionSyncRunsTable {
  id: Generated<number>;
  source_id: string;
  trigger: SyncTrigger;
  /** The period a scheduled run belongs to (unique per source); null for a manual run. */
  scheduled_for: NullableTimestamp;
  worker_id: string | null;
  status: Defaulted<SyncRunStatus>;
  started_at: CreatedAt;
  finished_at: NullableTimestamp;
  lease_expires_at: Timestamp;
  error_message: string | null;
  result: ColumnType<JsonObject | null, string | null | undefined, string | null>;
}

export interface WorkersTable {
  worker_id: string;
  last_heartbeat: Timestamp;
  metadata: JsonDefault<JsonObject>;
  started_at: CreatedAt;
  /** Jobs the stale sweep took back from this worker (spec §2 WorkerHealth); migration 0010. */
  stale_jobs_failed: Defaulted<number>;
  stale_since: NullableTimestamp;
}

/** An ingested document (docs/ingestion.md): a catalog asset of its source, joined through catalog_asset_id. */
export interface IngestionDocumentsTable {
  id: Generated<number>;
  source_id: string;
  path: string;
  job_id: number | null;
  catalog_asset_id: string | null;
  content_type: string;
  byte_size: number;
  sha256: string;
  asset_version: string | null;
  page_count: Defaulted<number>;
  ocr_pages: Defaulted<number>;
  classification: JsonDefault<JsonObject>;
  extract_chars: Defaulted<number>;
  extract_truncated: Defaulted<boolean>;
  notes: JsonDefault<JsonValue[]>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface IngestionDocumentPagesTable {
  document_id: number;
  page_no: number;
  text: string;
  ocr: Defaulted<boolean>;
  /** Generated tsvector; never written. */
  tsv: ColumnType<string, never, never>;
}

/** Admin sessions of the embedded default (in-process coordination); with Redis they live there (docs/admin-auth.md). */
export interface AdminSessionsTable {
  id: string;
  record: string;
  expires_at: Date;
}

/** Per-source catalog settings and the last on-demand scan request (docs/catalog.md). */
export interface CatalogSourcesTable {
  source_id: string;
  drift_protection: Defaulted<boolean>;
  scan_requested_at: NullableTimestamp;
  updated_at: UpdatedAt;
}

/** One scan of a source's structure; `structure` is kept for the newest snapshots only. */
export interface CatalogSnapshotsTable {
  id: Generated<number>;
  source_id: string;
  version: number;
  status: 'ok' | 'failed';
  trigger: 'save' | 'schedule' | 'demand';
  worker_id: string;
  started_at: Timestamp;
  finished_at: CreatedAt;
  source_updated_at: NullableTimestamp;
  truncated: Defaulted<boolean>;
  truncated_by: string | null;
  node_count: Defaulted<number>;
  change_count: Defaulted<number>;
  error: string | null;
  structure: ColumnType<JsonValue | null, string | null | undefined, string | null>;
}

/** One drift change between two snapshots; `change_id` is stable for the same change. */
export interface CatalogChangesTable {
  id: Generated<number>;
  source_id: string;
  change_id: string;
  snapshot_id: number;
  kind: 'added' | 'removed' | 'renamed' | 'changed' | 'type_changed';
  object_type: string;
  path: string;
  detail: JsonDefault<JsonObject>;
  protected: Defaulted<boolean>;
  created_at: CreatedAt;
  acknowledged_at: NullableTimestamp;
  acknowledged_by: string | null;
}

/** An operator's classification of a catalog path. */
export interface CatalogAnnotationsTable {
  source_id: string;
  path: string;
  classification: string;
  updated_by: string | null;
  updated_at: UpdatedAt;
}

export interface Database {
  admin_users: AdminUsersTable;
  admin_sessions: AdminSessionsTable;
  admin_tokens: AdminTokensTable;
  identities: IdentitiesTable;
  data_sources: DataSourcesTable;
  source_roles: SourceRolesTable;
  source_role_grants: SourceRoleGrantsTable;
  policies: PoliciesTable;
  policy_set_version: PolicySetVersionTable;
  approvals: ApprovalsTable;
  ingestion_jobs: IngestionJobsTable;
  workers: WorkersTable;
  ingestion_documents: IngestionDocumentsTable;
  ingestion_document_pages: IngestionDocumentPagesTable;
  ingestion_sync_schedules: IngestionSyncSchedulesTable;
  ingestion_sync_runs: IngestionSyncRunsTable;
  catalog_sources: CatalogSourcesTable;
  catalog_snapshots: CatalogSnapshotsTable;
  catalog_changes: CatalogChangesTable;
  catalog_annotations: CatalogAnnotationsTable;
}

export type AdminUser = Selectable<AdminUsersTable>;
export type NewAdminUser = Insertable<AdminUsersTable>;
export type AdminUserUpdate = Updateable<AdminUsersTable>;
export type AdminToken = Selectable<AdminTokensTable>;
export type Identity = Selectable<IdentitiesTable>;
export type DataSource = Selectable<DataSourcesTable>;
export type SourceRole = Selectable<SourceRolesTable>;
export type SourceRoleGrant = Selectable<SourceRoleGrantsTable>;
export type Policy = Selectable<PoliciesTable>;
export type Approval = Selectable<ApprovalsTable>;
export type IngestionJob = Selectable<IngestionJobsTable>;
export type Worker = Selectable<WorkersTable>;
export type IngestionDocument = Selectable<IngestionDocumentsTable>;
export type SyncSchedule = Selectable<IngestionSyncSchedulesTable>;
export type SyncRun = Selectable<IngestionSyncRunsTable>;
