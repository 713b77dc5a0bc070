// Admin session rows (migration 0004): the embedded default's session store, with the coordination store's semantics (value, deadline, no resurrection).
import { guard, type Db } from './util.js';

const RESOURCE = 'admin session';

/** Writes (or replaces) a session and drops the sessions whose deadline has passed. */
export function putAdminSession(db: Db, id: string, record: string, expiresAt: Date): Promise<void> {
  return guard(RESOURCE, async () => {
    await db.deleteFrom('admin_sessions').where('expires_at', '<=', new Date()).execute();
    await db
      .insertInto('admin_sessions')
      .values({ id, record, expires_at: expiresAt })
      .onConflict((oc) => oc.column('id').doUpdateSet({ record, expires_at: expiresAt }))
      .execute();
  });
}

/** The record of a live session, or null. */
export function getAdminSession(db: Db, id: string): Promise<string | null> {
  return guard(RESOURCE, async () => {
    const row = await db.selectFrom('admin_sessions').select('record').where('id', '=', id).where('expires_at', '>', new Date()).executeTakeFirst();
    return row?.record ?? null;
  });
}

/** Moves a live session's deadline; a deleted or expired one stays gone (a request racing a logout cannot bring it back). */
export function touchAdminSession(db: Db, id: string, expiresAt: Date): Promise<boolean> {
  return guard(RESOURCE, async () => {
    const r = await db.updateTable('admin_sessions').set({ expires_at: expiresAt }).where('id', '=', id).where('expires_at', '>', new Date()).executeTakeFirst();
    return r.numUpdatedRows > 0n;
  });
}

export function deleteAdminSession(db: Db, id: string): Promise<void> {
  return guard(RESOURCE, async () => {
    await db.deleteFrom('admin_sessions').where('id', '=', id).execute();
  });
}
