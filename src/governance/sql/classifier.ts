// SqlClassifier: bounds, the parse, per-statement classes merged into one frozen classification, cached by statement text.
import { LRUCache } from 'lru-cache';
import {
  DEFAULT_ADMIN_FUNCTIONS, DEFAULT_DYNAMIC_SQL_FUNCTIONS, DEFAULT_GUARDED_SETTINGS, DEFAULT_SIDE_EFFECT_FUNCTIONS,
  FunctionRules, SettingRules,
} from './functions.js';
import { fingerprintAndNormalize, guardedParse, initSqlParser, sqlParserReady, SqlParserNotReadyError } from './parser.js';
import { StatementClassifier } from './statements.js';
import { DEFAULT_SCHEMA, OPERATION_RANK } from './types.js';
import type { CallInfo } from './allowlist.js';
import type {
  Operation, SqlClassification, SqlClassified, SqlClassifierOptions, SqlErrorCode, SqlRejected, StatementInfo, TrapCode,
} from './types.js';
import { walkStatement, type StatementFacts } from './walk.js';
import { isStatisticsRelation } from './catalog-relations.js';
import { changesPath, onlyProvablePathSetters, statementEffects, type PathResolution } from './search-path.js';
import type { WalkContext } from './walk.js';

const MIB = 1024 * 1024;
const DEFAULTS = Object.freeze({
  defaultSchema: DEFAULT_SCHEMA,
  cacheSize: 10_000,
  cacheMaxTextLength: 16 * 1024,
  maxLength: MIB,
  maxDepth: 200,
});
/** The parser cannot take more than this depth safely (parser.ts): maxDepth may not be raised past it. */
const MAX_DEPTH_CEILING = 300;

function reject(code: SqlErrorCode, message: string): SqlRejected {
  return Object.freeze({ ok: false, error: Object.freeze({ code, message }) });
}

