// Source role grants (identity × source × role, spec §2): CRUD, active-grant lookup and the per-identity grant version.
import { sql } from 'kysely';
import type { SourceRole, SourceRoleGrant } from '../schema.js';
import { roleRulesSchema, type Grant, type SourceRole as DecisionRole, type SourceRoleContext } from '../../governance/source-roles.js';
import { defined, guard } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'grant';

/** The spec's grant response carries the role's key next to its id. */
export type GrantWithRole = SourceRoleGrant & { role_key: string };

export interface NewGrantInput {
  identity_id: number;
  source_id: string;
  role_id: number;
  enabled?: boolean;
  expires_at?: Date | string | null;
  granted_by?: number | null;
}

export interface GrantPatch {
  enabled?: boolean;
  expires_at?: Date | string | null;
}

function withRole(db: Db) {
  return db
    .selectFrom('source_role_grants as g')
    .innerJoin('source_roles as r', 'r.id', 'g.role_id')
    .selectAll('g')
    .select('r.role_key');
}

/** The role must belong to source_id (composite foreign key): otherwise InvalidReferenceError on role_id. */
export async function createGrant(db: Db, input: NewGrantInput): Promise<GrantWithRole> {
  const grant = await guard(RESOURCE, () => db.insertInto('source_role_grants').values(input).returning('id').executeTakeFirstOrThrow());
  return (await getGrantById(db, grant.id))!;
}

export function getGrantById(db: Db, id: number): Promise<GrantWithRole | undefined> {
  return withRole(db).where('g.id', '=', id).executeTakeFirst();
}

export function listGrantsForIdentity(db: Db, identityId: number): Promise<GrantWithRole[]> {
  return withRole(db).where('g.identity_id', '=', identityId).orderBy('g.id').execute();
}

export function listGrantsForSource(db: Db, sourceId: string): Promise<GrantWithRole[]> {
  return withRole(db).where('g.source_id', '=', sourceId).orderBy('g.id').execute();
}

/**
 * The roles an identity can use on a source right now: grant enabled and unexpired, role enabled.
 * Expiry is judged by the database clock (`now()`), one clock for every replica.
 */
export async function listActiveRoles(db: Db, identityId: number, sourceId: string): Promise<SourceRole[]> {
  return db
    .selectFrom('source_role_grants as g')
    .innerJoin('source_roles as r', 'r.id', 'g.role_id')
    .selectAll('r')
    .where('g.identity_id', '=', identityId)
    .where('g.source_id', '=', sourceId)
    .where('g.enabled', '=', true)
    .where('r.enabled', '=', true)
    .where((eb) => eb.or([eb('g.expires_at', 'is', null), eb('g.expires_at', '>', sql<Date>`now()`)]))
    .orderBy('r.id')
    .execute();
}

export async function updateGrant(db: Db, id: number, patch: GrantPatch): Promise<GrantWithRole | undefined> {
  const values = defined(patch);
  if (Object.keys(values).length > 0) {
    const updated = await guard(RESOURCE, () =>
      db
        .updateTable('source_role_grants')
        .set({ ...values, updated_at: sql`now()` })
        .where('id', '=', id)
        .executeTakeFirst(),
    );
    if (updated.numUpdatedRows === 0n) return undefined;
  }
  return getGrantById(db, id);
}

/** True when deleted; with identityId, only a grant of that identity (the API path scopes it). */
export async function deleteGrant(db: Db, id: number, identityId?: number): Promise<boolean> {
  let query = db.deleteFrom('source_role_grants').where('id', '=', id);
  if (identityId !== undefined) query = query.where('identity_id', '=', identityId);
  const result = await guard(RESOURCE, () => query.executeTakeFirst());
  return result.numDeletedRows > 0n;
}

/**
 * The identity's grant version: advanced by trigger on every grant insert, update and delete
 * (cascades included) and on rule / enabled / key changes of a granted role. Cache scopes use it.
 */
export async function getGrantVersion(db: Db, identityId: number): Promise<number | undefined> {
  const row = await db.selectFrom('identities').select('grant_version').where('id', '=', identityId).executeTakeFirst();
  return row?.grant_version;
}

/** What sourceRoleDecision needs for one identity on one source, with the grant version it was read at (cache key). */
export interface LoadedSourceRoleContext extends SourceRoleContext {
  readonly identity_id: number;
  readonly grant_version: number;
}

/**
 * Loads the identity's grants on the source (enabled or not, expired or not: the decision skips and names
 * them) and the roles they point at, in one snapshot. Stored rules that no longer validate count as no rules,
 * so a damaged record can only deny. Returns null for an unknown identity.
 */
export async function loadSourceRoleContext(db: Db, identityId: number, sourceId: string, now: Date = new Date()): Promise<LoadedSourceRoleContext | null> {
  return db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(async (tx) => {
    const identity = await tx.selectFrom('identities').select('grant_version').where('id', '=', identityId).executeTakeFirst();
    if (!identity) return null;
    const rows = await withRole(tx).where('g.identity_id', '=', identityId).where('g.source_id', '=', sourceId).orderBy('g.id').execute();
    const roleIds = [...new Set(rows.map((r) => r.role_id))];
    const roleRows = roleIds.length === 0 ? [] : await tx.selectFrom('source_roles').selectAll().where('id', 'in', roleIds).orderBy('id').execute();
    const grants: Grant[] = rows.map((g) => ({
      id: g.id,
      identity_id: g.identity_id,
      source_id: g.source_id,
      role_id: g.role_id,
      role_key: g.role_key,
      enabled: g.enabled,
      expires_at: g.expires_at,
      granted_by: g.granted_by,
    }));
    const roles: DecisionRole[] = roleRows.map((r) => {
      const parsed = roleRulesSchema.safeParse(r.rules);
      return { id: r.id, source_id: r.source_id, role_key: r.role_key, description: r.description, enabled: r.enabled, rules: parsed.success ? parsed.data : { http: [], sql: [] } };
    });
    return { source_id: sourceId, identity_id: identityId, grant_version: Number(identity.grant_version), grants, roles, now };
  });
}
