// Admin JSON API for identities (agents, spec §2 / DESIGN §5): CRUD and key rotation; keys are shown once and never stored in clear.
import { z } from 'zod';
import type { Identity } from '../../store/schema.js';
import { createIdentity, deleteIdentity, getIdentityById, getIdentityByName, getIdentityByPgUsername, listIdentities, updateIdentity } from '../../store/repos/identities.js';
import { GatehouseError } from '../../errors/registry.js';
import { customKeyProblem, generateApiKey, keyMaterial } from '../../identity/keys.js';
import { agentAuthDeps, revokeKeySessions } from '../../identity/index.js';
import { requirePermission } from '../auth/principal.js';
import type { AdminModule } from '../module.js';
import { intId } from './route.js';
import { audit, given, iso, metadataSchema, notFound } from './shared.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9 ._@:+-]*$/;
const nameSchema = z.string().min(1).max(128).regex(NAME, 'must start with a letter or digit and use letters, digits, spaces or . _ @ : + -');
const agentTypeSchema = z.string().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'must use letters, digits, ".", "_" or "-"');
const roleSchema = z.string().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, 'must use letters, digits, ".", "_", ":" or "-"');
const rolesSchema = z.array(roleSchema).max(64);
const teamSchema = z.string().min(1).max(128).regex(NAME, 'must start with a letter or digit and use letters, digits, spaces or . _ @ : + -');
/** An unquoted PostgreSQL role name: lower case, at most 63 bytes, not a reserved pg_ role or PUBLIC. */
const pgRoleSchema = z
  .string()
  .regex(/^[a-z_][a-z0-9_$]{0,62}$/, 'must be a valid PostgreSQL identifier (lower case letters, digits, "_" or "$", at most 63 characters)')
  .refine((s) => !s.startsWith('pg_') && s !== 'public', 'must not be a reserved PostgreSQL role name');

/**
 * The wire user name (docs/pgwire.md "Login"): what psql's -U names. Letters, digits and `_ . @ -`, at most 63
 * characters (PostgreSQL's NAMEDATALEN), so it is typed the same way in every client and shell.
 */
const pgUsernameSchema = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[A-Za-z0-9_][A-Za-z0-9_.@-]*$/, 'must start with a letter, digit or "_" and use letters, digits, "_", ".", "@" or "-" (at most 63 characters)');

export interface IdentityResponse {
  id: number;
  name: string;
  agent_type: string;
  roles: string[];
  enabled: boolean;
  metadata: Record<string, unknown>;
  mapped_pg_role: string | null;
  team: string | null;
  created_at: string | null;
  updated_at: string | null;
  /** Present only when set: an optional field beside the spec §2 ones (spec §9, adding an optional field is compatible). */
  pg_username?: string;
}

/** The spec §2 response fields (plus pg_username when set): the digests and the SCRAM verifier cannot leak through here. */
export function publicIdentity(
  row: Pick<Identity, 'id' | 'name' | 'agent_type' | 'roles' | 'enabled' | 'metadata' | 'mapped_pg_role' | 'team' | 'created_at' | 'updated_at'> & { pg_username?: string | null },
): IdentityResponse {
  return {
    id: row.id,
    name: row.name,
    agent_type: row.agent_type,
    roles: [...row.roles],
    enabled: row.enabled,
    metadata: row.metadata,
    mapped_pg_role: row.mapped_pg_role,
    team: row.team,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    ...(row.pg_username ? { pg_username: row.pg_username } : {}),
  };
}

const identityResponse = z.object({
  id: z.number().int(),
  name: z.string(),
  agent_type: z.string(),
  roles: z.array(z.string()),
  enabled: z.boolean(),
  metadata: z.record(z.string(), z.unknown()),
  mapped_pg_role: z.string().nullable(),
  team: z.string().nullable(),
  created_at: z.string().nullable(),
  updated_at: z.string().nullable(),
  pg_username: z.string().optional(),
});

