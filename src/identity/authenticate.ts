// Agent-facing authentication (spec §5.1): `Authorization: Bearer <key>` → the identity, through the key session or the control store.
import { sql } from 'kysely';
import type { Identity } from '../store/schema.js';
import { getIdentityByApiKeyDigest, getIdentityByLegacyDigest } from '../store/repos/identities.js';
import { GatehouseError, isGatehouseError } from '../errors/registry.js';
import { translateConnectionError } from '../store/errors.js';
import { API_KEY_CHARSET, MAX_API_KEY_LENGTH, digestApiKey, digestsEqual, legacyDigest, scramVerifier } from './keys.js';
import { decodeSession, encodeSession, keySessionKey, type AgentIdentity, type KeySessionDeps } from './key-sessions.js';

export interface AgentAuthDeps extends KeySessionDeps {
  /** The HMAC pepper (auth.api_key_pepper_ref, resolved). */
  pepper: string;
  /** auth.legacy_unpeppered_keys_allowed. */
  legacyAllowed: boolean;
}

const BEARER = /^Bearer ([^\s]+)$/i;
const MAX_HEADER_LENGTH = 'Bearer '.length + MAX_API_KEY_LENGTH;

function unauthenticated(): GatehouseError {
  return new GatehouseError('unauthenticated');
}

/** The key of a well-formed `Bearer <key>` header, or null. Bounded before any regex work. */
export function bearerKey(header: string | undefined): string | null {
  if (typeof header !== 'string' || header.length === 0 || header.length > MAX_HEADER_LENGTH) return null;
  const m = BEARER.exec(header);
  if (!m) return null;
  const key = m[1]!;
  return API_KEY_CHARSET.test(key) ? key : null;
}

export function toAgentIdentity(row: Identity): AgentIdentity {
  return {
    id: row.id,
    name: row.name,
    roles: [...row.roles],
    team: row.team,
    mapped_pg_role: row.mapped_pg_role,
    enabled: row.enabled,
    grant_version: Number(row.grant_version),
    auth_version: Number(row.auth_version),
  };
}

/** Store failures are "unavailable" (fail closed, 503), never "unauthenticated". */
async function fromStore<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const unavailable = translateConnectionError(err, null);
    throw new GatehouseError(unavailable ? 'unavailable' : 'internal', undefined, { cause: err });
  }
}

/** Looks the key up by peppered digest, then (when allowed) by legacy digest, rehashing the legacy one. */
async function identityFromStore(deps: AgentAuthDeps, key: string, digest: string): Promise<Identity | null> {
  const row = await fromStore(() => getIdentityByApiKeyDigest(deps.db, digest));
  if (row && row.api_key_digest !== null && digestsEqual(row.api_key_digest, digest)) return row;
  if (!deps.legacyAllowed) return null;
  const legacy = legacyDigest(key);
  const old = await fromStore(() => getIdentityByLegacyDigest(deps.db, legacy));
  if (!old || old.api_key_legacy_digest === null || !digestsEqual(old.api_key_legacy_digest, legacy)) return null;
  // Rehash on first use: the legacy digest is cleared in the same statement, and only if it is still the one we matched.
  const verifier = await scramVerifier(key);
  const upgraded = await fromStore(() =>
    deps.db
      .updateTable('identities')
      .set({ api_key_digest: digest, api_key_legacy_digest: null, scram_verifier: verifier, updated_at: sql`now()` })
      .where('id', '=', old.id)
      .where('api_key_legacy_digest', '=', legacy)
      .returningAll()
      .executeTakeFirst(),
  );
  if (upgraded) deps.log.info({ identity_id: old.id }, 'legacy API key digest rehashed with the pepper');
  return upgraded ?? (await fromStore(() => getIdentityByApiKeyDigest(deps.db, digest))) ?? null;
}

/**
 * Authenticates an agent. Throws GatehouseError('unauthenticated') when the header is missing or
 * malformed, the key is unknown or the identity is disabled; 'unavailable' when neither the key session
 * nor the control store can answer. With the coordination store down, the database answers alone.
 */
export async function authenticateAgent(deps: AgentAuthDeps, authorizationHeader: string | undefined): Promise<AgentIdentity> {
  const key = bearerKey(authorizationHeader);
  if (key === null) throw unauthenticated();
  const rememberedDigest = deps.memo?.digestOf(deps.pepper, key);
  const digest = rememberedDigest ?? digestApiKey(deps.pepper, key);
  const accepted = (identity: AgentIdentity): AgentIdentity => {
    if (rememberedDigest === undefined) deps.memo?.rememberDigest(deps.pepper, key, digest);
    return identity;
  };
  const sessionKey = keySessionKey(digest);
  const useSessions = deps.ttlSeconds > 0;

  let coordUp = useSessions;
  let revoked = false;
  let revokedAt: number | null = null;
  const revision = deps.memo?.revision ?? 0;
  if (useSessions) {
    const remembered = deps.memo?.get(digest);
    if (remembered !== undefined) return accepted(remembered);
    try {
      const session = decodeSession(await deps.coord.get(sessionKey));
      if (session !== null && 'revoked' in session) {
        revoked = true;
        revokedAt = session.at;
      } else if (session !== null && digestsEqual(session.digest, digest) && session.identity.enabled) {
        deps.memo?.set(digest, session.identity, revision);
        if (typeof session.at === 'number') deps.memo?.keepStandby(digest, session.identity, session.at, revision);
        return accepted(session.identity);
      }
    } catch {
      coordUp = false;
    }
  }

  const verifiedAt = Date.now();
  let row: Identity | null;
  try {
    row = await identityFromStore(deps, key, digest);
  } catch (err) {
    // The control store cannot answer: a key this process verified within one session TTL is served from memory, as a
    // key session in the coordination store would be (it may have been lost with a Redis restart). Only with the
    // coordination store answering, so revocations still reach this process; never for a revoked or unknown key.
    const standby = coordUp && isGatehouseError(err) && err.code === 'unavailable' ? deps.memo?.standby(digest, revokedAt) : undefined;
    if (standby !== undefined) return accepted(standby);
    throw err;
  }
  if (row === null || !row.enabled) throw unauthenticated();
  const identity = toAgentIdentity(row);
  if (useSessions) deps.memo?.keepStandby(digest, identity, verifiedAt, revision);
  if (coordUp && !revoked) {
    try {
      await deps.coord.setIfAbsent(sessionKey, encodeSession(digest, identity, verifiedAt), { ttlMs: deps.ttlSeconds * 1000 });
    } catch {
      // The session is an optimisation; the database already answered.
    }
  }
  return accepted(identity);
}
