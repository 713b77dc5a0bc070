// Iterative walk of one parsed statement: every table (through CTE scopes), columns, functions, and the facts the traps need.
import { judgeCast, judgeFunction, judgeOperator, type CallInfo } from './allowlist.js';
import { settingChangeTraps, type FunctionRules } from './functions.js';
import { DEFAULT_SCHEMA, type TrapCode } from './types.js';
import { joinName, namePart } from './names.js';
import { STABLE_CATALOG_RELATIONS } from './catalog-relations.js';

type Json = Record<string, unknown>;

/**
 * One query level (a SELECT, INSERT, UPDATE, DELETE or MERGE). CTE names are visible to the level
 * that declares them and everything below it; `relations` maps what a column may be qualified with
 * (an alias or a relation name) to the table it denotes, or to null for a CTE, subquery or function.
 */
interface Scope {
  readonly parent: Scope | null;
  readonly ctes: ReadonlySet<string> | null;
  readonly relations: Map<string, string | null> | null;
  /** The base tables of this level, candidates for an unqualified column. */
  readonly tables: string[];
}

interface Cte {
  readonly names: readonly string[];
  readonly queries: readonly unknown[];
  readonly all: ReadonlySet<string>;
  readonly recursive: boolean;
}

export interface StatementFacts {
  readonly tables: Set<string>;
  readonly columns: Set<string>;
  readonly functions: Set<string>;
  /** Every function, operator and cast target the statement calls, judged against the allowlist (allowlist.ts), keyed by kind and name. */
  readonly calls: Map<string, CallInfo>;
  /** A called function is on the deny/write list (→ write). */
  writeFunction: boolean;
  /** A called function is on the admin list (→ admin). */
  adminFunction: boolean;
  /** A called function runs SQL text the walker cannot see (→ admin). */
  dynamicSql: boolean;
  /**
   * What calls of set_config may change that SET is refused for: the role (role_change), search_path
   * (search_path_change), client_encoding to anything but UTF8 (encoding_change), standard_conforming_strings off
   * (string_syntax_change); a name that is not a constant may be any.
   */
  readonly settingTraps: Set<TrapCode>;
  /** Values set_config calls give statement_timeout (null: not a constant, or a name that is not one). */
  readonly statementTimeouts: (string | null)[];
  /** INSERT/UPDATE/DELETE/MERGE nodes anywhere in the tree, the root included. */
  dmlCount: number;
  /** FOR UPDATE / FOR SHARE (any strength) anywhere. */
  locking: boolean;
  /** SELECT … INTO anywhere. */
  selectInto: boolean;
  /** An unqualified `pg_*` relation was given pg_catalog though pg_catalog may not hold it (the classifier walks again with pgNamesInPath). */
  uncertainCatalog: boolean;
}

export interface WalkContext {
  /** The schema an unqualified relation is given in this walk (the classifier walks once per schema of a session's path). */
  readonly defaultSchema: string;
  /**
   * pg_catalog is searched before defaultSchema (implicitly or listed first): `pg_*` relations are pg_catalog's and
   * allowlisted built-ins are the ones called. False: both resolve in defaultSchema too (governance/sql/search-path.ts).
   */
  readonly catalogFirst?: boolean;
  /**
   * The second walk of a statement naming a `pg_*` relation pg_catalog may not hold (catalog-relations.ts): PostgreSQL
   * takes it from the path when pg_catalog has none of that name, so it is governed in defaultSchema too.
   */
  readonly pgNamesInPath?: boolean;
  /** A session path other than the governed default: calls a role must name are named with defaultSchema (`s.f`). */
  readonly qualifyCalls?: boolean;
  /** Every set_config call of the statement is a search_path change the session's path tracking proves: not a call. */
  readonly pathSetConfig?: boolean;
  readonly functions: FunctionRules;
  /** Deepest accepted tree, in parse nodes. */
  readonly maxDepth: number;
}

