// Admin accounts: CRUD, and the authorization version of spec §5.3 advanced in the same statement as the change.
import { sql } from 'kysely';
import type { AdminRole, AdminUser } from '../schema.js';
import { defined, guard } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'admin user';

export interface NewAdminUserInput {
  username: string;
  password_hash?: string | null;
  roles?: AdminRole[];
  enabled?: boolean;
  must_change_password?: boolean;
}

export type AdminUserPatch = Partial<NewAdminUserInput>;

export function createAdminUser(db: Db, input: NewAdminUserInput): Promise<AdminUser> {
  return guard(RESOURCE, () => db.insertInto('admin_users').values(input).returningAll().executeTakeFirstOrThrow());
}

export function getAdminUserById(db: Db, id: number): Promise<AdminUser | undefined> {
  return db.selectFrom('admin_users').selectAll().where('id', '=', id).executeTakeFirst();
}

export function getAdminUserByUsername(db: Db, username: string): Promise<AdminUser | undefined> {
  return db.selectFrom('admin_users').selectAll().where('username', '=', username).executeTakeFirst();
}

export function listAdminUsers(db: Db): Promise<AdminUser[]> {
  return db.selectFrom('admin_users').selectAll().orderBy('id').execute();
}

export async function countAdminUsers(db: Db): Promise<number> {
  const row = await db.selectFrom('admin_users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Partial update. When username, roles or enabled actually change, auth_version advances in the same statement,
 * so no session can outlive the change (spec §5.3); the SSO subject changes through repos/oidc-subjects.ts, which
 * does the same.
 */
export async function updateAdminUser(db: Db, id: number, patch: AdminUserPatch): Promise<AdminUser | undefined> {
  const values = defined(patch);
  if (Object.keys(values).length === 0) return getAdminUserById(db, id);
  const changed = [];
  if (values.username !== undefined) changed.push(sql`username is distinct from ${values.username}`);
  if (values.roles !== undefined) changed.push(sql`roles is distinct from ${values.roles}::text[]`);
  if (values.enabled !== undefined) changed.push(sql`enabled is distinct from ${values.enabled}`);
  const advance = changed.length > 0 ? sql<number>`auth_version + (case when ${sql.join(changed, sql` or `)} then 1 else 0 end)` : sql<number>`auth_version`;
  return guard(RESOURCE, () =>
    db
      .updateTable('admin_users')
      .set({ ...values, auth_version: advance, updated_at: sql`now()` })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst(),
  );
}

export async function recordAdminLogin(db: Db, id: number): Promise<void> {
  await db.updateTable('admin_users').set({ last_login_at: sql`now()` }).where('id', '=', id).execute();
}

/** True when a row was deleted; the admin's API tokens go with it (FK cascade). */
export async function deleteAdminUser(db: Db, id: number): Promise<boolean> {
  const result = await guard(RESOURCE, () => db.deleteFrom('admin_users').where('id', '=', id).executeTakeFirst());
  return result.numDeletedRows > 0n;
}

/** Sets a new password hash and advances auth_version in the same statement, so sessions made with the old password die. */
export function setAdminPassword(db: Db, id: number, passwordHash: string, mustChangePassword: boolean): Promise<AdminUser | undefined> {
  return db
    .updateTable('admin_users')
    .set({ password_hash: passwordHash, must_change_password: mustChangePassword, auth_version: sql<number>`auth_version + 1`, updated_at: sql`now()` })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Creates the bootstrap owner only while the table is empty. One statement with ON CONFLICT DO NOTHING,
 * so replicas starting together create exactly one owner; true when this call created it.
 */
export async function insertBootstrapOwner(db: Db, input: { username: string; password_hash: string; must_change_password: boolean }): Promise<boolean> {
  const result = await sql<{ id: number }>`
    insert into admin_users (username, password_hash, roles, must_change_password)
    select ${input.username}, ${input.password_hash}, array['owner']::text[], ${input.must_change_password}
    where not exists (select 1 from admin_users)
    on conflict (username) do nothing
    returning id`.execute(db);
  return result.rows.length > 0;
}

/** Ids of the enabled owners, row-locked until the transaction ends, so two concurrent demotions cannot both pass the last-owner check. */
export async function lockEnabledOwners(db: Db): Promise<number[]> {
  const rows = await db
    .selectFrom('admin_users')
    .select('id')
    .where('enabled', '=', true)
    .where(sql<boolean>`'owner' = any(roles)`)
    .orderBy('id')
    .forUpdate()
    .execute();
  return rows.map((r) => r.id);
}
