// Single sign-on subject mappings of admins and agent identities (spec §2, §5.4): set, clear and look up by (issuer, subject); a changed admin mapping advances auth_version (spec §5.3).
import { sql } from 'kysely';
import type { AdminUser, Identity } from '../schema.js';
import { guard, type Db } from './util.js';

export interface SubjectMapping {
  issuer: string;
  subject: string;
  email: string | null;
}

/** The columns a mapping sets on an admin or identity row: auth_version advances when issuer or subject change. */
function mappingColumns(mapping: SubjectMapping | null) {
  const issuer = mapping?.issuer ?? null;
  const subject = mapping?.subject ?? null;
  return {
    oidc_issuer: issuer,
    oidc_subject: subject,
    oidc_email: mapping?.email ?? null,
    auth_version: sql<number>`auth_version + (case when oidc_issuer is distinct from ${issuer}::text or oidc_subject is distinct from ${subject}::text then 1 else 0 end)`,
    updated_at: sql<Date>`now()`,
  };
}

/** Sets (or with null clears) an admin's mapping; auth_version advances in the same statement when issuer or subject change. */
export function setAdminSubject(db: Db, adminId: number, mapping: SubjectMapping | null): Promise<AdminUser | undefined> {
  return guard('admin user', () =>
    db
      .updateTable('admin_users')
      .set(mappingColumns(mapping))
      .where('id', '=', adminId)
      .returningAll()
      .executeTakeFirst(),
  );
}

/** Sets (or clears) an identity's mapping; auth_version advances when issuer or subject change, as for every identity change. */
export function setIdentitySubject(db: Db, identityId: number, mapping: SubjectMapping | null): Promise<Identity | undefined> {
  return guard('identity', () =>
    db
      .updateTable('identities')
      .set(mappingColumns(mapping))
      .where('id', '=', identityId)
      .returningAll()
      .executeTakeFirst(),
  );
}

export function getAdminBySubject(db: Db, issuer: string, subject: string): Promise<AdminUser | undefined> {
  return db.selectFrom('admin_users').selectAll().where('oidc_issuer', '=', issuer).where('oidc_subject', '=', subject).executeTakeFirst();
}

export function getIdentityBySubject(db: Db, issuer: string, subject: string): Promise<Identity | undefined> {
  return db.selectFrom('identities').selectAll().where('oidc_issuer', '=', issuer).where('oidc_subject', '=', subject).executeTakeFirst();
}
