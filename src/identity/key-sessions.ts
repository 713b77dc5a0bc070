// Short-lived agent key sessions in the coordination store (`keysession:<digest>`), and their revocation when an identity or its grants change.
import type { LRUCache } from 'lru-cache';
import { ttlCache } from '../util/ttl-cache.js';
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
  /** The process's in-memory copy of recent key sessions (gateway processes); revocations reach it through pub/sub. */
  memo?: KeySessionMemo | undefined;
}

/** Revocations are broadcast here so every replica drops its in-memory key sessions at once. */
export const KEY_SESSION_REVOKED_CHANNEL = 'keysession:revoked';
/** The longest an in-memory key session is reused; revocation normally removes it within pub/sub latency. */
export const KEY_SESSION_MEMO_MS = 1_000;

/**
 * How long the digest of an accepted key is remembered. The digest is a pure function of pepper and key, so a
 * remembered one can never outlive a revocation (revocations act on the key session, which is keyed by digest);
 * the bound is about memory: the raw key is the lookup key, so it is kept briefly and purged on expiry.
 */
export const KEY_DIGEST_MEMO_MS = 10_000;
/** Distinct keys a process remembers digests for (agents active within KEY_DIGEST_MEMO_MS). */
const KEY_DIGEST_MEMO_MAX = 1_024;

/** Distinct identities a process keeps a standby copy of (see KeySessionMemo.standby). */
const STANDBY_MAX = 50_000;

/** What one revocation names: the revoked key digests, or every key when the broadcast could not be read. */
export type KeyRevocation = readonly string[] | 'all';

/**
 * Reads a `keysession:revoked` broadcast: a JSON array of key digests (the only format ever published). Anything
 * else cannot say what to drop, so it revokes everything rather than keep a revoked identity in memory.
 */
export function parseKeyRevocation(message: string): KeyRevocation {
  let parsed: unknown;
  try {
    parsed = JSON.parse(message);
  } catch {
    return 'all';
  }
  if (!Array.isArray(parsed) || !parsed.every((d): d is string => typeof d === 'string')) return 'all';
  return parsed;
}

/** The process's revocations as other in-memory identity state hears them (the wire listener's refresher). */
export interface KeyRevocationFeed {
  /** Calls `listener` with every revocation, local or broadcast; returns the function that stops it. */
  onRevoked(listener: (revoked: KeyRevocation) => void): () => void;
  /**
   * Advanced by every revocation. State read while it stayed the same may be kept; state read across a change may be
   * the very thing revoked and is used once, not remembered.
   */
  readonly revision: number;
  /**
   * Whether revocations reach this process now. When the subscription is down, a revocation made elsewhere would be
   * missed, so state that only a revocation would invalidate must not be reused (every front door reads it again).
   */
  readonly live: boolean;
}

/**
 * Key sessions held in process memory for a second, so a busy agent's requests need no coordination-store read.
 * Trusted only while the revocation subscription is healthy: if pub/sub is down, a revocation elsewhere could
 * not reach this copy, so every request reads the coordination store again. The memo holds the process's one
 * subscription to revocations and passes each on to its listeners.
 */
export class KeySessionMemo implements KeyRevocationFeed {
  readonly #cache = ttlCache<string, AgentIdentity>({ max: 50_000, ttl: KEY_SESSION_MEMO_MS });
  // The HMAC per request was the largest part of authentication in the proxy profile; only accepted keys are
  // remembered, so presenting random keys neither fills this with strangers' guesses nor evicts real agents.
  readonly #digests = ttlCache<string, { pepper: string; digest: string }>({ max: KEY_DIGEST_MEMO_MAX, ttl: KEY_DIGEST_MEMO_MS, ttlAutopurge: true });
  readonly #listeners = new Set<(revoked: KeyRevocation) => void>();
  #subscribed = false;
  #unsubscribe: (() => Promise<void>) | null = null;
  /** Bumped by every revocation: a session read from the coordination store before one is not remembered after it. */
  #revision = 0;
  /**
   * The last verification of each key this process accepted, kept for one key-session TTL from the moment the control
   * store confirmed it: what a key session in the coordination store would hold, but surviving a Redis restart (which
   * empties it) and a revocation marker older than the verification. Read only when the control store cannot answer.
   */
  readonly #standby: LRUCache<string, { identity: AgentIdentity; verifiedAt: number }>;
  readonly #standbyMs: number;

