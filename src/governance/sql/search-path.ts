// A session's search_path as PostgreSQL reads it (docs/pgwire.md "search_path"): path values, what one statement does to the path or the transaction holding it, and the schemas an unqualified name may resolve in.
//
// API (pure):
// - `statementEffects(stmt)` lists what one parsed statement does to the session's path (SET / SET LOCAL / SET SCHEMA /
//   RESET / RESET ALL / DISCARD ALL / set_config in a provable position), to the transaction that may undo it (BEGIN,
//   SAVEPOINT, RELEASE, ROLLBACK TO, COMMIT, ROLLBACK) and to SQL prepared statements; 'unprovable' when the statement
//   may change the path to a value the gateway cannot know (set_config with a value that is not a constant, or inside
//   an expression or clause that decides whether it runs).
// - `pathResolution(paths, currentUser)` turns the paths a session may be under into the schemas an unqualified
//   relation may resolve in (null: exactly the governed default path, `public`).
import { pgBoolean } from './functions.js';
import { DEFAULT_SCHEMA } from './types.js';

/** One search_path value: its schema entries in order, as stored (`$user`, `pg_temp`, `pg_catalog` kept as written). */
export type SearchPath = readonly string[];

/** The path every upstream session starts with and RESET returns to (connectors/postgres-exec.ts startup options). */
export const GOVERNED_PATH: SearchPath = Object.freeze([DEFAULT_SCHEMA]);

export type PathEffect =
  /** SET / set_config(…, false) (session) or SET LOCAL / set_config(…, true); `path` null: FROM CURRENT (the value in effect). */
  | { readonly kind: 'set'; readonly path: SearchPath | null; readonly local: boolean }
  /** RESET search_path, SET … TO DEFAULT, RESET ALL, DISCARD ALL: back to GOVERNED_PATH. */
  | { readonly kind: 'default'; readonly local: boolean }
  | { readonly kind: 'begin' }
  | { readonly kind: 'savepoint' | 'release' | 'rollback_to'; readonly name: string }
  /** COMMIT, END, PREPARE TRANSACTION: a commit unless PostgreSQL answers the tag ROLLBACK (the block had failed). */
  | { readonly kind: 'commit'; readonly chain: boolean }
  | { readonly kind: 'rollback'; readonly chain: boolean }
  | { readonly kind: 'prepare'; readonly name: string }
  /** `name` null: DEALLOCATE ALL (and DISCARD ALL). */
  | { readonly kind: 'deallocate'; readonly name: string | null }
  | { readonly kind: 'execute'; readonly name: string };

export type StatementEffects = readonly PathEffect[] | 'unprovable';

/** PostgreSQL keeps NAMEDATALEN - 1 bytes of an identifier, cut at a character boundary. */
const NAME_MAX_BYTES = 63;

export function truncateIdentifier(name: string): string {
  if (Buffer.byteLength(name) <= NAME_MAX_BYTES) return name;
  let out = '';
  let bytes = 0;
  for (const ch of name) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > NAME_MAX_BYTES) break;
    out += ch;
    bytes += n;
  }
  return out;
}

/**
 * A search_path string as PostgreSQL's SplitIdentifierString reads it (set_config's value, a startup option):
 * comma-separated names, double quotes keep case and commas (`""` is a quote), unquoted names are trimmed and
 * lower-cased; every name is truncated to 63 bytes. Null when PostgreSQL would reject it (an empty or unterminated name).
 */
export function parsePathText(text: string): SearchPath | null {
  const out: string[] = [];
  let i = 0;
  const ws = (c: string | undefined) => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v';
  while (ws(text[i])) i++;
  if (i === text.length) return Object.freeze(out);
  for (;;) {
    let name: string;
    if (text[i] === '"') {
      name = '';
      i++;
      for (;;) {
        if (i >= text.length) return null;
        if (text[i] === '"') {
          if (text[i + 1] !== '"') break;
          i++;
        }
        name += text[i];
        i++;
      }
      i++;
      if (name === '') return null;
    } else {
      const start = i;
      while (i < text.length && text[i] !== ',' && !ws(text[i]) && text[i] !== '"') i++;
      if (i === start) return null;
      // PostgreSQL lower-cases ASCII letters only (downcase_identifier for a single-byte-safe encoding such as UTF8).
      name = text.slice(start, i).replace(/[A-Z]/g, (c) => c.toLowerCase());
    }
    out.push(truncateIdentifier(name));
    while (ws(text[i])) i++;
    if (i === text.length) return Object.freeze(out);
    if (text[i] !== ',') return null;
    i++;
    while (ws(text[i])) i++;
  }
}

