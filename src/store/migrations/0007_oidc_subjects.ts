// Migration 0007: single sign-on subjects are unique per issuer (spec §2 "Single sign-on subject mapping"): the issuer is stored beside each subject.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  for (const table of ['admin_users', 'identities']) {
    await sql`alter table ${sql.table(table)} add column oidc_issuer text`.execute(db);
    // Nothing could set a subject before this migration; one without an issuer could never be matched, so none is kept.
    await sql`update ${sql.table(table)} set oidc_subject = null, oidc_email = null where oidc_subject is not null`.execute(db);
    await sql`alter table ${sql.table(table)} drop constraint ${sql.raw(`${table}_oidc_subject_key`)}`.execute(db);
    await sql`alter table ${sql.table(table)} add constraint ${sql.raw(`${table}_oidc_issuer_subject_key`)} unique (oidc_issuer, oidc_subject)`.execute(db);
    await sql`alter table ${sql.table(table)} add constraint ${sql.raw(`${table}_oidc_mapping_check`)} check (
      (oidc_subject is null and oidc_issuer is null and oidc_email is null)
      or (oidc_subject is not null and oidc_issuer is not null and char_length(oidc_subject) between 1 and 512
          and char_length(oidc_issuer) between 1 and 2048 and (oidc_email is null or char_length(oidc_email) <= 320)))`.execute(db);
  }
}

async function down(db: AnyDb): Promise<void> {
  for (const table of ['admin_users', 'identities']) {
    await sql`alter table ${sql.table(table)} drop constraint ${sql.raw(`${table}_oidc_mapping_check`)}`.execute(db);
    await sql`alter table ${sql.table(table)} drop constraint ${sql.raw(`${table}_oidc_issuer_subject_key`)}`.execute(db);
    await sql`alter table ${sql.table(table)} add constraint ${sql.raw(`${table}_oidc_subject_key`)} unique (oidc_subject)`.execute(db);
    await sql`alter table ${sql.table(table)} drop column oidc_issuer`.execute(db);
  }
}

export const oidcSubjects: Migration = { up, down };
