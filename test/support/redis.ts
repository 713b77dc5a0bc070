// Test fixture: removes the Redis keys a test service left under its own prefix (sessions, throttles, caches outlive the process otherwise).
import { Redis } from 'ioredis';

export const TEST_REDIS_URL = 'redis://127.0.0.1:6379';

/** Deletes every key under `prefix` through an open client (a test's own unique prefix; never empty). */
export async function deleteKeysByPrefix(redis: Redis, prefix: string): Promise<void> {
  if (prefix.length === 0) throw new TypeError('an empty prefix would match every key');
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

export async function dropRedisPrefix(prefix: string | undefined, url = TEST_REDIS_URL): Promise<void> {
  // Only the prefixes test fixtures generate: a typo can never sweep someone else's keys.
  if (!prefix || !prefix.startsWith('ghtest:')) return;
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    await deleteKeysByPrefix(redis, prefix);
  } finally {
    redis.disconnect();
  }
}