function positiveInt(value: number | undefined, fallback: number, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${String(value)}`);
  return value;
}

/** Only whitespace: the parser would refuse an empty string with a message of its own, so answer first. */
function blank(sql: string): boolean {
  return sql.trim() === '';
}

export class SqlClassifier {
  private readonly ctx: WalkContext;
  private readonly statements: StatementClassifier;
  private readonly cache: LRUCache<string, SqlClassification> | null;
  private readonly cacheMaxTextLength: number;
  private readonly maxLength: number;

  constructor(options: SqlClassifierOptions = {}) {
    const defaultSchema = options.defaultSchema ?? DEFAULTS.defaultSchema;
    if (typeof defaultSchema !== 'string' || defaultSchema === '' || defaultSchema.includes('.')) {
      throw new TypeError('defaultSchema must be a non-empty schema name without dots');
    }
    const maxDepth = positiveInt(options.maxDepth, DEFAULTS.maxDepth, 'maxDepth', 8, MAX_DEPTH_CEILING);
    this.maxLength = positiveInt(options.maxLength, DEFAULTS.maxLength, 'maxLength', 1, 64 * MIB);
    this.cacheMaxTextLength = positiveInt(options.cacheMaxTextLength, DEFAULTS.cacheMaxTextLength, 'cacheMaxTextLength', 0);
    const cacheSize = positiveInt(options.cacheSize, DEFAULTS.cacheSize, 'cacheSize', 0, 10_000_000);
    this.cache = cacheSize === 0 ? null : new LRUCache<string, SqlClassification>({ max: cacheSize });
    this.ctx = {
      defaultSchema,
      maxDepth,
      functions: new FunctionRules(
        options.sideEffectFunctions ?? DEFAULT_SIDE_EFFECT_FUNCTIONS,
        options.adminFunctions ?? DEFAULT_ADMIN_FUNCTIONS,
        options.dynamicSqlFunctions ?? DEFAULT_DYNAMIC_SQL_FUNCTIONS,
      ),
    };
    this.statements = new StatementClassifier(new SettingRules(options.guardedSettings ?? DEFAULT_GUARDED_SETTINGS));
  }

  /** Loads the parser, then constructs: the convenient way for a composition root. */
  static async create(options: SqlClassifierOptions = {}): Promise<SqlClassifier> {
    await initSqlParser();
    return new SqlClassifier(options);
  }

  /** Entries currently cached (for statistics and tests). */
  get cachedEntries(): number {
    return this.cache?.size ?? 0;
  }

  /**
   * Classifies one text (one or more statements). Synchronous; the result is deeply frozen and may
   * be shared: the same text returns the same object while it stays cached.
   * @throws SqlParserNotReadyError before initSqlParser() resolved; TypeError for a non-string.
   */
  classify(sql: string, path: PathResolution | null = null): SqlClassification {
    if (typeof sql !== 'string') throw new TypeError('classify expects the statement text as a string');
    if (sql.length > this.maxLength) return this.tooLong();
    const key = path === null ? sql : `${path.key}\u0000${sql}`;
    const hit = this.cache?.get(key);
    if (hit !== undefined) return hit;
    if (!sqlParserReady()) throw new SqlParserNotReadyError();
    // Characters bound bytes from below; count bytes only when multi-byte text could cross the limit.
    if (sql.length * 3 > this.maxLength && Buffer.byteLength(sql, 'utf8') > this.maxLength) return this.tooLong();
    const result = this.compute(sql, path);
    if (this.cache !== null && sql.length <= this.cacheMaxTextLength) this.cache.set(key, result);
    return result;
  }

  /**
   * The walks of one statement under a session path (governance/sql/search-path.ts): one per schema an unqualified
   * name may resolve in, and one in pg_catalog when a schema is searched before it. Their union names every table a
   * name may reach, so a rule must hold in every schema of the path (docs/pgwire.md "search_path").
   */
  private contexts(path: PathResolution | null, pathSetConfig: boolean): WalkContext[] {
    const base = pathSetConfig ? { ...this.ctx, pathSetConfig } : this.ctx;
    if (path === null) return [base];
    const out: WalkContext[] = path.schemas.map((defaultSchema) => ({ ...base, defaultSchema, catalogFirst: path.catalogFirst, qualifyCalls: true }));
    if (!path.catalogFirst) out.push({ ...base, defaultSchema: 'pg_catalog', catalogFirst: true, qualifyCalls: true });
    return out;
  }

  /**
   * The walks of one statement: one per context, and for a context where an unqualified `pg_*` relation may not be
   * pg_catalog's, a second one taking it from the path (docs/governance/sql.md "Tables"). Null: too deep.
   */
  private *walks(stmt: unknown, path: PathResolution | null, effects: ReturnType<typeof statementEffects>): Generator<StatementFacts | null> {
    for (const ctx of this.contexts(path, onlyProvablePathSetters(stmt, effects))) {
      const facts = walkStatement(stmt, ctx);
      yield facts;
      if (facts?.uncertainCatalog === true) yield walkStatement(stmt, { ...ctx, pgNamesInPath: true });
    }
  }

  private tooLong(): SqlRejected {
    return reject('sql_too_long', `statement text exceeds ${this.maxLength} bytes`);
  }

  private compute(sql: string, path: PathResolution | null): SqlClassification {
    // The parser reads a C string: text after a NUL would be invisible here but not necessarily upstream.
    if (sql.includes('\u0000')) return reject('sql_parse_error', 'statement text contains a NUL character');
    if (blank(sql)) return reject('sql_empty', 'statement text is empty');
    const parsed = guardedParse(sql);
    if (!parsed.ok) return reject('sql_parse_error', parsed.message);
    const raws = parsed.tree.stmts ?? [];
    if (raws.length === 0) return reject('sql_empty', 'statement text holds no statement (only comments or semicolons)');

    const statements: StatementInfo[] = [];
    for (const raw of raws) {
      const effects = statementEffects(raw.stmt);
      let info: StatementInfo | null = null;
      for (const walk of this.walks(raw.stmt, path, effects)) {
        if (walk === null) return reject('sql_parse_error', `statement is nested deeper than ${this.ctx.maxDepth} parse nodes`);
        const facts = walk;
        const cls = this.statements.classify(raw.stmt, facts);
        // search_path: a change the session's path tracking can prove is allowed where a front door tracks it (trap
        // search_path_set); one it cannot (a set_config it cannot know the value or the running of) stays an escape.
        const traps: TrapCode[] = cls.traps.filter((t) => t !== 'search_path_change');
        if (effects === 'unprovable') traps.push('search_path_change');
        else if (changesPath(effects)) traps.push('search_path_set');
        if ([...facts.tables].some(isStatisticsRelation)) traps.push('statistics_read');
        info = mergeInfo(info, {
          kind: cls.kind,
          operation: cls.operation,
          tables: [...facts.tables],
          columns: [...facts.columns],
          functions: [...facts.functions],
          calls: [...facts.calls.values()],
          traps,
          statementTimeouts: [...(cls.statementTimeouts ?? []), ...facts.statementTimeouts],
          ...(effects === 'unprovable' || effects.length === 0 ? {} : { pathEffects: effects }),
        });
      }
      statements.push(freezeInfo(info!));
    }
    const fp = fingerprintAndNormalize(sql);
    if (!fp.ok) return reject('sql_parse_error', fp.message);
    return merge(statements, fp.fingerprint, fp.normalized);
  }
}

/** One statement's walks under several schemas, as one: every table, column and call of any of them, the strongest operation. */
function mergeInfo(a: StatementInfo | null, b: StatementInfo): StatementInfo {
  if (a === null) return b;
  const calls = new Map<string, CallInfo>();
  for (const c of [...a.calls, ...b.calls]) if (!calls.has(`${c.kind}:${c.name}`)) calls.set(`${c.kind}:${c.name}`, c);
  return {
    ...a,
    operation: OPERATION_RANK[b.operation] > OPERATION_RANK[a.operation] ? b.operation : a.operation,
    tables: [...new Set([...a.tables, ...b.tables])],
    columns: [...new Set([...a.columns, ...b.columns])],
    functions: [...new Set([...a.functions, ...b.functions])],
    calls: [...calls.values()],
    traps: [...new Set([...a.traps, ...b.traps])],
  };
}

function freezeInfo(s: StatementInfo): StatementInfo {
  return Object.freeze({
    ...s,
    tables: Object.freeze([...s.tables]),
    columns: Object.freeze([...s.columns]),
    functions: Object.freeze([...s.functions]),
    calls: Object.freeze(s.calls.map((c) => Object.freeze(c))),
    traps: Object.freeze([...s.traps]),
    statementTimeouts: Object.freeze([...(s.statementTimeouts ?? [])]),
    ...(s.pathEffects === undefined ? {} : { pathEffects: Object.freeze([...s.pathEffects]) }),
  });
}

function union<T>(lists: readonly (readonly T[])[]): readonly T[] {
  const out = new Set<T>();
  for (const l of lists) for (const x of l) out.add(x);
  return Object.freeze([...out]);
}

function unionCalls(statements: readonly StatementInfo[]): readonly CallInfo[] {
  const out = new Map<string, CallInfo>();
  for (const s of statements) for (const c of s.calls) if (!out.has(`${c.kind}:${c.name}`)) out.set(`${c.kind}:${c.name}`, c);
  return Object.freeze([...out.values()]);
}

function merge(statements: readonly StatementInfo[], fingerprint: string, normalized: string): SqlClassified {
  let operation: Operation = 'read';
  for (const s of statements) if (OPERATION_RANK[s.operation] > OPERATION_RANK[operation]) operation = s.operation;
  const multiStatement = statements.length > 1;
  const traps = new Set<TrapCode>();
  if (multiStatement) traps.add('multi_statement');
  for (const s of statements) for (const t of s.traps) traps.add(t);
  return Object.freeze({
    ok: true,
    statements: Object.freeze(statements),
    operation,
    multiStatement,
    tables: union(statements.map((s) => s.tables)),
    columns: union(statements.map((s) => s.columns)),
    fingerprint,
    normalized,
    traps: Object.freeze([...traps]),
    functions: union(statements.map((s) => s.functions)),
    calls: unionCalls(statements),
    statementTimeouts: Object.freeze(statements.flatMap((s) => s.statementTimeouts ?? [])),
  });
}
