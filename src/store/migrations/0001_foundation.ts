// Migration 0001: the control tables every later issue builds on (spec §2, DESIGN §6), with their triggers.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

const now = sql`now()`;
const emptyObject = sql`'{}'::jsonb`;
const emptyTextArray = sql`'{}'::text[]`;

/** Migrations see the schema as it was when they were written, so they use an untyped handle. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('admin_users')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text')
    .addColumn('roles', sql`text[]`, (c) => c.notNull().defaultTo(emptyTextArray))
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('must_change_password', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('auth_version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('oidc_subject', 'text')
    .addColumn('oidc_email', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('last_login_at', 'timestamptz')
    .addUniqueConstraint('admin_users_username_key', ['username'])
    .addUniqueConstraint('admin_users_oidc_subject_key', ['oidc_subject'])
    .addCheckConstraint('admin_users_username_check', sql`char_length(username) between 1 and 128`)
    .addCheckConstraint('admin_users_roles_check', sql`roles <@ array['owner','admin','approver','auditor','viewer']::text[]`)
    .addCheckConstraint('admin_users_oidc_subject_check', sql`oidc_subject is null or char_length(oidc_subject) between 1 and 512`)
    .execute();

  await db.schema
    .createTable('admin_tokens')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('admin_user_id', 'integer', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz')
    .addUniqueConstraint('admin_tokens_token_hash_key', ['token_hash'])
    .addForeignKeyConstraint('admin_tokens_admin_user_id_fkey', ['admin_user_id'], 'admin_users', ['id'], (fk) => fk.onDelete('cascade'))
    .addCheckConstraint('admin_tokens_name_check', sql`char_length(name) between 1 and 128`)
    .execute();
  await db.schema.createIndex('admin_tokens_admin_user_id_idx').on('admin_tokens').column('admin_user_id').execute();

  await db.schema
    .createTable('identities')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('agent_type', 'text', (c) => c.notNull().defaultTo('custom'))
    .addColumn('roles', sql`text[]`, (c) => c.notNull().defaultTo(emptyTextArray))
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('mapped_pg_role', 'text')
    .addColumn('team', 'text')
    .addColumn('api_key_digest', 'text')
    .addColumn('api_key_legacy_digest', 'text')
    .addColumn('scram_verifier', 'text')
    .addColumn('pg_username', 'text')
    .addColumn('oidc_subject', 'text')
    .addColumn('oidc_email', 'text')
    .addColumn('auth_version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('grant_version', 'bigint', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addUniqueConstraint('identities_name_key', ['name'])
    .addUniqueConstraint('identities_api_key_digest_key', ['api_key_digest'])
    .addUniqueConstraint('identities_api_key_legacy_digest_key', ['api_key_legacy_digest'])
    .addUniqueConstraint('identities_pg_username_key', ['pg_username'])
    .addUniqueConstraint('identities_oidc_subject_key', ['oidc_subject'])
    .addCheckConstraint('identities_name_check', sql`char_length(name) between 1 and 255`)
    .addCheckConstraint('identities_api_key_digest_check', sql`api_key_digest is null or api_key_digest ~ '^[0-9a-f]{64}$'`)
    .addCheckConstraint('identities_api_key_legacy_digest_check', sql`api_key_legacy_digest is null or api_key_legacy_digest ~ '^[0-9a-f]{64}$'`)
    .addCheckConstraint('identities_metadata_check', sql`jsonb_typeof(metadata) = 'object'`)
    .execute();

  await db.schema
    .createTable('data_sources')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('source_type', 'text', (c) => c.notNull())
    .addColumn('connector_key', 'text')
    .addColumn('connection_config', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('cache_strategy', 'text', (c) => c.notNull().defaultTo('deterministic_first'))
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('generation', 'bigint', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addUniqueConstraint('data_sources_source_id_key', ['source_id'])
    // URL-safe (RFC 3986 unreserved) and usable as the PG wire database name.
    .addCheckConstraint('data_sources_source_id_check', sql`source_id ~ '^[A-Za-z0-9][A-Za-z0-9._~-]{0,62}$'`)
    .addCheckConstraint('data_sources_name_check', sql`char_length(name) between 1 and 255`)
    .addCheckConstraint('data_sources_connection_config_check', sql`jsonb_typeof(connection_config) = 'object'`)
    .addCheckConstraint('data_sources_metadata_check', sql`jsonb_typeof(metadata) = 'object'`)
    .execute();

  await db.schema
    .createTable('source_roles')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('role_key', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('rules', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addForeignKeyConstraint('source_roles_source_id_fkey', ['source_id'], 'data_sources', ['source_id'], (fk) =>
      fk.onDelete('cascade').onUpdate('cascade'),
    )
    .addUniqueConstraint('source_roles_source_id_role_key_key', ['source_id', 'role_key'])
    // Target of the grants' composite key, which guarantees a grant's role belongs to its source.
    .addUniqueConstraint('source_roles_id_source_id_key', ['id', 'source_id'])
    .addCheckConstraint('source_roles_role_key_check', sql`role_key ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'`)
    .execute();

  await db.schema
    .createTable('source_role_grants')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('identity_id', 'integer', (c) => c.notNull())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('role_id', 'integer', (c) => c.notNull())
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('expires_at', 'timestamptz')
    .addColumn('granted_by', 'integer')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addForeignKeyConstraint('source_role_grants_identity_id_fkey', ['identity_id'], 'identities', ['id'], (fk) => fk.onDelete('cascade'))
    .addForeignKeyConstraint('source_role_grants_source_id_fkey', ['source_id'], 'data_sources', ['source_id'], (fk) =>
      fk.onDelete('cascade').onUpdate('cascade'),
    )
    .addForeignKeyConstraint('source_role_grants_role_fkey', ['role_id', 'source_id'], 'source_roles', ['id', 'source_id'], (fk) =>
      fk.onDelete('cascade').onUpdate('cascade'),
    )
    .addForeignKeyConstraint('source_role_grants_granted_by_fkey', ['granted_by'], 'admin_users', ['id'], (fk) => fk.onDelete('set null'))
    .addUniqueConstraint('source_role_grants_identity_id_role_id_key', ['identity_id', 'role_id'])
    .execute();
  await db.schema.createIndex('source_role_grants_source_id_idx').on('source_role_grants').column('source_id').execute();
  await db.schema.createIndex('source_role_grants_role_id_idx').on('source_role_grants').column('role_id').execute();

  // The per-identity grant version (docs/pgwire.md, identity refresh) advances on every grant change, including
  // cascaded deletes and edits of a granted role, so a trigger rather than repository code.
  await sql`
    create function gatehouse_grants_advance_version() returns trigger language plpgsql as $$
    begin
      if tg_op <> 'INSERT' then
        update identities set grant_version = grant_version + 1 where id = old.identity_id;
      end if;
      if tg_op = 'INSERT' or new.identity_id is distinct from old.identity_id then
        update identities set grant_version = grant_version + 1 where id = new.identity_id;
      end if;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger source_role_grants_advance_version
    after insert or update or delete on source_role_grants
    for each row execute function gatehouse_grants_advance_version()`.execute(db);
  await sql`
    create function gatehouse_roles_advance_version() returns trigger language plpgsql as $$
    begin
      update identities set grant_version = grant_version + 1
      where id in (select identity_id from source_role_grants where role_id = new.id);
      return null;
    end $$`.execute(db);
  await sql`
    create trigger source_roles_advance_version
    after update of rules, enabled, role_key on source_roles
    for each row execute function gatehouse_roles_advance_version()`.execute(db);

  await db.schema
    .createTable('policies')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('priority', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('conditions', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('actions', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addUniqueConstraint('policies_name_key', ['name'])
    .addCheckConstraint('policies_name_check', sql`char_length(name) between 1 and 255`)
    .addCheckConstraint('policies_conditions_check', sql`jsonb_typeof(conditions) = 'object'`)
    .addCheckConstraint('policies_actions_check', sql`jsonb_typeof(actions) = 'object'`)
    .execute();
  await db.schema.createIndex('policies_enabled_priority_idx').on('policies').columns(['enabled', 'priority']).execute();

  await db.schema
    .createTable('policy_set_version')
    .addColumn('id', 'boolean', (c) => c.primaryKey().defaultTo(true))
    .addColumn('version', 'bigint', (c) => c.notNull().defaultTo(1))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addCheckConstraint('policy_set_version_single_row', sql`id`)
    .execute();
  await sql`insert into policy_set_version (id) values (true)`.execute(db);
  await sql`
    create function gatehouse_policies_advance_version() returns trigger language plpgsql as $$
    begin
      update policy_set_version set version = version + 1, updated_at = now();
      return null;
    end $$`.execute(db);
  await sql`
    create trigger policies_advance_version
    after insert or update or delete or truncate on policies
    for each statement execute function gatehouse_policies_advance_version()`.execute(db);

  await db.schema
    .createTable('approvals')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('identity_id', 'integer', (c) => c.notNull())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('sql_text', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('request_payload', 'bytea')
    .addColumn('risk_level', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending'))
    .addColumn('approved_by', 'text')
    .addColumn('decided_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('executed_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz')
    .addColumn('request_metadata', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('result', 'jsonb')
    // A pending approval of a deleted identity or source must never execute; the audit log keeps the history.
    .addForeignKeyConstraint('approvals_identity_id_fkey', ['identity_id'], 'identities', ['id'], (fk) => fk.onDelete('cascade'))
    .addForeignKeyConstraint('approvals_source_id_fkey', ['source_id'], 'data_sources', ['source_id'], (fk) =>
      fk.onDelete('cascade').onUpdate('cascade'),
    )
    .addCheckConstraint('approvals_status_check', sql`status in ('pending','approved','rejected','expired','executed','failed')`)
    .addCheckConstraint('approvals_risk_level_check', sql`char_length(risk_level) between 1 and 32`)
    .addCheckConstraint('approvals_request_metadata_check', sql`jsonb_typeof(request_metadata) = 'object'`)
    .execute();
  await db.schema.createIndex('approvals_status_expires_at_idx').on('approvals').columns(['status', 'expires_at']).execute();
  await db.schema.createIndex('approvals_identity_id_idx').on('approvals').column('identity_id').execute();
  await db.schema.createIndex('approvals_source_id_idx').on('approvals').column('source_id').execute();

  await db.schema
    .createTable('ingestion_jobs')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity())
    .addColumn('source_id', 'text', (c) => c.notNull())
    .addColumn('file_path', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending'))
    .addColumn('priority_score', 'double precision', (c) => c.notNull().defaultTo(0))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('stage', 'text')
    .addColumn('worker_id', 'text')
    .addColumn('error_message', 'text')
    .addColumn('llm_cost', 'double precision', (c) => c.notNull().defaultTo(0))
    .addColumn('ocr_cost', 'double precision', (c) => c.notNull().defaultTo(0))
    .addColumn('ocr_pages', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('progress_current', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('progress_total', 'integer')
    .addColumn('retry_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addColumn('started_at', 'timestamptz')
    .addColumn('completed_at', 'timestamptz')
    .addColumn('last_error_at', 'timestamptz')
    .addColumn('lease_expires_at', 'timestamptz')
    .addForeignKeyConstraint('ingestion_jobs_source_id_fkey', ['source_id'], 'data_sources', ['source_id'], (fk) =>
      fk.onDelete('cascade').onUpdate('cascade'),
    )
    // One job per file: a source sync requeues the existing job rather than adding a second one.
    .addUniqueConstraint('ingestion_jobs_source_id_file_path_key', ['source_id', 'file_path'])
    .addCheckConstraint('ingestion_jobs_status_check', sql`status in ('pending','running','completed','failed','cancelled')`)
    .addCheckConstraint('ingestion_jobs_counts_check', sql`ocr_pages >= 0 and progress_current >= 0 and retry_count >= 0 and (progress_total is null or progress_total >= 0)`)
    .execute();
  // The worker leases the best pending job with FOR UPDATE SKIP LOCKED (DESIGN §2).
  await db.schema
    .createIndex('ingestion_jobs_pending_idx')
    .on('ingestion_jobs')
    .columns(['priority_score desc', 'created_at'])
    .where(sql.ref('status'), '=', 'pending')
    .execute();
  await db.schema
    .createIndex('ingestion_jobs_running_lease_idx')
    .on('ingestion_jobs')
    .column('lease_expires_at')
    .where(sql.ref('status'), '=', 'running')
    .execute();

  await db.schema
    .createTable('workers')
    .addColumn('worker_id', 'text', (c) => c.primaryKey())
    .addColumn('last_heartbeat', 'timestamptz', (c) => c.notNull())
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(emptyObject))
    .addColumn('started_at', 'timestamptz', (c) => c.notNull().defaultTo(now))
    .addCheckConstraint('workers_worker_id_check', sql`char_length(worker_id) between 1 and 255`)
    .execute();
}

async function down(db: AnyDb): Promise<void> {
  for (const table of [
    'workers',
    'ingestion_jobs',
    'approvals',
    'policy_set_version',
    'policies',
    'source_role_grants',
    'source_roles',
    'data_sources',
    'identities',
    'admin_tokens',
    'admin_users',
  ]) {
    await db.schema.dropTable(table).execute();
  }
  for (const fn of ['gatehouse_policies_advance_version', 'gatehouse_roles_advance_version', 'gatehouse_grants_advance_version']) {
    await sql`drop function ${sql.id(fn)}()`.execute(db);
  }
}

export const foundation: Migration = { up, down };