/** A path as search_path text (each name double-quoted): the form keys and messages use. */
export function pathText(path: SearchPath): string {
  // Only a frozen path can be known never to change: any other is written out each time.
  if (!Object.isFrozen(path)) return writePathText(path);
  let text = pathTexts.get(path);
  if (text === undefined) {
    text = writePathText(path);
    pathTexts.set(path, text);
  }
  return text;
}

function writePathText(path: SearchPath): string {
  return path.map((s) => `"${s.replace(/"/g, '""')}"`).join(', ');
}

/**
 * pathText by path: a wire session asks for the text of the same few paths on every statement (its state's values and
 * the resolution's memo key). The paths a session holds are frozen where they are made (GOVERNED_PATH, parsePathText,
 * SET's arguments), so their text is kept with them; the key of a governance decision can never be a stale text.
 */
const pathTexts = new WeakMap<SearchPath, string>();

type Json = Record<string, unknown>;

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A string constant (or a cast of one), else null. */
function constString(v: unknown): string | null {
  if (!isObj(v)) return null;
  if (isObj(v.TypeCast)) return constString(v.TypeCast.arg);
  if (isObj(v.A_Const) && isObj(v.A_Const.sval)) return typeof v.A_Const.sval.sval === 'string' ? v.A_Const.sval.sval : '';
  return null;
}

/** A boolean constant as set_config's third argument reads it (true, false, 'on', 'f', …), else null. */
function constBoolean(v: unknown): boolean | null {
  if (!isObj(v)) return null;
  if (isObj(v.TypeCast)) return constBoolean(v.TypeCast.arg);
  if (isObj(v.A_Const) && isObj(v.A_Const.boolval)) return v.A_Const.boolval.boolval === true;
  const s = constString(v);
  return s === null ? null : pgBoolean(s);
}

function funcName(call: Json): string {
  const parts = (Array.isArray(call.funcname) ? call.funcname : []).map((p) => (isObj(p) && isObj(p.String) ? String(p.String.sval ?? '') : ''));
  if (parts.length === 2 && parts[0] === 'pg_catalog') return parts[1]!;
  return parts.length === 1 ? parts[0]! : '';
}

/** True when this set_config call may set search_path (its name is not a constant naming another setting). */
function setsPath(call: Json): boolean {
  if (funcName(call).toLowerCase() !== 'set_config') return false;
  const name = constString(Array.isArray(call.args) ? call.args[0] : undefined);
  return name === null || name.trim().toLowerCase() === 'search_path';
}

/** How many set_config calls anywhere in the tree may set search_path (`all`: every set_config call). */
function countPathSetters(node: unknown, all = false): number {
  let n = 0;
  const stack: unknown[] = [node];
  while (stack.length > 0) {
    const v = stack.pop();
    if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
      continue;
    }
    if (!isObj(v)) continue;
    if (isObj(v.FuncCall) && (all ? funcName(v.FuncCall).toLowerCase() === 'set_config' : setsPath(v.FuncCall))) n++;
    for (const k in v) stack.push(v[k]);
  }
  return n;
}

/** SELECT clauses that decide whether (or how often) its target list runs: a set_config under them is not provable. */
const CONDITIONAL_CLAUSES = ['fromClause', 'whereClause', 'groupClause', 'havingClause', 'windowClause', 'sortClause', 'limitCount', 'limitOffset', 'withClause', 'distinctClause', 'valuesLists', 'intoClause', 'lockingClause'];

/**
 * `SELECT set_config('search_path', '<constant>', <constant boolean>)[, …]` with no clause deciding whether the target
 * list runs: it runs exactly once, in order. Every other set_config that may set search_path makes the statement
 * unprovable.
 */
