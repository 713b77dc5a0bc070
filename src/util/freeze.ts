// Deep freezing: a value shared by many readers (the loaded configuration, a source's parsed connection config) that none may change.

/** Freezes `value` and everything reachable from it; answers `value`. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