const DML = new Set(['InsertStmt', 'UpdateStmt', 'DeleteStmt', 'MergeStmt']);
/** DROP of these names relations that policies on tables should see. */
const DROPPED_RELATIONS = new Set(['OBJECT_TABLE', 'OBJECT_VIEW', 'OBJECT_MATVIEW', 'OBJECT_FOREIGN_TABLE', 'OBJECT_SEQUENCE']);
const ROOT: Scope = Object.freeze({ parent: null, ctes: null, relations: null, tables: [] });

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function asArray(v: unknown): readonly unknown[] {
  return Array.isArray(v) ? v : [];
}

/** The node type of a `{ "SelectStmt": {…} }` wrapper, or null for a bare struct (`relation`, `withClause`, …). */
function nodeType(obj: Json): string | null {
  let found: string | null = null;
  for (const k in obj) {
    if (found !== null) return null;
    found = k;
  }
  if (found === null) return null;
  const c = found.charCodeAt(0);
  return c >= 65 && c <= 90 ? found : null;
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

function stringNode(v: unknown): string | null {
  return isObj(v) && isObj(v.String) ? str(v.String.sval) ?? '' : null;
}

/** A string constant (`'x'`, or a cast of one), or null for any other expression. */
function constantText(v: unknown): string | null {
  if (!isObj(v)) return null;
  if (isObj(v.A_Const)) return isObj(v.A_Const.sval) ? str(v.A_Const.sval.sval) : null;
  if (isObj(v.TypeCast)) return constantText(v.TypeCast.arg);
  return null;
}

/** The session escapes a `set_config(name, value, local)` call may make, as SET would (settingChangeTraps). */
function setConfigTraps(call: Json): TrapCode[] {
  const [name, value] = asArray(call.args);
  return settingChangeTraps(constantText(name), constantText(value));
}

/** The value a `set_config` call gives statement_timeout: undefined when it sets another setting, null when unknown. */
function setConfigTimeout(call: Json): string | null | undefined {
  const [name, value] = asArray(call.args);
  const setting = constantText(name);
  if (setting !== null && setting.trim().toLowerCase() !== 'statement_timeout') return undefined;
  return setting === null ? null : constantText(value);
}

/** The strings of a name list (`[{String: {sval}}]`); a part of another shape keeps its place as "" so it never matches a built-in. */
function names(list: unknown): string[] {
  return asArray(list).map((p) => stringNode(p) ?? '');
}

function aliasName(body: Json): string | null {
  return isObj(body.alias) ? str(body.alias.aliasname) : null;
}

/** Returns null when the tree is deeper than ctx.maxDepth: the caller rejects the statement. */
export function walkStatement(stmt: unknown, ctx: WalkContext): StatementFacts | null {
  return new Walker(ctx).run(stmt);
}

class Walker {
  private readonly facts: StatementFacts = {
    tables: new Set(), columns: new Set(), functions: new Set(), calls: new Map(),
    writeFunction: false, adminFunction: false, dynamicSql: false, settingTraps: new Set(), statementTimeouts: [], dmlCount: 0, locking: false, selectInto: false,
    uncertainCatalog: false,
  };
  // Three parallel stacks instead of one object per frame: the walk allocates nothing per node.
  private readonly nodes: unknown[] = [];
  private readonly scopes: Scope[] = [];
  private readonly depths: number[] = [];

  constructor(private readonly ctx: WalkContext) {}

  run(stmt: unknown): StatementFacts | null {
    this.push(stmt, ROOT, 0);
    const { nodes, scopes, depths } = this;
    while (nodes.length > 0) {
      const v = nodes.pop();
      const scope = scopes.pop() as Scope;
      const depth = depths.pop() as number;
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i -= 1) this.push(v[i], scope, depth);
        continue;
      }
      if (!isObj(v)) continue;
      const type = nodeType(v);
      if (type === null) {
        this.bare(v, scope, depth);
        continue;
      }
      const body = v[type];
      if (!isObj(body)) continue;
      if (depth + 1 > this.ctx.maxDepth) return null;
      this.typed(type, body, scope, depth + 1);
    }
    return this.facts;
  }

  private push(v: unknown, scope: Scope, depth: number): void {
    if (typeof v !== 'object' || v === null) return;
    this.nodes.push(v);
    this.scopes.push(scope);
    this.depths.push(depth);
  }

  /** Children in field order (pushed in reverse, popped forward), minus the fields a handler already took. */
  private descend(body: Json, scope: Scope, depth: number, skip?: ReadonlySet<string>): void {
    const keys = Object.keys(body);
    for (let i = keys.length - 1; i >= 0; i -= 1) {
      const k = keys[i] as string;
      if (skip?.has(k)) continue;
      this.push(body[k], scope, depth);
    }
  }

  private typed(type: string, body: Json, scope: Scope, depth: number): void {
    switch (type) {
      case 'RangeVar':
        this.rangeVar(body, scope);
        return;
      case 'ColumnRef':
        this.columnRef(body, scope);
        return;
      case 'FuncCall':
        this.funcCall(body);
        break;
      case 'A_Expr':
        // BETWEEN's name is a keyword; it expands to the type's own >= and <=, which the operands' types decide.
        if (typeof body.kind !== 'string' || !body.kind.startsWith('AEXPR_BETWEEN')) this.operator(body.name);
        break;
      case 'SubLink':
        this.operator(body.operName);
        break;
      case 'SortBy':
        this.operator(body.useOp);
        break;
      case 'TypeCast':
        if (isObj(body.typeName)) this.call(judgeCast(names(body.typeName.names)));
        break;
      case 'SelectStmt':
      case 'InsertStmt':
      case 'UpdateStmt':
      case 'DeleteStmt':
      case 'MergeStmt':
        this.statement(type, body, scope, depth);
        return;
      case 'LockingClause':
        // lockedRels name FROM items (aliases), not new tables.
        this.facts.locking = true;
        return;
      case 'DropStmt':
        this.dropped(body);
        break;
      case 'CopyStmt':
        this.copyColumns(body);
        break;
    }
    this.descend(body, scope, depth);
  }

  /** Bare structs: a few carry a RangeVar or FuncCall without the wrapper (`relation`, `into.rel`, `CALL`'s funccall). */
  private bare(obj: Json, scope: Scope, depth: number): void {
    if (typeof obj.relname === 'string') {
      this.rangeVar(obj, scope);
      return;
    }
    if (Array.isArray(obj.funcname) && 'funcformat' in obj) this.funcCall(obj);
    this.descend(obj, scope, depth);
  }

  private qualify(schema: string | null, rel: string): string {
    if (schema !== null && schema !== '') return joinName(schema, rel);
    // pg_catalog is searched before the search_path: a pg_* name is pg_catalog's when it holds one. Only the names it
    // always holds are certain; any other may be a table of the path (`public.pg_notes`), governed by a second walk.
    if (!rel.startsWith('pg_') || this.ctx.catalogFirst === false) return joinName(this.ctx.defaultSchema, rel);
    if (STABLE_CATALOG_RELATIONS.has(rel)) return joinName('pg_catalog', rel);
    if (this.ctx.pgNamesInPath === true) return joinName(this.ctx.defaultSchema, rel);
    this.facts.uncertainCatalog = true;
    return joinName('pg_catalog', rel);
  }

  private isCte(name: string, scope: Scope): boolean {
    for (let s: Scope | null = scope; s !== null; s = s.parent) if (s.ctes?.has(name)) return true;
    return false;
  }

  /** The table a RangeVar denotes, or null when it names a CTE visible here. */
  private resolve(rv: Json, scope: Scope): string | null {
    const rel = str(rv.relname) ?? '';
    const schema = str(rv.schemaname);
    if (schema === null && this.isCte(rel, scope)) return null;
    return this.qualify(schema, rel);
  }

  private rangeVar(rv: Json, scope: Scope): void {
    const t = this.resolve(rv, scope);
    if (t !== null) this.facts.tables.add(t);
  }

  private addColumn(table: string, column: string): void {
    this.facts.columns.add(`${table}.${namePart(column)}`);
  }

  private lookup(name: string, scope: Scope): string | null {
    for (let s: Scope | null = scope; s !== null; s = s.parent) {
      if (s.relations?.has(name)) return s.relations.get(name) ?? null;
    }
    return null;
  }

  private inScope(table: string, scope: Scope): boolean {
    for (let s: Scope | null = scope; s !== null; s = s.parent) if (s.tables.includes(table)) return true;
    return false;
  }

  /**
   * `col` goes to every base table of the nearest level that has FROM items (a deliberate
   * over-approximation when several could hold it: without the catalog the owner is unknown, and a
   * column rule must not be dodged by leaving the column unqualified). `t.col` resolves `t` as an
   * alias or relation name up the scopes; `s.t.col` is schema-qualified (or `alias.col.field`).
   */
  private columnRef(body: Json, scope: Scope): void {
    const parts: string[] = [];
    for (const f of asArray(body.fields)) {
      if (!isObj(f)) return;
      if (isObj(f.String)) parts.push(str(f.String.sval) ?? '');
      else if ('A_Star' in f) parts.push('*');
      else return;
    }
    if (parts.length === 1) {
      for (let s: Scope | null = scope; s !== null; s = s.parent) {
        if (s.relations !== null && s.relations.size > 0) {
          for (const t of s.tables) this.addColumn(t, parts[0] as string);
          return;
        }
      }
      return;
    }
    if (parts.length === 2) {
      const t = this.lookup(parts[0] as string, scope);
      if (t !== null) this.addColumn(t, parts[1] as string);
      return;
    }
    const [a, b, c] = (parts.length >= 4 ? parts.slice(1) : parts) as [string, string, string];
    if (this.inScope(joinName(a, b), scope)) {
      this.addColumn(joinName(a, b), c);
      return;
    }
    const t = this.lookup(a, scope);
    if (t !== null) this.addColumn(t, b);
  }

  private funcCall(body: Json): void {
    const parts: string[] = [];
    for (const p of asArray(body.funcname)) {
      const s = stringNode(p);
      if (s !== null) parts.push(s);
    }
    if (parts.length === 0) return;
    // A provable search_path change (governance/sql/search-path.ts): the session's path tracking governs it.
    if (this.ctx.pathSetConfig === true && (parts.length === 1 || parts[0] === 'pg_catalog') && parts[parts.length - 1]!.toLowerCase() === 'set_config') return;
    this.facts.functions.add(parts.join('.'));
    this.call(judgeFunction(parts));
    const name = parts[parts.length - 1] as string;
    if (name.toLowerCase() === 'set_config') {
      for (const trap of setConfigTraps(body)) this.facts.settingTraps.add(trap);
      const timeout = setConfigTimeout(body);
      if (timeout !== undefined) this.facts.statementTimeouts.push(timeout);
    }
    const effect = this.ctx.functions.effectOf(name);
    if (effect === 'write') this.facts.writeFunction = true;
    else if (effect === 'admin') this.facts.adminFunction = true;
    else if (effect === 'dynamic_sql') this.facts.dynamicSql = true;
  }

  private call(found: CallInfo): void {
    let info = found;
    // In the pass for the governed schema with pg_catalog first, a name means what it means without a session path.
    const governedPass = this.ctx.defaultSchema === DEFAULT_SCHEMA && this.ctx.catalogFirst !== false;
    if (this.ctx.qualifyCalls === true && !governedPass && !info.name.includes('.')) {
      // Under a session path an unqualified name may resolve in any of its schemas: a role must name it there; and with
      // pg_catalog not searched first even a built-in's name may reach another schema's object (search-path.ts).
      if (info.refusal !== null) info = { ...info, name: `${this.ctx.defaultSchema}.${info.name}` };
      else if (this.ctx.catalogFirst === false) info = { ...info, name: `${this.ctx.defaultSchema}.${info.name}`, refusal: info.kind === 'function' ? 'schema_not_pg_catalog' : info.kind === 'operator' ? 'user_operator' : 'user_type' };
    }
    const key = `${info.kind}:${info.name}`;
    if (!this.facts.calls.has(key)) this.facts.calls.set(key, info);
  }

  /** An operator name list (`+`, or `OPERATOR(schema.op)` as two parts); absent on nodes that have none. */
  private operator(list: unknown): void {
    if (!Array.isArray(list) || list.length === 0) return;
    this.call(judgeOperator(names(list)));
  }

  private dropped(body: Json): void {
    if (!DROPPED_RELATIONS.has(str(body.removeType) ?? '')) return;
    for (const o of asArray(body.objects)) {
      if (!isObj(o) || !isObj(o.List)) continue;
      const names = asArray(o.List.items).map(stringNode).filter((s): s is string => s !== null);
      const rel = names[names.length - 1];
      if (rel !== undefined) this.facts.tables.add(this.qualify(names.length >= 2 ? (names[names.length - 2] as string) : null, rel));
    }
  }

  /** COPY t (a, b) moves those columns; COPY t without a list moves them all. */
  private copyColumns(body: Json): void {
    if (!isObj(body.relation)) return;
    const t = this.resolve(body.relation, ROOT);
    if (t === null) return;
    const cols = asArray(body.attlist).map(stringNode).filter((s): s is string => s !== null);
    if (cols.length === 0) this.addColumn(t, '*');
    for (const c of cols) this.addColumn(t, c);
  }

  /** Enters one query level: CTE scopes, the target relation, FROM aliases, target columns, then the children. */
  private statement(type: string, body: Json, parent: Scope, depth: number): void {
    if (DML.has(type)) this.facts.dmlCount += 1;
    if (type === 'SelectStmt' && body.intoClause !== undefined) this.facts.selectInto = true;

    const cte = this.withClause(body.withClause);
    const ctes = cte === null ? null : cte.all;
    const scope: Scope = { parent, ctes, relations: new Map(), tables: [] };
    const skip = new Set(['withClause']);

    let target: string | null = null;
    if (type !== 'SelectStmt' && isObj(body.relation)) {
      // The target of a DML statement is always a table, never a CTE of the same name.
      const rv = body.relation;
      target = this.qualify(str(rv.schemaname), str(rv.relname) ?? '');
      this.facts.tables.add(target);
      scope.relations?.set(aliasName(rv) ?? str(rv.relname) ?? '', target);
      scope.tables.push(target);
      skip.add('relation');
    }

    if (type === 'SelectStmt') {
      this.from(body.fromClause, scope);
      skip.add('larg').add('rarg');
    } else if (type === 'UpdateStmt') {
      this.from(body.fromClause, scope);
      this.targetNames(body.targetList, target);
    } else if (type === 'DeleteStmt') {
      this.from(body.usingClause, scope);
    } else if (type === 'InsertStmt') {
      scope.relations?.set('excluded', target);
      const cols = this.targetNames(body.cols, target);
      if (cols === 0 && target !== null) this.addColumn(target, '*');
      skip.add('cols');
      this.conflictColumns(body.onConflictClause, target);
    } else if (type === 'MergeStmt') {
      this.from([body.sourceRelation], scope);
      for (const w of asArray(body.mergeWhenClauses)) {
        if (!isObj(w) || !isObj(w.MergeWhenClause)) continue;
        const n = this.targetNames(w.MergeWhenClause.targetList, target);
        if (n === 0 && w.MergeWhenClause.commandType === 'CMD_INSERT' && target !== null) this.addColumn(target, '*');
      }
    }
    this.descend(body, scope, depth, skip);
    // Pushed last so they are walked first: tables come out in the order the text names them.
    if (type === 'SelectStmt') {
      // Set operations hold their arms as bare SelectStmt structs.
      if (isObj(body.rarg)) this.push({ SelectStmt: body.rarg }, scope, depth);
      if (isObj(body.larg)) this.push({ SelectStmt: body.larg }, scope, depth);
    }
    if (cte !== null) this.pushCtes(cte, parent, depth);
  }

  /** The CTE names and queries of a WITH clause. */
  private withClause(wc: unknown): Cte | null {
    if (!isObj(wc)) return null;
    const names: string[] = [];
    const queries: unknown[] = [];
    for (const c of asArray(wc.ctes)) {
      if (!isObj(c) || !isObj(c.CommonTableExpr)) continue;
      names.push(str(c.CommonTableExpr.ctename) ?? '');
      queries.push(c.CommonTableExpr.ctequery);
    }
    return { names, queries, all: new Set(names), recursive: wc.recursive === true };
  }

  /** Pushes each CTE query under the names it may see. */
  private pushCtes(cte: Cte, parent: Scope, depth: number): void {
    for (let i = cte.names.length - 1; i >= 0; i -= 1) {
      // A non-recursive CTE sees only the ones before it: `WITH users AS (SELECT * FROM users)` reads the table.
      const visible = cte.recursive ? cte.all : new Set(cte.names.slice(0, i));
      this.push(cte.queries[i], { parent, ctes: visible, relations: null, tables: [] }, depth);
    }
  }

  /** Registers the FROM items of one level (iteratively: join chains can be long). Tables are recorded when the walk reaches them. */
  private from(items: unknown, scope: Scope): void {
    const work: unknown[] = Array.isArray(items) ? [...items] : [];
    const relations = scope.relations as Map<string, string | null>;
    while (work.length > 0) {
      const it = work.pop();
      if (!isObj(it)) continue;
      const type = nodeType(it);
      const b = type === null ? null : it[type];
      if (type === null || !isObj(b)) continue;
      switch (type) {
        case 'RangeVar': {
          const t = this.resolve(b, scope);
          relations.set(aliasName(b) ?? str(b.relname) ?? '', t);
          if (t !== null) scope.tables.push(t);
          break;
        }
        case 'JoinExpr': {
          work.push(b.larg, b.rarg);
          const a = aliasName(b);
          if (a !== null) relations.set(a, null);
          break;
        }
        case 'RangeTableSample':
          work.push(b.relation);
          break;
        default: {
          // Subqueries, functions, XMLTABLE, JSON_TABLE: their columns are not a base table's.
          const a = aliasName(b);
          if (a !== null) relations.set(a, null);
        }
      }
    }
  }

  /** Assignment targets (`SET col = …`, `INSERT (col, …)`): names, not expressions. Returns how many. */
  private targetNames(list: unknown, target: string | null): number {
    let n = 0;
    for (const r of asArray(list)) {
      if (!isObj(r) || !isObj(r.ResTarget)) continue;
      const name = str(r.ResTarget.name);
      if (name === null) continue;
      n += 1;
      if (target !== null) this.addColumn(target, name);
    }
    return n;
  }

  private conflictColumns(clause: unknown, target: string | null): void {
    if (!isObj(clause) || target === null) return;
    this.targetNames(clause.targetList, target);
    if (!isObj(clause.infer)) return;
    for (const e of asArray(clause.infer.indexElems)) {
      if (isObj(e) && isObj(e.IndexElem)) {
        const name = str(e.IndexElem.name);
        if (name !== null) this.addColumn(target, name);
      }
    }
  }
}
