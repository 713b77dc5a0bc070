// One wire session's search_path as PostgreSQL holds it: SET, SET LOCAL, set_config, RESET, transaction and savepoint rollback, applied when the upstream confirms them; and every path a statement decided before those answers may run under (docs/pgwire.md "search_path").
import { GOVERNED_PATH, pathText, type PathEffect, type SearchPath } from '../../governance/sql/search-path.js';

/** PostgreSQL's GUC semantics for one setting (guc.c): a session value, and inside a transaction the value a commit keeps. */
class PathState {
  /** The value outside a transaction, and what a rollback of the open one returns to. */
  committed: SearchPath = GOVERNED_PATH;
  current: SearchPath = GOVERNED_PATH;
  /** What a commit keeps: the last SET (not SET LOCAL) of the transaction, else its starting value. */
  pending: SearchPath = GOVERNED_PATH;
  inTransaction = false;
  /** An error since the last ReadyForQuery: an implicit transaction then ends in a rollback. */
  erred = false;
  saves: { name: string; current: SearchPath; pending: SearchPath }[] = [];

  /** Whether `o` holds the same values and transaction state, with no savepoints on either side (so a clone of it would equal this). */
  sameAs(o: PathState): boolean {
    return this.committed === o.committed && this.current === o.current && this.pending === o.pending && this.inTransaction === o.inTransaction &&
      this.erred === o.erred && this.saves.length === 0 && o.saves.length === 0;
  }

  clone(): PathState {
    const c = new PathState();
    Object.assign(c, this, { saves: this.saves.map((s) => ({ ...s })) });
    return c;
  }

  /** Every value a rollback, a failed commit or a savepoint rollback could bring back, and the current one. */
  values(): SearchPath[] {
    const out = [this.current, this.pending, this.committed];
    for (const s of this.saves) out.push(s.current, s.pending);
    return out;
  }

  #begin(): void {
    if (this.inTransaction) return;
    this.inTransaction = true;
    this.saves = [];
  }

  commit(): void {
    this.current = this.committed = this.pending;
    this.inTransaction = false;
    this.saves = [];
  }

  rollback(): void {
    this.current = this.pending = this.committed;
    this.inTransaction = false;
    this.saves = [];
  }

  /** One effect of a statement PostgreSQL completed; `tag` is its CommandComplete tag (null when assumed to succeed). */
  apply(e: PathEffect, tag: string | null): void {
    switch (e.kind) {
      case 'set':
      case 'default': {
        // Every statement runs in a transaction (an implicit one outside a block): SET LOCAL lasts until it ends.
        this.#begin();
        const value = e.kind === 'default' ? GOVERNED_PATH : (e.path ?? this.current);
        this.current = value;
        if (!e.local) this.pending = value;
        return;
      }
      case 'begin':
        return this.#begin();
      case 'savepoint':
        this.#begin();
        this.saves.push({ name: e.name, current: this.current, pending: this.pending });
        return;
      case 'release': {
        const i = this.saves.map((s) => s.name).lastIndexOf(e.name);
        if (i >= 0) this.saves.length = i;
        return;
      }
      case 'rollback_to': {
        const i = this.saves.map((s) => s.name).lastIndexOf(e.name);
        if (i < 0) return;
        const s = this.saves[i]!;
        this.current = s.current;
        this.pending = s.pending;
        this.saves.length = i + 1;
        return;
      }
      case 'commit':
        // COMMIT of a failed block answers ROLLBACK, as does a commit whose deferred checks fail (then with an error).
        if (tag === 'ROLLBACK') this.rollback();
        else this.commit();
        if (e.chain) this.#begin();
        return;
      case 'rollback':
        this.rollback();
        if (e.chain) this.#begin();
        return;
      default:
    }
  }

  /** ReadyForQuery: 'I' ends whatever transaction was open (an implicit one commits unless it erred), 'T'/'E' hold one. */
  ready(status: number): void {
    if (status === 0x49) {
      if (this.inTransaction) {
        if (this.erred) this.rollback();
        else this.commit();
      }
    } else this.#begin();
    this.erred = false;
  }
}

