// Coordination factory and public surface: picks the Redis adapter when a URL is configured, the in-process one otherwise.
import { MemoryCoordination } from './memory.js';
import { RedisCoordination } from './redis.js';
import type { Coordination, CoordinationLogger } from './port.js';
import type { RedisTopology } from './redis.js';

export type {
  Coordination,
  CoordinationLogger,
  CoordinationStatus,
  Lock,
  MessageHandler,
  TtlOptions,
  Unsubscribe,
} from './port.js';
export { whileHolding, type Held } from './held-lock.js';
export { CoordinationError, LOCK_NAMESPACE } from './errors.js';
export type { CoordinationErrorCode } from './errors.js';
export { MemoryCoordination, MemoryCoordinationStore } from './memory.js';
export type { MemoryCoordinationOptions } from './memory.js';
export { RedisCoordination, describeRedisTarget } from './redis.js';
export type { HostPort, RedisConnection, RedisCoordinationOptions, RedisTopology } from './redis.js';

export interface CreateCoordinationOptions {
  /** Set → Redis. Unset → in-process adapter; whether that is allowed (never in production) is the config layer's call. */
  redisUrl?: string | undefined;
  /** How the Redis URL's server is reached: one server (default), Sentinel or Cluster. */
  topology?: RedisTopology;
  keyPrefix?: string;
  connectTimeoutMs?: number;
  logger?: CoordinationLogger;
}

export function createCoordination(options: CreateCoordinationOptions): Coordination {
  const { redisUrl, keyPrefix, logger } = options;
  if (redisUrl !== undefined && redisUrl !== '') {
    return new RedisCoordination({
      url: redisUrl,
      ...(options.topology !== undefined ? { topology: options.topology } : {}),
      ...(keyPrefix !== undefined ? { keyPrefix } : {}),
      ...(options.connectTimeoutMs !== undefined ? { connectTimeoutMs: options.connectTimeoutMs } : {}),
      ...(logger !== undefined ? { logger } : {}),
    });
  }
  return new MemoryCoordination({
    ...(keyPrefix !== undefined ? { keyPrefix } : {}),
    ...(logger !== undefined ? { logger } : {}),
  });
}
