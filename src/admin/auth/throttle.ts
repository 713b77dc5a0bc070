// Sign-in throttling: failed attempts counted per username and per client address in fixed windows in the coordination store.
import { createHash } from 'node:crypto';
import type { Coordination } from '../../coord/port.js';

export interface LoginThrottleOptions {
  max_attempts_per_username: number;
  max_attempts_per_address: number;
  window_seconds: number;
}

export type ThrottleVerdict = { throttled: false } | { throttled: true; scope: 'username' | 'address'; retryAfterSeconds: number };

export class LoginThrottle {
  readonly #coord: Coordination;
  readonly #opts: LoginThrottleOptions;

  constructor(coord: Coordination, opts: LoginThrottleOptions) {
    this.#coord = coord;
    this.#opts = opts;
  }

  /** Whether another attempt is refused; checked before any password is verified, so a throttled guess tells nothing. */
  async check(username: string, address: string): Promise<ThrottleVerdict> {
    const windowMs = this.#opts.window_seconds * 1000;
    for (const [scope, key, max] of this.#scopes(username, address)) {
      const count = Number((await this.#coord.get(key)) ?? 0);
      if (count < max) continue;
      const since = Number((await this.#coord.get(`${key}:since`)) ?? Date.now());
      const retryAfterSeconds = Math.max(1, Math.ceil((since + windowMs - Date.now()) / 1000));
      return { throttled: true, scope, retryAfterSeconds };
    }
    return { throttled: false };
  }

  async recordFailure(username: string, address: string): Promise<void> {
    const ttlMs = this.#opts.window_seconds * 1000;
    for (const [, key] of this.#scopes(username, address)) {
      // The window starts at the first failure: the counter's TTL is set only when it is created, and `since` remembers when.
      await this.#coord.setIfAbsent(`${key}:since`, String(Date.now()), { ttlMs });
      await this.#coord.incr(key, 1, { ttlMs });
    }
  }

  /** A successful sign-in clears the username's count; the address count stays, so spraying many usernames is still limited. */
  async reset(username: string): Promise<void> {
    const key = usernameKey(username);
    await this.#coord.del([key, `${key}:since`]);
  }

  #scopes(username: string, address: string): Array<['username' | 'address', string, number]> {
    return [
      ['username', usernameKey(username), this.#opts.max_attempts_per_username],
      ['address', `admin-login:addr:${address.slice(0, 64)}`, this.#opts.max_attempts_per_address],
    ];
  }
}

/** Usernames are hashed into the key so arbitrary input never shapes a coordination key; case-folded so `Admin` and `admin` share a budget. */
function usernameKey(username: string): string {
  return `admin-login:user:${createHash('sha256').update(username.toLowerCase()).digest('hex').slice(0, 32)}`;
}
