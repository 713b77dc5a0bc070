// Work done while holding a coordination lock: the lock taken once (or the work skipped), its lease renewed while the work runs, released after.
import type { Coordination, Lock } from './port.js';

/** What `whileHolding` answers: the work's value, or `busy` when another holder had the lock and the work did not run. */
export type Held<T> = { readonly busy: false; readonly value: T } | { readonly busy: true };

/**
 * Runs `work` while holding the lock `name`, for work of unknown length: the lease (`ttlMs`) is renewed every third of
 * it, so it lasts as long as the work, and lapses `ttlMs` after a holder that died. Another holder: `busy`, and `work`
 * does not run. The lock is released when the work ends, however it ends.
 */
export async function whileHolding<T>(coord: Pick<Coordination, 'acquireLock'>, name: string, ttlMs: number, work: (lock: Lock) => Promise<T>): Promise<Held<T>> {
  const lock = await coord.acquireLock(name, ttlMs);
  if (lock === null) return { busy: true };
  const renew = setInterval(() => void lock.extend(ttlMs).catch(() => undefined), ttlMs / 3);
  renew.unref();
  try {
    return { busy: false, value: await work(lock) };
  } finally {
    clearInterval(renew);
    await lock.release().catch(() => undefined);
  }
}