  /** `ttlSeconds`: auth.key_session_ttl_seconds, the bound on a standby copy's age (0: no standby copies). */
  constructor(
    private readonly coord: Coordination,
    ttlSeconds = 0,
  ) {
    this.#standbyMs = ttlSeconds * 1000;
    this.#standby = ttlCache({ max: STANDBY_MAX, ttl: Math.max(this.#standbyMs, 1), ttlAutopurge: false });
  }

  async start(): Promise<void> {
    this.#unsubscribe = await this.coord.subscribe(KEY_SESSION_REVOKED_CHANNEL, (message) => this.#revoked(parseKeyRevocation(message)));
    this.#subscribed = true;
  }

  onRevoked(listener: (revoked: KeyRevocation) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  get live(): boolean {
    return this.#subscribed && this.coord.status().subscriptionsHealthy;
  }

  get(digest: string): AgentIdentity | undefined {
    return this.live ? this.#cache.get(digest) : undefined;
  }

  /** The revision to pass to `set` with a session about to be read (KeyRevocationFeed.revision). */
  get revision(): number {
    return this.#revision;
  }

  /** Remembers a session read at `revision`, unless a revocation was heard meanwhile (it may be the one revoked). */
  set(digest: string, identity: AgentIdentity, revision: number): void {
    if (this.#subscribed && revision === this.#revision) this.#cache.set(digest, identity);
  }

  /**
   * Keeps the verification of a key (confirmed by the control store at `verifiedAt`, epoch ms) as its standby copy,
   * unless a revocation was heard since `revision` was read (the verification may be the very thing revoked).
   */
  keepStandby(digest: string, identity: AgentIdentity, verifiedAt: number, revision: number): void {
    if (this.#standbyMs <= 0 || !this.#subscribed || revision !== this.#revision) return;
    const age = Date.now() - verifiedAt;
    if (age >= this.#standbyMs) return;
    const kept = this.#standby.get(digest);
    if (kept !== undefined && kept.verifiedAt >= verifiedAt) return;
    this.#standby.set(digest, { identity, verifiedAt }, { ttl: this.#standbyMs - Math.max(age, 0) });
  }

  /**
   * The standby copy of a key, for when the control store cannot answer and the coordination store holds no session
   * (key sessions serve from memory as when only the database is down). Only while revocations reach this process
   * (a revocation heard drops the copy), only within one key-session TTL of its verification (the bound a session
   * in the coordination store has), and never when a revocation marker is not older than the verification.
   */
  standby(digest: string, revokedAt: number | null): AgentIdentity | undefined {
    if (!this.live) return undefined;
    const kept = this.#standby.get(digest);
    if (kept === undefined || Date.now() - kept.verifiedAt >= this.#standbyMs) return undefined;
    if (revokedAt !== null && !(kept.verifiedAt > revokedAt)) return undefined;
    return kept.identity;
  }

  /** The remembered digest of an accepted key under this pepper, if any. */
  digestOf(pepper: string, key: string): string | undefined {
    const remembered = this.#digests.get(key);
    return remembered !== undefined && remembered.pepper === pepper ? remembered.digest : undefined;
  }

  /** Remembers the digest of a key that just authenticated an identity. */
  rememberDigest(pepper: string, key: string, digest: string): void {
    this.#digests.set(key, { pepper, digest });
  }

  /** A revocation made in this process: its listeners hear it before the broadcast comes back. */
  drop(digests: readonly string[]): void {
    this.#revoked(digests);
  }

  #revoked(revoked: KeyRevocation): void {
    this.#revision += 1;
    if (revoked === 'all') {
      this.#cache.clear();
      this.#standby.clear();
    } else {
      for (const d of revoked) {
        this.#cache.delete(d);
        this.#standby.delete(d);
      }
    }
    for (const listener of this.#listeners) listener(revoked);
  }

  async stop(): Promise<void> {
    this.#subscribed = false;
    this.#cache.clear();
    this.#digests.clear();
    this.#standby.clear();
    await this.#unsubscribe?.();
  }
}

/**
 * A revocation marker rather than a plain delete: an authentication that read the database just before
 * the change cannot write its stale session over the marker (sessions are written with setIfAbsent).
 * Written as `revoked:<epoch ms>`: a standby copy verified after that moment is newer than the revocation.
 */
export const REVOKED_MARKER = 'revoked';

export function revocationMarker(now = Date.now()): string {
  return `${REVOKED_MARKER}:${now}`;
}

/**
 * How long a revocation marker blocks re-caching. It only has to outlive the window between an authentication's
 * database read and its session write (milliseconds); kept for the whole session TTL, it would send every
 * request of a just-changed identity to the database for a minute.
 */
export const REVOCATION_MARKER_MS = 5_000;

export function keySessionKey(digest: string): string {
  return `keysession:${digest}`;
}

interface StoredSession {
  v: 1;
  digest: string;
  identity: AgentIdentity;
  /** When the control store confirmed the identity (epoch ms); absent in sessions written before it was recorded. */
  at?: number;
}

/** A revocation marker: when it was set (epoch ms), or null when the marker does not say (then it is newer than anything). */
export interface RevokedSession {
  revoked: true;
  at: number | null;
}

export function encodeSession(digest: string, identity: AgentIdentity, verifiedAt?: number): string {
  const s: StoredSession = { v: 1, digest, identity, ...(verifiedAt !== undefined ? { at: verifiedAt } : {}) };
  return JSON.stringify(s);
}

/** The session's identity, a revocation marker, or null when absent or unreadable. */
export function decodeSession(raw: string | null): StoredSession | RevokedSession | null {
  if (raw === null) return null;
  if (raw === REVOKED_MARKER) return { revoked: true, at: null };
  if (raw.startsWith(`${REVOKED_MARKER}:`)) {
    const at = Number(raw.slice(REVOKED_MARKER.length + 1));
    return { revoked: true, at: Number.isSafeInteger(at) ? at : null };
  }
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
 * The broadcast goes out even with key sessions off: the wire listener's identity state listens to it too.
 */
export async function revokeKeySessions(deps: KeySessionDeps, digests: ReadonlyArray<string | null | undefined>): Promise<boolean> {
  const keys = digests.filter((d): d is string => typeof d === 'string' && d.length > 0);
  if (keys.length === 0) return true;
  try {
    if (deps.ttlSeconds > 0) {
      const ttlMs = Math.min(deps.ttlSeconds * 1000, REVOCATION_MARKER_MS);
      const marker = revocationMarker();
      for (const d of keys) await deps.coord.set(keySessionKey(d), marker, { ttlMs });
    }
    deps.memo?.drop(keys);
    await deps.coord.publish(KEY_SESSION_REVOKED_CHANNEL, JSON.stringify(keys));
    return true;
  } catch (err) {
    deps.log.error({ err: { code: (err as { code?: string }).code } }, 'key session revocation failed; stale sessions expire within the key session TTL');
    return false;
  }
}

/** Revokes the sessions of identities by id (grant changes, source deletion): reads their current digests. */
export async function revokeIdentityKeySessions(deps: KeySessionDeps, identityIds: readonly number[]): Promise<boolean> {
  const ids = [...new Set(identityIds)];
  if (ids.length === 0) return true;
  const rows = await deps.db.selectFrom('identities').select('api_key_digest').where('id', 'in', ids).execute();
  return revokeKeySessions(deps, rows.map((r) => r.api_key_digest));
}
