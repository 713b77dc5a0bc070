// Agent API keys: generation, the custom-key policy, peppered and legacy digests, and the SCRAM-SHA-256 verifier the wire listener checks.
import { createHash, createHmac, pbkdf2, randomBytes, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const pbkdf2Async = promisify(pbkdf2);

/** Generated keys: `gh_` + base64url of 32 random bytes (256 bits). */
export const GENERATED_KEY_PREFIX = 'gh_';
const GENERATED_KEY_BYTES = 32;
/** Upper bound on any presented key; the config's custom_key.min_length tops out at 1024 as well. */
export const MAX_API_KEY_LENGTH = 1024;
/** Keys travel in an Authorization header, so only visible ASCII is accepted (no spaces, no control bytes). */
export const API_KEY_CHARSET = /^[\x21-\x7e]+$/;

/** RFC 7677 recommends at least 4096 iterations; PostgreSQL uses the same default. */
export const SCRAM_ITERATIONS = 4096;
const SCRAM_SALT_BYTES = 16;

export interface CustomKeyPolicy {
  min_length: number;
  min_entropy_bits: number;
}

export function generateApiKey(): string {
  return GENERATED_KEY_PREFIX + randomBytes(GENERATED_KEY_BYTES).toString('base64url');
}

/** HMAC-SHA256(pepper, key) as lowercase hex: the stored and looked-up form (DESIGN §6). */
export function digestApiKey(pepper: string, key: string): string {
  return createHmac('sha256', pepper).update(key, 'utf8').digest('hex');
}

/** Unpeppered SHA-256 hex of earlier releases; accepted only while auth.legacy_unpeppered_keys_allowed. */
export function legacyDigest(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Constant-time equality of two hex digests (false, not an exception, on a length mismatch). */
export function digestsEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  if (x.length !== y.length) return false;
  return timingSafeEqual(x, y);
}

const CLASS_POOLS: ReadonlyArray<{ test: RegExp; size: number }> = [
  { test: /[a-z]/, size: 26 },
  { test: /[A-Z]/, size: 26 },
  { test: /[0-9]/, size: 10 },
  { test: /[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]/, size: 32 },
];

/**
 * A conservative entropy estimate in bits: characters that merely repeat or continue a run
 * (`aaaa`, `abcd`, `4321`) count for nothing, and the per-character value is the smaller of the
 * character-class pool and the number of distinct characters actually used.
 */
export function estimateEntropyBits(key: string): number {
  let pool = 0;
  for (const c of CLASS_POOLS) if (c.test.test(key)) pool += c.size;
  const distinct = new Set(key).size;
  const perChar = Math.log2(Math.max(2, Math.min(pool, distinct)));
  let effective = key.length > 0 ? 1 : 0;
  for (let i = 1; i < key.length; i += 1) {
    const step = key.charCodeAt(i) - key.charCodeAt(i - 1);
    if (step === 0 || step === 1 || step === -1) continue;
    effective += 1;
  }
  return Math.floor(effective * perChar);
}

/** The shortest period p (≤ n/2) with key = repeat(key[0:p]), or 0 when the key is not periodic. */
function repeatingPeriod(key: string): number {
  const n = key.length;
  for (let p = 1; p <= n / 2; p += 1) {
    let ok = true;
    for (let i = p; i < n && ok; i += 1) ok = key[i] === key[i - p];
    if (ok) return p;
  }
  return 0;
}

/** Longest run of identical or consecutive (ascending or descending) characters. */
function longestRun(key: string): number {
  let best = key.length > 0 ? 1 : 0;
  let run = 1;
  let dir = 2; // 0 same, 1 up, -1 down; 2 = no direction yet
  for (let i = 1; i < key.length; i += 1) {
    const step = key.charCodeAt(i) - key.charCodeAt(i - 1);
    if ((step === 0 || step === 1 || step === -1) && (dir === 2 || step === dir)) {
      run += 1;
      dir = step;
    } else if (step === 0 || step === 1 || step === -1) {
      run = 2;
      dir = step;
    } else {
      run = 1;
      dir = 2;
    }
    if (run > best) best = run;
  }
  return best;
}

/**
 * Checks an operator-supplied key against `auth.custom_key`. Returns a problem that describes the rule
 * broken — never the key itself — or null when the key is acceptable.
 */
export function customKeyProblem(key: string, policy: CustomKeyPolicy): string | null {
  if (key.length > MAX_API_KEY_LENGTH) return `must be at most ${MAX_API_KEY_LENGTH} characters`;
  if (!API_KEY_CHARSET.test(key)) return 'must consist of visible ASCII characters only (no spaces or control characters)';
  if (key.length < policy.min_length) return `must be at least ${policy.min_length} characters`;
  if (repeatingPeriod(key) > 0) return 'must not be a repeated pattern';
  if (longestRun(key) >= 6) return 'must not contain long runs of repeated or sequential characters';
  const bits = estimateEntropyBits(key);
  if (bits < policy.min_entropy_bits) return `is too predictable (estimated entropy below ${policy.min_entropy_bits} bits); use a random key or let the service generate one`;
  return null;
}

/**
 * SCRAM-SHA-256 verifier of the key in PostgreSQL's text form (RFC 5802 §3, RFC 7677):
 * `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, all base64. The key is used as
 * UTF-8 without SASLprep; generated keys and policy-accepted custom keys are ASCII, where SASLprep is the identity.
 */
export async function scramVerifier(key: string, salt: Buffer = randomBytes(SCRAM_SALT_BYTES), iterations = SCRAM_ITERATIONS): Promise<string> {
  const { storedKey, serverKey } = await scramKeys(key, salt, iterations);
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

async function scramKeys(password: string, salt: Buffer, iterations: number): Promise<{ storedKey: Buffer; serverKey: Buffer }> {
  const salted = await pbkdf2Async(Buffer.from(password, 'utf8'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  return { storedKey: createHash('sha256').update(clientKey).digest(), serverKey: createHmac('sha256', salted).update('Server Key').digest() };
}

/**
 * Checks a password sent in cleartext against a stored SCRAM verifier, as PostgreSQL does for `password`
 * authentication of a SCRAM user: derive the StoredKey with the verifier's salt and iterations, compare in
 * constant time. Costs the same PBKDF2 work whether the password is right or not.
 */
export async function scramPasswordMatches(verifier: ParsedScramVerifier, password: string): Promise<boolean> {
  const { storedKey } = await scramKeys(password, verifier.salt, verifier.iterations);
  return timingSafeEqual(storedKey, verifier.storedKey);
}

export interface ParsedScramVerifier {
  iterations: number;
  salt: Buffer;
  storedKey: Buffer;
  serverKey: Buffer;
}

const VERIFIER = /^SCRAM-SHA-256\$(\d{1,7}):([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)$/;

/** Parses a stored verifier for the wire listener's SCRAM exchange; null when malformed. */
export function parseScramVerifier(text: string): ParsedScramVerifier | null {
  const m = VERIFIER.exec(text);
  if (!m) return null;
  const storedKey = Buffer.from(m[3]!, 'base64');
  const serverKey = Buffer.from(m[4]!, 'base64');
  if (storedKey.length !== 32 || serverKey.length !== 32) return null;
  return { iterations: Number(m[1]), salt: Buffer.from(m[2]!, 'base64'), storedKey, serverKey };
}

/** The stored and SCRAM forms of a new key, computed together so create and rotate cannot drift apart. */
export async function keyMaterial(pepper: string, key: string): Promise<{ api_key_digest: string; api_key_legacy_digest: null; scram_verifier: string }> {
  return { api_key_digest: digestApiKey(pepper, key), api_key_legacy_digest: null, scram_verifier: await scramVerifier(key) };
}