const updateSchema = z.strictObject({
  agent_type: agentTypeSchema.nullish(),
  enabled: z.boolean().nullish(),
  mapped_pg_role: pgRoleSchema.nullish(),
  metadata: metadataSchema.nullish(),
  name: nameSchema.nullish(),
  roles: rolesSchema.nullish(),
  team: teamSchema.nullish(),
  pg_username: pgUsernameSchema.nullish(),
});

const idParams = z.strictObject({ id: intId });

export const identitiesModule: AdminModule = ({ app, api, services }) => {
  const read = requirePermission('identities:read');
  const write = requirePermission('identities:write');
  const policy = services.config.auth.custom_key;
  const deps = agentAuthDeps(services);
  const pepper = (): string => services.secrets.get('auth.api_key_pepper_ref');

  /**
   * One wire user name, one identity (docs/pgwire.md "Login"): a pg_username may not be another identity's
   * pg_username (the unique constraint, 409) nor the name another identity logs in with when it has no pg_username.
   */
  const refuseWireNameClash = async (wireName: string, self: number | null): Promise<void> => {
    const byPg = await getIdentityByPgUsername(services.db, wireName);
    const byName = await getIdentityByName(services.db, wireName);
    const clash = (byPg && byPg.id !== self) || (byName && byName.id !== self && byName.pg_username === null);
    if (clash) throw new GatehouseError('conflict', 'Another identity already logs in to the wire listener with this user name (pg_username or name).');
  };

  const createSchema = z
    .strictObject({
      name: nameSchema,
      /** Required by the spec; may be left out only together with `generate_key: true`. */
      api_key: z.string().max(4096).optional(),
      generate_key: z.boolean().default(false),
      agent_type: agentTypeSchema.default('custom'),
      enabled: z.boolean().default(true),
      mapped_pg_role: pgRoleSchema.nullable().default(null),
      metadata: metadataSchema.default({}),
      roles: rolesSchema.default([]),
      team: teamSchema.nullable().default(null),
      pg_username: pgUsernameSchema.nullable().default(null),
    })
    .superRefine((b, ctx) => {
      if (b.api_key === undefined) {
        if (!b.generate_key) ctx.addIssue({ code: 'custom', path: ['api_key'], message: 'Field required (or set generate_key: true to have the service generate one)', input: undefined });
        return;
      }
      if (b.generate_key) {
        ctx.addIssue({ code: 'custom', path: ['generate_key'], message: 'give api_key or generate_key: true, not both' });
        return;
      }
      const problem = customKeyProblem(b.api_key, policy);
      // The message names the rule broken and never the key.
      if (problem !== null) ctx.addIssue({ code: 'custom', path: ['api_key'], message: `api_key ${problem}` });
    });

  api.route(app, {
    method: 'GET',
    url: '/api/identities',
    summary: 'List identities',
    tags: ['identities'],
    preHandler: read,
    response: z.array(identityResponse),
    handler: async () => (await listIdentities(services.db)).map(publicIdentity),
  });

  api.route(app, {
    method: 'POST',
    url: '/api/identities',
    summary: 'Create an identity; a generated key is returned once as api_key',
    tags: ['identities'],
    preHandler: write,
    body: createSchema,
    response: identityResponse.extend({ api_key: z.string().optional() }),
    successStatus: 201,
    handler: async ({ body, req }) => {
      await refuseWireNameClash(body.pg_username ?? body.name, null);
      const generated = body.api_key === undefined;
      const key = body.api_key ?? generateApiKey();
      const material = await keyMaterial(pepper(), key);
      const row = await createIdentity(services.db, {
        name: body.name,
        agent_type: body.agent_type,
        enabled: body.enabled,
        mapped_pg_role: body.mapped_pg_role,
        metadata: body.metadata as never,
        roles: body.roles,
        team: body.team,
        pg_username: body.pg_username,
        ...material,
      });
      const out = publicIdentity(row);
      await audit(services, req, 'identity.create', { type: 'identity', id: row.id }, { after: { ...out, api_key: generated ? 'generated' : 'supplied' } }, 201);
      // A supplied key is not echoed: the caller has it, and responses never carry a secret they do not have to.
      return generated ? { ...out, api_key: key } : out;
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/identities/:id',
    summary: 'Get an identity',
    tags: ['identities'],
    preHandler: read,
    params: idParams,
    response: identityResponse,
    handler: async ({ params }) => {
      const row = await getIdentityById(services.db, params.id);
      if (!row) throw notFound('identity');
      return publicIdentity(row);
    },
  });

  api.route(app, {
    method: 'PATCH',
    url: '/api/identities/:id',
    summary: 'Update an identity (null leaves a required field unchanged and clears mapped_pg_role / team)',
    tags: ['identities'],
    preHandler: write,
    params: idParams,
    body: updateSchema,
    response: identityResponse,
    handler: async ({ params, body, req }) => {
      const before = await getIdentityById(services.db, params.id);
      if (!before) throw notFound('identity');
      const wireName = (body.pg_username !== undefined ? body.pg_username : before.pg_username) ?? (given(body.name) ? body.name : before.name);
      if (wireName !== (before.pg_username ?? before.name)) await refuseWireNameClash(wireName, before.id);
      const patch = {
        ...(given(body.agent_type) ? { agent_type: body.agent_type } : {}),
        ...(given(body.enabled) ? { enabled: body.enabled } : {}),
        ...(given(body.metadata) ? { metadata: body.metadata as never } : {}),
        ...(given(body.name) ? { name: body.name } : {}),
        ...(given(body.roles) ? { roles: body.roles } : {}),
        ...(body.mapped_pg_role !== undefined ? { mapped_pg_role: body.mapped_pg_role } : {}),
        ...(body.team !== undefined ? { team: body.team } : {}),
        ...(body.pg_username !== undefined ? { pg_username: body.pg_username } : {}),
      };
      const row = await updateIdentity(services.db, params.id, patch);
      if (!row) throw notFound('identity');
      await revokeKeySessions(deps, [before.api_key_digest, row.api_key_digest]);
      const out = publicIdentity(row);
      await audit(services, req, 'identity.update', { type: 'identity', id: row.id }, { before: publicIdentity(before), after: out });
      return out;
    },
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/identities/:id',
    summary: 'Delete an identity (its grants go with it)',
    tags: ['identities'],
    preHandler: write,
    params: idParams,
    response: z.object({ deleted: z.boolean(), id: z.number().int() }),
    handler: async ({ params, req }) => {
      const before = await getIdentityById(services.db, params.id);
      if (!before) throw notFound('identity');
      const deleted = await deleteIdentity(services.db, params.id);
      if (!deleted) throw notFound('identity');
      await revokeKeySessions(deps, [before.api_key_digest]);
      await audit(services, req, 'identity.delete', { type: 'identity', id: params.id }, { before: publicIdentity(before) });
      return { deleted: true, id: params.id };
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/identities/:id/rotate-key',
    summary: 'Replace the identity\'s key with a generated one, shown once; the old key stops working at once',
    tags: ['identities'],
    preHandler: write,
    params: idParams,
    response: z.object({ api_key: z.string() }),
    handler: async ({ params, req }) => {
      const before = await getIdentityById(services.db, params.id);
      if (!before) throw notFound('identity');
      const key = generateApiKey();
      const material = await keyMaterial(pepper(), key);
      const row = await updateIdentity(services.db, params.id, material);
      if (!row) throw notFound('identity');
      await revokeKeySessions(deps, [before.api_key_digest]);
      await audit(services, req, 'identity.rotate_key', { type: 'identity', id: params.id }, { before: { api_key: 'previous key' }, after: { api_key: 'generated' } });
      return { api_key: key };
    },
  });
};
