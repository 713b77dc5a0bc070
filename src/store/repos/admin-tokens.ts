// Admin API tokens: stored by hash only, scoped to one admin user.
import { sql } from 'kysely';
import type { AdminToken, AdminUser } from '../schema.js';
import { defined, guard } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'admin token';

export interface NewAdminTokenInput {
  admin_user_id: number;
  name: string;
  /** Hash of the token; the token itself is shown once by the caller and never stored. */
  token_hash: string;
  expires_at?: Date | null;
}

export interface AdminTokenPatch {
  name?: string;
  expires_at?: Date | null;
}

export function createAdminToken(db: Db, input: NewAdminTokenInput): Promise<AdminToken> {
  return guard(RESOURCE, () => db.insertInto('admin_tokens').values(input).returningAll().executeTakeFirstOrThrow());
}

export function getAdminTokenById(db: Db, id: number): Promise<AdminToken | undefined> {
  return db.selectFrom('admin_tokens').selectAll().where('id', '=', id).executeTakeFirst();
}

export function getAdminTokenByHash(db: Db, tokenHash: string): Promise<AdminToken | undefined> {
  return db.selectFrom('admin_tokens').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
}

/**
 * The token and its admin in one query, for bearer authentication (every automation request): only an
 * unexpired token of an enabled admin is returned.
 */
export async function findUsableAdminToken(db: Db, tokenHash: string): Promise<{ token: AdminToken; admin: AdminUser } | undefined> {
  const row = await db
    .selectFrom('admin_tokens as t')
    .innerJoin('admin_users as u', 'u.id', 't.admin_user_id')
    .selectAll('u')
    .select(['t.id as token_id', 't.name as token_name', 't.created_at as token_created_at', 't.last_used_at as token_last_used_at', 't.expires_at as token_expires_at'])
    .where('t.token_hash', '=', tokenHash)
    .where('u.enabled', '=', true)
    .where((eb) => eb.or([eb('t.expires_at', 'is', null), eb('t.expires_at', '>', sql<Date>`now()`)]))
    .executeTakeFirst();
  if (!row) return undefined;
  const { token_id, token_name, token_created_at, token_last_used_at, token_expires_at, ...admin } = row;
  return {
    token: { id: token_id, admin_user_id: admin.id, name: token_name, token_hash: tokenHash, created_at: token_created_at, last_used_at: token_last_used_at, expires_at: token_expires_at },
    admin,
  };
}

export function listAdminTokens(db: Db, adminUserId?: number): Promise<AdminToken[]> {
  let query = db.selectFrom('admin_tokens').selectAll().orderBy('id');
  if (adminUserId !== undefined) query = query.where('admin_user_id', '=', adminUserId);
  return query.execute();
}

export async function updateAdminToken(db: Db, id: number, patch: AdminTokenPatch): Promise<AdminToken | undefined> {
  const values = defined(patch);
  if (Object.keys(values).length === 0) return getAdminTokenById(db, id);
  return guard(RESOURCE, () => db.updateTable('admin_tokens').set(values).where('id', '=', id).returningAll().executeTakeFirst());
}

export async function touchAdminToken(db: Db, id: number): Promise<void> {
  await db.updateTable('admin_tokens').set({ last_used_at: sql`now()` }).where('id', '=', id).execute();
}

/** True when deleted; with adminUserId, only that admin's token can be deleted. */
export async function deleteAdminToken(db: Db, id: number, adminUserId?: number): Promise<boolean> {
  let query = db.deleteFrom('admin_tokens').where('id', '=', id);
  if (adminUserId !== undefined) query = query.where('admin_user_id', '=', adminUserId);
  const result = await query.executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** Removes every API token of an admin (when the admin is disabled); resolves to the number removed. */
export async function deleteAdminTokensOfUser(db: Db, adminUserId: number): Promise<number> {
  const result = await db.deleteFrom('admin_tokens').where('admin_user_id', '=', adminUserId).executeTakeFirst();
  return Number(result.numDeletedRows);
}
