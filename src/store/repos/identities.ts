// Identities (agents, spec §2): CRUD and lookups by key digest; the stored digests never leave through the public columns.
import { sql } from 'kysely';
import type { Identity, JsonObject } from '../schema.js';
import { defined, guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'identity';

/** The columns an API response may carry (spec §2 Identity): never the key digests or the SCRAM verifier. */
export const IDENTITY_PUBLIC_COLUMNS = [
  'id',
  'name',
  'agent_type',
  'roles',
  'enabled',
  'metadata',
  'mapped_pg_role',
  'team',
  'pg_username',
  'created_at',
  'updated_at',
] as const;
export type PublicIdentity = Pick<Identity, (typeof IDENTITY_PUBLIC_COLUMNS)[number]>;

export interface NewIdentityInput {
  name: string;
  agent_type?: string;
  roles?: string[];
  enabled?: boolean;
  metadata?: JsonObject;
  mapped_pg_role?: string | null;
  team?: string | null;
  api_key_digest?: string | null;
  api_key_legacy_digest?: string | null;
  scram_verifier?: string | null;
  pg_username?: string | null;
}

export type IdentityPatch = Partial<NewIdentityInput>;

export function createIdentity(db: Db, input: NewIdentityInput): Promise<Identity> {
  const { metadata, ...rest } = input;
  return guard(RESOURCE, () =>
    db
      .insertInto('identities')
      .values({ ...rest, ...(metadata !== undefined ? { metadata: json(metadata) } : {}) })
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
}

export function getIdentityById(db: Db, id: number): Promise<Identity | undefined> {
  return db.selectFrom('identities').selectAll().where('id', '=', id).executeTakeFirst();
}

export function getIdentityByName(db: Db, name: string): Promise<Identity | undefined> {
  return db.selectFrom('identities').selectAll().where('name', '=', name).executeTakeFirst();
}

/** Lookup by HMAC digest (unique index); the caller still compares in constant time. */
export function getIdentityByApiKeyDigest(db: Db, digest: string): Promise<Identity | undefined> {
  return db.selectFrom('identities').selectAll().where('api_key_digest', '=', digest).executeTakeFirst();
}

export function getIdentityByLegacyDigest(db: Db, digest: string): Promise<Identity | undefined> {
  return db.selectFrom('identities').selectAll().where('api_key_legacy_digest', '=', digest).executeTakeFirst();
}

export function getIdentityByPgUsername(db: Db, pgUsername: string): Promise<Identity | undefined> {
  return db.selectFrom('identities').selectAll().where('pg_username', '=', pgUsername).executeTakeFirst();
}

/** Public columns only, ordered by id. */
export function listIdentities(db: Db, opts: { limit?: number; offset?: number } = {}): Promise<PublicIdentity[]> {
  return db
    .selectFrom('identities')
    .select(IDENTITY_PUBLIC_COLUMNS)
    .orderBy('id')
    .limit(opts.limit ?? 1000)
    .offset(opts.offset ?? 0)
    .execute();
}

/**
 * Partial update. Every change advances auth_version: key sessions cached in the coordination
 * store compare it, so a changed identity (disabled, re-keyed, renamed) is re-read at once.
 */
export async function updateIdentity(db: Db, id: number, patch: IdentityPatch): Promise<Identity | undefined> {
  const { metadata, ...rest } = defined(patch);
  if (Object.keys(rest).length === 0 && metadata === undefined) return getIdentityById(db, id);
  return guard(RESOURCE, () =>
    db
      .updateTable('identities')
      .set({
        ...rest,
        ...(metadata !== undefined ? { metadata: json(metadata) } : {}),
        auth_version: sql<number>`auth_version + 1`,
        updated_at: sql`now()`,
      })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst(),
  );
}

/** True when deleted; grants and approvals of the identity go with it (FK cascade). */
export async function deleteIdentity(db: Db, id: number): Promise<boolean> {
  const result = await guard(RESOURCE, () => db.deleteFrom('identities').where('id', '=', id).executeTakeFirst());
  return result.numDeletedRows > 0n;
}
