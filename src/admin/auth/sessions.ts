// Admin sessions: server-side records in the session store (session-store.ts), referenced by a cookie signed with the admin signing secret.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SessionStore } from './session-store.js';

/** What the session store holds per session id. */
export interface SessionRecord {
  admin_user_id: number;
  /** The admin's auth_version when the session was made; any later change revokes it (spec §5.3). */
  auth_version: number;
  csrf_token: string;
  /** Milliseconds since the epoch. */
  created_at: number;
  /** When the record was last written; the idle deadline itself is the key's TTL, refreshed on every request. */
  last_seen_at: number;
  /**
   * Present on single sign-on sessions: the roles the IdP groups gave at that sign-in (auth.oidc.admin_group_role_map),
   * unioned with the admin's local roles on every request (docs/admin-auth.md "Single sign-on").
   */
  sso_roles?: string[];
}

export interface LoadedSession {
  id: string;
  record: SessionRecord;
}

export interface SessionOptions {
  /** Absolute lifetime (admin.session_ttl_seconds). */
  ttlSeconds: number;
  /** Idle lifetime (admin.session_idle_seconds). */
  idleSeconds: number;
}

const ID_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export class AdminSessions {
  readonly #store: SessionStore;
  readonly #secret: string;
  readonly #opts: SessionOptions;

  constructor(store: SessionStore, signingSecret: string, opts: SessionOptions) {
    if (signingSecret.length === 0) throw new TypeError('the admin signing secret is empty');
    this.#store = store;
    this.#secret = signingSecret;
    this.#opts = opts;
  }

  /** A new session with a fresh random id and CSRF token; returns the cookie value `<id>.<signature>`. */
  async create(admin: { id: number; auth_version: number }, sso?: { sso_roles: string[] }): Promise<{ cookieValue: string; session: LoadedSession }> {
    const id = randomBytes(32).toString('base64url');
    const now = Date.now();
    const record: SessionRecord = {
      admin_user_id: admin.id,
      auth_version: admin.auth_version,
      csrf_token: randomBytes(32).toString('base64url'),
      created_at: now,
      last_seen_at: now,
      ...(sso ? { sso_roles: [...sso.sso_roles] } : {}),
    };
    await this.#store.set(id, JSON.stringify(record), Math.min(this.#opts.idleSeconds, this.#opts.ttlSeconds) * 1000);
    return { cookieValue: `${id}.${this.#sign(id)}`, session: { id, record } };
  }

  /**
   * The session a cookie names, or null when the cookie is malformed, its signature does not verify
   * (for instance after the signing secret changed), or the session expired. Refreshes the idle deadline.
   */
  async load(cookieValue: string | undefined): Promise<LoadedSession | null> {
    const id = this.verifyCookie(cookieValue);
    if (id === null) return null;
    const raw = await this.#store.get(id);
    if (raw === null) return null;
    const record = parseRecord(raw);
    const remainingMs = record ? record.created_at + this.#opts.ttlSeconds * 1000 - Date.now() : 0;
    if (!record || remainingMs <= 0) {
      await this.#store.del(id);
      return null;
    }
    // EXPIRE rather than a rewrite: a request racing a logout must never bring the deleted session back.
    await this.#store.expire(id, Math.max(1, Math.min(this.#opts.idleSeconds * 1000, remainingMs)));
    return { id, record };
  }

  async destroy(id: string): Promise<void> {
    await this.#store.del(id);
  }

  /** The session id of a correctly signed cookie value, else null; the signature is compared in constant time. */
  verifyCookie(cookieValue: string | undefined): string | null {
    if (!cookieValue || cookieValue.length > 200) return null;
    const dot = cookieValue.indexOf('.');
    if (dot < 0) return null;
    const id = cookieValue.slice(0, dot);
    if (!ID_PATTERN.test(id)) return null;
    const given = Buffer.from(cookieValue.slice(dot + 1));
    const expected = Buffer.from(this.#sign(id));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    return id;
  }

  #sign(id: string): string {
    return createHmac('sha256', this.#secret).update(`admin-session:${id}`).digest('base64url');
  }
}

/** Constant-time comparison of a presented CSRF token with the session's. */
export function csrfTokenMatches(presented: unknown, expected: string): boolean {
  if (typeof presented !== 'string' || presented.length === 0) return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function parseRecord(raw: string): SessionRecord | null {
  try {
    const v = JSON.parse(raw) as Partial<SessionRecord>;
    if (typeof v.admin_user_id !== 'number' || typeof v.auth_version !== 'number' || typeof v.csrf_token !== 'string' || typeof v.created_at !== 'number') return null;
    const record: SessionRecord = { admin_user_id: v.admin_user_id, auth_version: v.auth_version, csrf_token: v.csrf_token, created_at: v.created_at, last_seen_at: v.last_seen_at ?? v.created_at };
    if (v.sso_roles !== undefined) {
      if (!Array.isArray(v.sso_roles) || !v.sso_roles.every((r) => typeof r === 'string')) return null;
      record.sso_roles = v.sso_roles;
    }
    return record;
  } catch {
    return null;
  }
}
