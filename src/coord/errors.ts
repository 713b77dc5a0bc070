// Coordination errors and the argument checks both adapters share, so misuse fails the same way on each.

export type CoordinationErrorCode =
  /** The store could not be reached or did not answer in time. */
  | 'COORD_UNAVAILABLE'
  /** The adapter was closed by its owner. */
  | 'COORD_CLOSED'
  /** The store answered with an error (for example a counter key holding a non-integer). */
  | 'COORD_COMMAND_FAILED';

/** The only error the coordination adapters let out; the driver's error stays in `cause`, never in `message`. */
export class CoordinationError extends Error {
  readonly code: CoordinationErrorCode;

  constructor(code: CoordinationErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CoordinationError';
    this.code = code;
  }
}

/** Keys are bounded so a caller bug cannot grow Redis memory or log lines without limit. */
export const MAX_KEY_LENGTH = 1024;

export function assertKey(key: unknown, what = 'key'): asserts key is string {
  if (typeof key !== 'string') throw new TypeError(`${what} must be a string`);
  if (key.length === 0) throw new TypeError(`${what} must not be empty`);
  if (key.length > MAX_KEY_LENGTH) throw new TypeError(`${what} must be at most ${MAX_KEY_LENGTH} characters`);
}

export function assertValue(value: unknown): asserts value is string {
  if (typeof value !== 'string') throw new TypeError('value must be a string (encode structured values first)');
}

export function assertTtl(ttlMs: unknown, what = 'ttlMs'): asserts ttlMs is number {
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
    throw new TypeError(`${what} must be a positive integer number of milliseconds`);
  }
}

export function assertIncrement(by: unknown): asserts by is number {
  if (typeof by !== 'number' || !Number.isSafeInteger(by)) throw new TypeError('by must be a safe integer');
}

export function keyList(keys: string | readonly string[]): readonly string[] {
  const list = typeof keys === 'string' ? [keys] : keys;
  if (!Array.isArray(list)) throw new TypeError('keys must be a string or an array of strings');
  for (const key of list) assertKey(key);
  return list;
}

/** Prefixes end with ':' by convention but any non-empty bounded string is accepted. */
export function assertPrefix(prefix: unknown): asserts prefix is string {
  if (typeof prefix !== 'string' || prefix.length === 0 || prefix.length > 128) {
    throw new TypeError('keyPrefix must be a non-empty string of at most 128 characters');
  }
}

/** Locks live under `<prefix>lock:<name>` in both adapters; plain keys starting with "lock:" are reserved for them. */
export const LOCK_NAMESPACE = 'lock:';
