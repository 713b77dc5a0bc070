// Where admin session records live: the coordination store (Redis, shared by replicas), or the control store when coordination is in-process (the embedded default), so a restart keeps admins signed in.
import type { Coordination } from '../../coord/port.js';
import { deleteAdminSession, getAdminSession, putAdminSession, touchAdminSession } from '../../store/repos/admin-sessions.js';
import type { Db } from '../../store/repos/util.js';

/** The four operations sessions need, with Redis semantics: values expire, and an expired or deleted key stays gone. */
export interface SessionStore {
  set(id: string, value: string, ttlMs: number): Promise<void>;
  get(id: string): Promise<string | null>;
  expire(id: string, ttlMs: number): Promise<void>;
  del(id: string): Promise<void>;
}

const KEY_PREFIX = 'admin-session:';

export function coordinationSessionStore(coord: Coordination): SessionStore {
  return {
    set: (id, value, ttlMs) => coord.set(KEY_PREFIX + id, value, { ttlMs }),
    get: (id) => coord.get(KEY_PREFIX + id),
    expire: async (id, ttlMs) => {
      await coord.expire(KEY_PREFIX + id, ttlMs);
    },
    del: async (id) => {
      await coord.del(KEY_PREFIX + id);
    },
  };
}

export function databaseSessionStore(db: Db): SessionStore {
  const deadline = (ttlMs: number) => new Date(Date.now() + ttlMs);
  return {
    set: (id, value, ttlMs) => putAdminSession(db, id, value, deadline(ttlMs)),
    get: (id) => getAdminSession(db, id),
    expire: async (id, ttlMs) => {
      await touchAdminSession(db, id, deadline(ttlMs));
    },
    del: (id) => deleteAdminSession(db, id),
  };
}

/**
 * Redis when it is configured: sessions are then shared by every admin replica. In-process coordination is the
 * embedded default (one process, nothing shared); its memory would lose every session at a restart, so the
 * control store (PGlite on disk there) keeps them instead.
 */
export function sessionStoreFor(coord: Coordination, db: Db): SessionStore {
  return coord.kind === 'memory' ? databaseSessionStore(db) : coordinationSessionStore(coord);
}