/** SQL prepared statements whose DEALLOCATE was sent but not yet confirmed: they may still exist. */
const UNKNOWN = '\u0001unknown';

/**
 * The session's path, exact from what the upstream confirmed (`confirmed`), and the paths statements decided ahead of
 * those answers may run under: while anything the relay sent is unanswered, every value the confirmed state holds or
 * could return to, and every value a decided statement may set (any of them may fail, and a failure only ever brings
 * back a value held before). Statements are governed in every one of those paths.
 */
export class SessionSearchPath {
  #confirmed: PathState;
  #optimistic: PathState;
  #seen = new Map<string, SearchPath>();
  /** SQL PREPARE names and the path key (PathResolution.key, '' for the default) their statement was governed under. */
  readonly #prepared = new Map<string, string>();

  /** `initial`: the client's startup search_path (what its session starts with), else the governed default. */
  constructor(initial: SearchPath = GOVERNED_PATH) {
    this.#confirmed = new PathState();
    this.#confirmed.committed = this.#confirmed.current = this.#confirmed.pending = initial;
    this.#optimistic = this.#confirmed.clone();
  }

  /** The upstream answered everything sent: only the confirmed value holds. */
  settle(): void {
    // Most statements change nothing of it: the optimistic state is then still what a clone would make.
    if (!this.#optimistic.sameAs(this.#confirmed)) this.#optimistic = this.#confirmed.clone();
    this.#seen.clear();
  }

  /** The paths the next statement may run under. */
  possible(): SearchPath[] {
    if (this.#seen.size === 0) return [this.#confirmed.current];
    const all = new Map(this.#seen);
    for (const v of this.#confirmed.values()) all.set(pathText(v), v);
    return [...all.values()];
  }

  /** A statement was decided and is sent: its effects as if it succeeds; its values may hold from now on. */
  decided(effects: readonly PathEffect[] | undefined): void {
    if (this.#seen.size === 0) for (const v of this.#confirmed.values()) this.#seen.set(pathText(v), v);
    for (const e of effects ?? []) {
      this.#optimistic.apply(e, null);
      if (e.kind === 'deallocate') this.#forget(e.name, true);
    }
    for (const v of this.#optimistic.values()) this.#seen.set(pathText(v), v);
  }

  /** The upstream completed a statement (CommandComplete `tag`) decided under the path key `key`. */
  completed(effects: readonly PathEffect[] | undefined, tag: string, key: string): void {
    for (const e of effects ?? []) {
      this.#confirmed.apply(e, tag);
      if (e.kind === 'prepare') this.#prepared.set(e.name, key);
      else if (e.kind === 'deallocate') this.#forget(e.name, false);
    }
  }

  failed(): void {
    this.#confirmed.erred = true;
  }

  ready(status: number): void {
    this.#confirmed.ready(status);
  }

  #forget(name: string | null, maybe: boolean): void {
    if (name !== null) {
      if (maybe) this.#prepared.set(name, UNKNOWN);
      else this.#prepared.delete(name);
    } else if (maybe) for (const k of this.#prepared.keys()) this.#prepared.set(k, UNKNOWN);
    else this.#prepared.clear();
  }

  /**
   * Whether SQL `EXECUTE name` may run under the path key `key`: PostgreSQL analyses a prepared statement again when
   * the path changed since PREPARE, so its names would reach tables the PREPARE was not governed for. Allowed under the
   * path it was prepared under, or, for a name the session never prepared, under the default path (PostgreSQL answers
   * 26000 there).
   */
  executable(name: string, key: string): boolean {
    const k = this.#prepared.get(name);
    return k === undefined ? key === '' : k === key;
  }
}
