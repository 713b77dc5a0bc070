// Role records per source (DESIGN §6): CRUD; rule shapes are validated by the roles module, stored here as given.
import { sql } from 'kysely';
import type { JsonValue, SourceRole } from '../schema.js';
import { defined, guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'source role';

export interface NewSourceRoleInput {
  source_id: string;
  role_key: string;
  description?: string;
  enabled?: boolean;
  rules?: JsonValue;
}

export interface SourceRolePatch {
  role_key?: string;
  description?: string;
  enabled?: boolean;
  rules?: JsonValue;
}

export function createSourceRole(db: Db, input: NewSourceRoleInput): Promise<SourceRole> {
  const { rules, ...rest } = input;
  return guard(RESOURCE, () =>
    db
      .insertInto('source_roles')
      .values({ ...rest, ...(rules !== undefined ? { rules: json(rules) } : {}) })
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
}

export function getSourceRoleById(db: Db, id: number): Promise<SourceRole | undefined> {
  return db.selectFrom('source_roles').selectAll().where('id', '=', id).executeTakeFirst();
}

export function getSourceRoleByKey(db: Db, sourceId: string, roleKey: string): Promise<SourceRole | undefined> {
  return db.selectFrom('source_roles').selectAll().where('source_id', '=', sourceId).where('role_key', '=', roleKey).executeTakeFirst();
}

export function listSourceRoles(db: Db, sourceId: string): Promise<SourceRole[]> {
  return db.selectFrom('source_roles').selectAll().where('source_id', '=', sourceId).orderBy('id').execute();
}

/** Changing rules, enabled or role_key advances the grant version of every identity holding the role (trigger). */
export async function updateSourceRole(db: Db, id: number, patch: SourceRolePatch): Promise<SourceRole | undefined> {
  const { rules, ...rest } = defined(patch);
  if (Object.keys(rest).length === 0 && rules === undefined) return getSourceRoleById(db, id);
  return guard(RESOURCE, () =>
    db
      .updateTable('source_roles')
      .set({ ...rest, ...(rules !== undefined ? { rules: json(rules) } : {}), updated_at: sql`now()` })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst(),
  );
}

/** True when deleted; grants of the role go with it (FK cascade). */
export async function deleteSourceRole(db: Db, id: number): Promise<boolean> {
  const result = await guard(RESOURCE, () => db.deleteFrom('source_roles').where('id', '=', id).executeTakeFirst());
  return result.numDeletedRows > 0n;
}