function setConfigEffects(stmt: Json): StatementEffects {
  const total = countPathSetters(stmt);
  if (total === 0) return [];
  const select = isObj(stmt.SelectStmt) ? stmt.SelectStmt : null;
  if (select === null || (select.op !== undefined && select.op !== 'SETOP_NONE')) return 'unprovable';
  for (const c of CONDITIONAL_CLAUSES) {
    const v = select[c];
    if (v !== undefined && !(Array.isArray(v) && v.length === 0)) return 'unprovable';
  }
  const effects: PathEffect[] = [];
  for (const t of Array.isArray(select.targetList) ? select.targetList : []) {
    const val = isObj(t) && isObj(t.ResTarget) ? t.ResTarget.val : undefined;
    if (!isObj(val) || !isObj(val.FuncCall) || !setsPath(val.FuncCall)) continue;
    const call = val.FuncCall;
    const args = Array.isArray(call.args) ? call.args : [];
    if (constString(args[0])?.trim().toLowerCase() !== 'search_path') return 'unprovable';
    if (args.length !== 3 || call.agg_star === true || call.agg_distinct === true || call.over !== undefined || call.agg_filter !== undefined) return 'unprovable';
    const value = constString(args[1]);
    const local = constBoolean(args[2]);
    const path = value === null ? null : parsePathText(value);
    if (path === null || local === null) return 'unprovable';
    // The argument itself must not hide another setter: set_config('search_path', set_config(…), …) is not a constant.
    effects.push({ kind: 'set', path, local });
  }
  return effects.length === total ? effects : 'unprovable';
}

/** One SET argument as a schema name: SET reads each list item as one name (quoted whole), never as a list. */
function setArgs(args: unknown): SearchPath | null {
  const out: string[] = [];
  for (const a of Array.isArray(args) ? args : []) {
    const s = constString(a);
    if (s === null || s === '') return null;
    out.push(truncateIdentifier(s));
  }
  return Object.freeze(out);
}

function variableSet(body: Json): StatementEffects {
  const kind = String(body.kind ?? '');
  const local = body.is_local === true;
  if (kind === 'VAR_RESET_ALL') return [{ kind: 'default', local: false }];
  if (String(body.name ?? '').toLowerCase() !== 'search_path') return [];
  switch (kind) {
    case 'VAR_SET_VALUE': {
      const path = setArgs(body.args);
      return path === null ? 'unprovable' : [{ kind: 'set', path, local }];
    }
    case 'VAR_SET_DEFAULT':
    case 'VAR_RESET':
      return [{ kind: 'default', local }];
    case 'VAR_SET_CURRENT':
      return [{ kind: 'set', path: null, local }];
    default:
      return 'unprovable';
  }
}

function transaction(body: Json): PathEffect[] {
  const chain = body.chain === true;
  const name = String(body.savepoint_name ?? '');
  switch (String(body.kind ?? '')) {
    case 'TRANS_STMT_BEGIN':
    case 'TRANS_STMT_START':
      return [{ kind: 'begin' }];
    case 'TRANS_STMT_COMMIT':
    case 'TRANS_STMT_PREPARE':
      return [{ kind: 'commit', chain }];
    case 'TRANS_STMT_ROLLBACK':
      return [{ kind: 'rollback', chain }];
    case 'TRANS_STMT_SAVEPOINT':
      return [{ kind: 'savepoint', name }];
    case 'TRANS_STMT_RELEASE':
      return [{ kind: 'release', name }];
    case 'TRANS_STMT_ROLLBACK_TO':
      return [{ kind: 'rollback_to', name }];
    default:
      return [];
  }
}

/** What one parsed statement (libpg-query's `stmts[i].stmt`) does to the session's path, its transaction and its SQL prepared statements. */
export function statementEffects(stmt: unknown): StatementEffects {
  if (!isObj(stmt)) return [];
  if (isObj(stmt.VariableSetStmt)) return variableSet(stmt.VariableSetStmt);
  if (isObj(stmt.TransactionStmt)) return transaction(stmt.TransactionStmt);
  if (isObj(stmt.DiscardStmt)) return stmt.DiscardStmt.target === 'DISCARD_ALL' ? [{ kind: 'default', local: false }, { kind: 'deallocate', name: null }] : [];
  if (isObj(stmt.DeallocateStmt)) return [{ kind: 'deallocate', name: stmt.DeallocateStmt.isall === true || typeof stmt.DeallocateStmt.name !== 'string' ? null : stmt.DeallocateStmt.name }];
  if (isObj(stmt.ExecuteStmt)) return [{ kind: 'execute', name: String(stmt.ExecuteStmt.name ?? '') }];
  const setters = setConfigEffects(stmt);
  if (isObj(stmt.PrepareStmt)) return setters === 'unprovable' ? setters : [...setters, { kind: 'prepare', name: String(stmt.PrepareStmt.name ?? '') }];
  return setters;
}

