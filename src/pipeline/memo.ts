// Pure decisions remembered on the objects they were made from (docs/decisions/0028-proxy-hot-path.md): a memo hangs on the
// role context or compiled policy set that decided, so whatever replaces that object (a grant, role, key or policy change)
// leaves the memo behind with it. Nothing time-dependent is kept past the moment it could change.

/** Most remembered decisions per owner object; a full memo starts over (a few distinct paths per agent is the common case). */
const MAX_PER_OWNER = 512;

export class DecisionMemo<V> {
  readonly #byOwner = new WeakMap<object, Map<string, V>>();

  get(owner: object, key: string): V | undefined {
    return this.#byOwner.get(owner)?.get(key);
  }

  set(owner: object, key: string, value: V): void {
    let m = this.#byOwner.get(owner);
    if (m === undefined) {
      m = new Map();
      this.#byOwner.set(owner, m);
    } else if (m.size >= MAX_PER_OWNER) m.clear();
    m.set(key, value);
  }
}
