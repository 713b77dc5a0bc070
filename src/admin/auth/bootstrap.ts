// The first owner (`admin`) created at admin start when no admin exists, and the password reset behind `gatehouse admin reset-password`.
import { GatehouseError } from '../../errors/registry.js';
import { countAdminUsers, getAdminUserByUsername, insertBootstrapOwner, setAdminPassword } from '../../store/repos/admin-users.js';
import type { AdminUser } from '../../store/schema.js';
import type { Db } from '../../store/repos/util.js';
import { DEFAULT_INITIAL_PASSWORD, hashPassword, passwordProblems } from './passwords.js';

/** DESIGN §8: the bootstrap owner's username. */
export const BOOTSTRAP_USERNAME = 'admin';

export type BootstrapOutcome = 'created_with_configured_password' | 'created_with_default_password' | 'exists';

/**
 * Creates `admin` with roles [owner] when the table is empty. A configured `admin.bootstrap_password`
 * needs no change at first sign-in; the built-in default must be changed before anything else.
 */
export async function ensureBootstrapOwner(db: Db, configuredPassword: string | null): Promise<BootstrapOutcome> {
  // Cheap check first: the argon2 hash is only computed on a truly empty table.
  if ((await countAdminUsers(db)) > 0) return 'exists';
  const password = configuredPassword ?? DEFAULT_INITIAL_PASSWORD;
  const created = await insertBootstrapOwner(db, {
    username: BOOTSTRAP_USERNAME,
    password_hash: await hashPassword(password),
    must_change_password: configuredPassword === null,
  });
  if (!created) return 'exists';
  return configuredPassword === null ? 'created_with_default_password' : 'created_with_configured_password';
}

/**
 * Sets a new password for `username` (the operator's recovery path): no forced change afterwards, and
 * the auth_version advances so every existing session of that admin ends. Throws a TypeError naming
 * the rule when the password is too weak, and `not_found` when there is no such admin.
 */
export async function resetAdminPassword(db: Db, username: string, newPassword: string): Promise<AdminUser> {
  const problems = passwordProblems(newPassword, username);
  if (problems.length > 0) throw new TypeError(`the new password ${problems.join('; ')}`);
  const admin = await getAdminUserByUsername(db, username);
  if (!admin) throw new GatehouseError('not_found', `No admin user named ${JSON.stringify(username)}.`);
  const updated = await setAdminPassword(db, admin.id, await hashPassword(newPassword), false);
  if (!updated) throw new GatehouseError('not_found', `No admin user named ${JSON.stringify(username)}.`);
  return updated;
}
