// Short-lived agent key sessions in the coordination store (`keysession:<digest>`), and their revocation when an identity or its grants change.
import type { Coordination } from '../coord/index.js';
import type { Db } from '../store/repos/util.js';
import type { Logger } from '../observability/logger.js';

/** What the gateway needs about an authenticated agent; cached as the key session's value. */
export interface AgentIdentity {
  id: number;
  name: string;
  roles: string[];
  team: string | null;
  mapped_pg_role: string | null;
  enabled: boolean;
  grant_version: number;
  auth_version: number;
}

export interface KeySessionDeps {
  db: Db;
  coord: Coordination;
  log: Logger;
  /** auth.key_session_ttl_seconds; 0 turns key sessions off. */
  ttlSeconds: number;
}

/**
 * A revocation marker rather than a plain delete: an authentication that read the database just before
 * the change cannot write its stale session over the marker (sessions are written with setIfAbsent).
 */
export const REVOKED_MARKER = 'revoked';

export function keySessionKey(digest: string): string {
  return `keysession:${digest}`;
}

interface StoredSession {
  v: 1;
  digest: string;
  identity: AgentIdentity;
}

export function encodeSession(digest: string, identity: AgentIdentity): string {
  const s: StoredSession = { v: 1, digest, identity };
  return JSON.stringify(s);
}

/** The session's identity, 'revoked', or null when absent or unreadable. */
export function decodeSession(raw: string | null): StoredSession | 'revoked' | null {
  if (raw === null) return null;
  if (raw === REVOKED_MARKER) return 'revoked';
  try {
    const parsed = JSON.parse(raw) as Partial<StoredSession>;
    if (parsed.v !== 1 || typeof parsed.digest !== 'string' || typeof parsed.identity?.id !== 'number') return null;
    return parsed as StoredSession;
  } catch {
    return null;
  }
}

/**
 * Revokes the key sessions of the given digests. Returns false when the coordination store could not be
 * reached: the database change still stands, and a stale session then lives at most one TTL.
 */
export async function revokeKeySessions(deps: KeySessionDeps, digests: ReadonlyArray<string | null | undefined>): Promise<boolean> {
  const keys = digests.filter((d): d is string => typeof d === 'string' && d.length > 0);
  if (keys.length === 0 || deps.ttlSeconds <= 0) return true;
  try {
    for (const d of keys) await deps.coord.set(keySessionKey(d), REVOKED_MARKER, { ttlMs: deps.ttlSeconds * 1000 });
    return true;
  } catch (err) {
    deps.log.error({ err: { code: (err as { code?: string }).code } }, 'key session revocation failed; stale sessions expire within the key session TTL');
    return false;
  }
}

/** Revokes the sessions of identities by id (grant changes, source deletion): reads their current digests. */
export async function revokeIdentityKeySessions(deps: KeySessionDeps, identityIds: readonly number[]): Promise<boolean> {
  const ids = [...new Set(identityIds)];
  if (ids.length === 0 || deps.ttlSeconds <= 0) return true;
  const rows = await deps.db.selectFrom('identities').select('api_key_digest').where('id', 'in', ids).execute();
  return revokeKeySessions(deps, rows.map((r) => r.api_key_digest));
}
