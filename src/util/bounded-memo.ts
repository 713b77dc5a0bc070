// A bounded memo of answers that are a function of a string key alone: the one keep-and-clear idiom of the per-request memos (base URLs, placed upstream URLs, JWT header segments).

/**
 * Remembers at most `maxEntries` answers, each under a key of at most `maxKeyLength` characters (a longer key is
 * answered but not kept), and forgets them all when full: a stream of new keys costs a map insert each and keeps
 * at most `maxEntries` answers alive. Only for answers that depend on the key alone.
 */
export class BoundedMemo<V> {
  readonly #answers = new Map<string, V>();

  constructor(
    private readonly maxEntries: number,
    private readonly maxKeyLength = Number.POSITIVE_INFINITY,
  ) {}

  get(key: string): V | undefined {
    return this.#answers.get(key);
  }

  /** Keeps `answer` under `key` when the key is short enough, and returns it. */
  keep(key: string, answer: V): V {
    if (key.length <= this.maxKeyLength) {
      if (this.#answers.size >= this.maxEntries) this.#answers.clear();
      this.#answers.set(key, answer);
    }
    return answer;
  }
}
