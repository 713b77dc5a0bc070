// Admin passwords: argon2id hashing and verification (a dummy verify for unknown users), the password rules and the built-in initial password.
import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';

/**
 * The built-in initial password of the bootstrap owner `admin` when `admin.bootstrap_password` is not
 * configured (docs/admin-auth.md). It is public, so it only ever opens the change-password step.
 */
export const DEFAULT_INITIAL_PASSWORD = 'gatehouse-change-me';

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 1024;

// OWASP's argon2id baseline (m=19 MiB, t=2, p=1): about 30 ms here (STACK-NOTES). argon2id is the library default.
const ARGON2_OPTIONS = { memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2_OPTIONS);
}

let dummyHash: Promise<string> | null = null;

/**
 * True when `password` matches `passwordHash`. With no hash (unknown user, SSO-only account) a dummy
 * hash is verified instead, so the answer takes as long as for a real account and timing does not
 * reveal which usernames exist.
 */
export async function verifyPassword(passwordHash: string | null | undefined, password: string): Promise<boolean> {
  if (!passwordHash) {
    dummyHash ??= hashPassword(randomBytes(16).toString('base64url'));
    await verify(await dummyHash, password).catch(() => false);
    return false;
  }
  try {
    return await verify(passwordHash, password);
  } catch {
    // A malformed stored hash is a failed sign-in, never a 500 that tells the caller the account exists.
    return false;
  }
}

/** Reasons a new password is refused; empty when acceptable. */
export function passwordProblems(password: string, username: string): string[] {
  const problems: string[] = [];
  if (password.length < PASSWORD_MIN_LENGTH) problems.push(`must be at least ${PASSWORD_MIN_LENGTH} characters`);
  if (password.length > PASSWORD_MAX_LENGTH) problems.push(`must be at most ${PASSWORD_MAX_LENGTH} characters`);
  if (password === DEFAULT_INITIAL_PASSWORD) problems.push('must not be the built-in initial password');
  if (password.toLowerCase() === username.toLowerCase()) problems.push('must not be the username');
  return problems;
}
