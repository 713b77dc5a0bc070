// Admin API tokens: generation, the at-rest hash, and bearer authentication against the control store.
import { createHash, randomBytes } from 'node:crypto';
import type { AdminToken, AdminUser } from '../../store/schema.js';
import { findUsableAdminToken, touchAdminToken } from '../../store/repos/admin-tokens.js';
import type { Db } from '../../store/repos/util.js';

export const ADMIN_TOKEN_PREFIX = 'gha_';
const TOKEN_PATTERN = /^gha_[A-Za-z0-9_-]{43}$/;
/** last_used_at is written at most this often per token, so automation polling every second is not a write per request. */
const TOUCH_INTERVAL_MS = 60_000;

/** A new token: `gha_` and 32 random bytes in base64url (256 bits, so a plain hash suffices at rest). */
export function generateAdminToken(): string {
  return ADMIN_TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

/**
 * SHA-256 hex of the token. Not HMAC with the signing secret on purpose: rotating that secret must end
 * browser sessions (spec §5.8) without silently breaking every automation token (docs/admin-auth.md).
 */
export function hashAdminToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** The token's admin when the token is well formed, known, unexpired and its admin enabled; else null. */
export async function authenticateAdminToken(db: Db, token: string): Promise<{ token: AdminToken; admin: AdminUser } | null> {
  if (!TOKEN_PATTERN.test(token)) return null;
  const found = await findUsableAdminToken(db, hashAdminToken(token));
  if (!found) return null;
  const last = found.token.last_used_at?.getTime() ?? 0;
  if (Date.now() - last >= TOUCH_INTERVAL_MS) await touchAdminToken(db, found.token.id);
  return found;
}
