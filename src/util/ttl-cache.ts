// The project's caches with a time to live: lru-cache with its clock read on every lookup, one place for that rule.
import { LRUCache } from 'lru-cache';

/**
 * An lru-cache whose entries expire by time, reading its clock (`perf.now()`) on every lookup (`ttlResolution: 0`).
 * lru-cache's default caches the clock for 1 ms behind a timer re-armed every millisecond under load, and an entry may
 * then outlive its time by as long as the event loop is late. Every cache on the request path is built here.
 */
export function ttlCache<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(options: LRUCache.Options<K, V, unknown>): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, ttlResolution: 0 });
}
