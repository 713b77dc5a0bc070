// Rate-limit enforcement of policy obligations per identity × source × policy, shared across replicas through Redis.
import type { Cluster, Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import { withDeadline } from '../util/deadline.js';

export interface RateLimitKey {
  readonly identity_id: number;
  readonly source_id: string;
  readonly policy_id: number;
}

export interface RateLimitBudget {
  readonly points: number;
  readonly durationSec: number;
}

/** A limit as the policy engine reports it in `obligations.rate_limits`. */
export interface PolicyRateLimit extends RateLimitBudget {
  readonly policy_id: number;
}

export type RateLimitOutcome =
  | { readonly allowed: true }
  | {
      readonly allowed: false;
      /** `rate_limited`: the budget is spent (HTTP 429). `limiter_unavailable`: the shared store failed and we refuse (fail closed). */
      readonly reason: 'rate_limited' | 'limiter_unavailable';
      /** Whole seconds for `Retry-After`, at least 1. */
      readonly retryAfterSeconds: number;
      readonly policy_id: number;
      readonly limit: RateLimitBudget;
    };

export interface RateLimiterOptions {
  /** A connected ioredis client shared with the rest of the process, or null for in-process (embedded) limits. */
  readonly redis: Redis | Cluster | null;
  readonly keyPrefix: string;
  /** How long a Redis round trip may take before the request is refused (fail closed). */
  readonly timeoutMs?: number;
}

/** Retry-After when the store itself failed: short, since the store may be back at once. */
const UNAVAILABLE_RETRY_SECONDS = 1;

class LimiterTimeout extends Error {
  readonly code = 'RATE_LIMITER_TIMEOUT';
}

/**
 * One limiter per distinct (points, durationSec), created on first use and kept: creating
 * limiters per request would re-register the Lua script on the client every time.
 * When Redis errors or does not answer in time the request is refused with
 * `limiter_unavailable`: a governance budget that silently stops counting is no budget.
 */
export class RateLimiter {
  readonly #redis: Redis | Cluster | null;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;
  readonly #limiters = new Map<string, RateLimiterAbstract>();

  constructor(options: RateLimiterOptions) {
    if (typeof options.keyPrefix !== 'string' || options.keyPrefix.length === 0 || options.keyPrefix.length > 128) {
      throw new TypeError('keyPrefix must be a non-empty string of at most 128 characters');
    }
    const timeoutMs = options.timeoutMs ?? 1000;
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) throw new TypeError('timeoutMs must be a positive integer');
    this.#redis = options.redis;
    this.#keyPrefix = options.keyPrefix;
    this.#timeoutMs = timeoutMs;
  }

  get mode(): 'redis' | 'memory' {
    return this.#redis === null ? 'memory' : 'redis';
  }

  /** Number of limiter instances built so far (one per distinct budget). */
  get limiterCount(): number {
    return this.#limiters.size;
  }

  #limiter(limit: RateLimitBudget): RateLimiterAbstract {
    const id = `${limit.points}/${limit.durationSec}`;
    let l = this.#limiters.get(id);
    if (l === undefined) {
      const keyPrefix = `${this.#keyPrefix}rl:${id}`;
      l = this.#redis === null
        ? new RateLimiterMemory({ keyPrefix, points: limit.points, duration: limit.durationSec })
        : new RateLimiterRedis({ storeClient: this.#redis, keyPrefix, points: limit.points, duration: limit.durationSec, rejectIfRedisNotReady: true });
      this.#limiters.set(id, l);
    }
    return l;
  }

  async consume(key: RateLimitKey, limit: RateLimitBudget): Promise<RateLimitOutcome> {
    checkKey(key);
    checkBudget(limit);
    const limiter = this.#limiter(limit);
    const storeKey = `${key.identity_id}:${key.source_id}:${key.policy_id}`;
    try {
      await withDeadline(limiter.consume(storeKey, 1), this.#timeoutMs, () => {
        throw new LimiterTimeout('rate limiter store timed out');
      });
      return { allowed: true };
    } catch (err) {
      const budget = { points: limit.points, durationSec: limit.durationSec };
      if (err instanceof RateLimiterRes) {
        const retryAfterSeconds = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
        return { allowed: false, reason: 'rate_limited', retryAfterSeconds, policy_id: key.policy_id, limit: budget };
      }
      return { allowed: false, reason: 'limiter_unavailable', retryAfterSeconds: UNAVAILABLE_RETRY_SECONDS, policy_id: key.policy_id, limit: budget };
    }
  }

  /**
   * Consumes one point from every limit of a request (all are charged, so a request refused by one
   * policy still counts against the others, as on any replica). Reports the refusal with the longest
   * wait; a store failure outranks a spent budget because it says nothing about the other limits.
   */
  async consumeAll(key: { identity_id: number; source_id: string }, limits: readonly PolicyRateLimit[]): Promise<RateLimitOutcome> {
    if (limits.length === 0) return { allowed: true };
    const ordered = [...limits].sort((a, b) => a.policy_id - b.policy_id);
    const outcomes = await Promise.all(ordered.map((l) => this.consume({ ...key, policy_id: l.policy_id }, l)));
    let refusal: Extract<RateLimitOutcome, { allowed: false }> | null = null;
    for (const o of outcomes) {
      if (o.allowed) continue;
      if (refusal === null || outranks(o, refusal)) refusal = o;
    }
    return refusal ?? { allowed: true };
  }
}

function outranks(a: Extract<RateLimitOutcome, { allowed: false }>, b: Extract<RateLimitOutcome, { allowed: false }>): boolean {
  if (a.reason !== b.reason) return a.reason === 'limiter_unavailable';
  return a.retryAfterSeconds > b.retryAfterSeconds;
}

function checkKey(key: RateLimitKey): void {
  if (!Number.isSafeInteger(key.identity_id)) throw new TypeError('identity_id must be an integer');
  if (!Number.isSafeInteger(key.policy_id)) throw new TypeError('policy_id must be an integer');
  if (typeof key.source_id !== 'string' || key.source_id.length === 0 || key.source_id.length > 256) {
    throw new TypeError('source_id must be a non-empty string of at most 256 characters');
  }
}

function checkBudget(limit: RateLimitBudget): void {
  if (!Number.isSafeInteger(limit.points) || limit.points < 1) throw new TypeError('points must be a positive integer');
  if (!Number.isSafeInteger(limit.durationSec) || limit.durationSec < 1) throw new TypeError('durationSec must be a positive integer');
}
