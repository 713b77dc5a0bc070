// Bounding a promise by a deadline: the one timer-and-race idiom every module with an outside dependency (store, Redis limiter, DNS, readiness checks) uses.

/**
 * Settles with `work`, or with what `onTimeout` returns (or throws) once `ms` pass first. The timer is cleared as
 * soon as `work` settles, and a late rejection of `work` is absorbed here, never left unhandled.
 */
export function withDeadline<T>(work: Promise<T>, ms: number, onTimeout: () => T): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      try {
        resolve(onTimeout());
      } catch (err) {
        reject(err as Error);
      }
    }, ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err as Error);
      },
    );
  });
}