/**
 * True when every set_config call of the statement is a search_path change the effects prove (`SELECT
 * set_config('search_path', 'x', false)`): governed by the session's path tracking, not as a call of set_config.
 */
export function onlyProvablePathSetters(stmt: unknown, effects: StatementEffects): boolean {
  if (effects === 'unprovable') return false;
  const total = countPathSetters(stmt, true);
  return total > 0 && total === countPathSetters(stmt);
}

/** True when the effects change the path to something other than the governed default (a front door must track it). */
export function changesPath(effects: readonly PathEffect[]): boolean {
  return effects.some((e) => e.kind === 'set' && (e.path === null || e.path.length !== 1 || e.path[0] !== DEFAULT_SCHEMA));
}

/**
 * Where unqualified names of a statement may resolve, over every path the session may be under when it runs:
 * - `schemas`: the schemas an unqualified relation (or a call a role must name) may resolve in, in path order, `$user`
 *   expanded to the current user; pg_catalog and pg_temp are not among them (pg_temp holds the session's own temporary
 *   tables; pg_catalog is decided by `catalogFirst`). Empty paths resolve in pg_temp only: `['pg_temp']`.
 * - `catalogFirst`: pg_catalog is searched before every schema of every path (implicitly, or listed first), so a
 *   built-in is the one an unqualified call reaches and a `pg_*` relation is pg_catalog's.
 * - `precise`: one path only: relations are looked up in its order.
 */
export interface PathResolution {
  readonly key: string;
  readonly schemas: readonly string[];
  readonly catalogFirst: boolean;
  readonly precise: boolean;
}

const resolutionMemo = new Map<string, PathResolution | null>();
/** The last single frozen path resolved, for whom, and its resolution: a session's statements mostly run under one path. */
let lastPath: SearchPath | null = null;
let lastUser: string | null = null;
let lastResolution: PathResolution | null = null;

/** The resolution of these paths, or null when the only path is the governed default (unqualified names resolve in public). */
export function pathResolution(paths: readonly SearchPath[], currentUser: string | null): PathResolution | null {
  // A frozen path never changes (pathText relies on the same), so the same array for the same user resolves the same.
  if (paths.length === 1 && paths[0] === lastPath && currentUser === lastUser) return lastResolution;
  const out = resolve(paths, currentUser);
  if (paths.length === 1 && Object.isFrozen(paths[0])) {
    lastPath = paths[0]!;
    lastUser = currentUser;
    lastResolution = out;
  }
  return out;
}

function resolve(paths: readonly SearchPath[], currentUser: string | null): PathResolution | null {
  const memoKey = `${currentUser ?? '\u0001'}\u0000${paths.length === 1 ? pathText(paths[0]!) : paths.map(pathText).join('\u0000')}`;
  const hit = resolutionMemo.get(memoKey);
  if (hit !== undefined) return hit;
  const schemas: string[] = [];
  let catalogFirst = true;
  const distinct = new Set<string>();
  for (const path of paths) {
    const expanded = path.map((s) => (s === '$user' ? (currentUser ?? '$user') : s));
    distinct.add(pathText(expanded));
    let userSeen = false;
    for (const s of expanded) {
      if (s === 'pg_temp') continue;
      if (s === 'pg_catalog') {
        if (userSeen) catalogFirst = false;
        continue;
      }
      userSeen = true;
      if (!schemas.includes(s)) schemas.push(s);
    }
  }
  let out: PathResolution | null;
  if (catalogFirst && distinct.size === 1 && schemas.length === 1 && schemas[0] === DEFAULT_SCHEMA) out = null;
  else {
    const list = schemas.length === 0 ? ['pg_temp'] : schemas;
    out = Object.freeze({ key: `${catalogFirst ? 'c' : 'u'}${distinct.size === 1 ? 'p' : 'm'}:${pathText(list)}`, schemas: Object.freeze(list), catalogFirst, precise: distinct.size === 1 });
  }
  if (resolutionMemo.size > 1_000) resolutionMemo.clear();
  resolutionMemo.set(memoKey, out);
  return out;
}
