// Column resolution by provenance: which table columns a parsed statement reads, and which of them feed each result column.
//
// API (pure; used by the `columns` decision stage, result redaction, and COPY (query) TO STDOUT):
// - `analyzeStatement(stmt, structure)` takes one parsed statement (libpg-query's `stmts[i].stmt`) and answers
//   StatementColumns: every `schema.table.column` the statement reads anywhere (select list, WHERE, joins, ORDER BY,
//   subqueries, CTEs, set operations, `*`, `TABLE t`, whole-row references such as `t`, `t.*`, `(t).col`,
//   `row_to_json(t)`, `t::text`), the relations it reaches (views resolved to their tables), and per result column
//   the table columns whose values flow into it (`outputs`; null when the result's width cannot be known).
// - `analyzeCached(sql, stmts, structure)` memoises that per statement text and structure version.
// Views and materialized views are resolved through their definition (pg_get_viewdef) once per structure version.
// Everything the analysis cannot resolve (a relation missing from the structure, a view definition that does not
// parse) is listed in `unresolved`; callers fail closed on it.
import { LRUCache } from 'lru-cache';
import { guardedParse } from './parser.js';
import type { SourceStructure, StructureRelation } from './structure.js';
import { namePart } from './names.js';
import {
  EMPTY, MAX_VIEW_DEPTH, MULTI_COLUMN_FUNCTIONS, UNKNOWN, aliasOf, asArray, findCte, findIn, isObj, outputName, renamed, signature, starOf, str, stringNode, union, unionAll, wholeOf,
  type ColumnCopy, type Cte, type Item, type Json, type Level, type Provenance, type QueryResult, type RelCol, type StatementColumns,
} from './provenance-model.js';

export { union, type OutputColumn, type Provenance, type StatementColumns } from './provenance-model.js';

/** Analyses of views per structure: resolved once per version, whichever statement reaches them first. */
const viewMemo = new WeakMap<SourceStructure, Map<number, QueryResult & { relations: readonly string[]; unresolved: readonly string[] }>>();

class Analyzer {
  readonly reads = new Set<string>();
  readonly relations = new Set<string>();
  readonly unresolved = new Set<string>();
  readonly copies: ColumnCopy[] = [];
  /** Under a session path: the other tables an unqualified name may denote (SourceStructure.shadows), by the one found. */
  readonly #shadows = new Map<string, readonly string[]>();

  constructor(
    private readonly structure: SourceStructure,
    private readonly viewDepth: number,
  ) {}

  // ---- statements ----

  statement(node: unknown, parent: Level | null): QueryResult {
    if (!isObj(node)) return { outputs: [] };
    if (isObj(node.SelectStmt)) return this.select(node.SelectStmt, parent);
    if (isObj(node.InsertStmt)) return this.dml(node.InsertStmt, parent, 'insert');
    if (isObj(node.UpdateStmt)) return this.dml(node.UpdateStmt, parent, 'update');
    if (isObj(node.DeleteStmt)) return this.dml(node.DeleteStmt, parent, 'delete');
    if (isObj(node.MergeStmt)) return this.dml(node.MergeStmt, parent, 'merge');
    if (isObj(node.ExplainStmt)) {
      this.statement(node.ExplainStmt.query, parent);
      return { outputs: null };
    }
    if (isObj(node.CopyStmt)) {
      const c = node.CopyStmt;
      if (isObj(c.query)) return this.statement(c.query, parent);
      if (isObj(c.relation)) {
        const level = this.level(parent, null);
        const item = this.rangeVar(c.relation, level);
        const names = asArray(c.attlist).map(stringNode).filter((s): s is string => s !== null);
        const cols = item.columns === null ? null : names.length === 0 ? item.columns : names.map((n) => this.columnOf(item, n) ?? { name: n, prov: UNKNOWN });
        if (cols === null) return { outputs: null };
        for (const col of cols) this.read(col.prov);
        return { outputs: [...cols] };
      }
      return { outputs: null };
    }
    if (isObj(node.DeclareCursorStmt)) return this.statement(node.DeclareCursorStmt.query, parent);
    if (isObj(node.CreateTableAsStmt)) {
      const r = this.statement(node.CreateTableAsStmt.query, parent);
      this.into(node.CreateTableAsStmt.into, r.outputs);
      return r;
    }
    if (isObj(node.PrepareStmt)) return this.statement(node.PrepareStmt.query, parent);
    if (isObj(node.ViewStmt)) return this.statement(node.ViewStmt.query, parent);
    // Other statements read no table columns through expressions this analysis follows; their tables are governed by name.
    this.expr(node, this.level(parent, null));
    return { outputs: null };
  }

  private level(parent: Level | null, ctes: Map<string, Cte> | null): Level {
    return { parent, items: [], ctes, outputNames: null };
  }

  private withClause(wc: unknown, parent: Level | null): Map<string, Cte> | null {
    if (!isObj(wc)) return null;
    const ctes = new Map<string, Cte>();
    const level = this.level(parent, ctes);
    const recursive = wc.recursive === true;
    for (const c of asArray(wc.ctes)) {
      if (!isObj(c) || !isObj(c.CommonTableExpr)) continue;
      const cte = c.CommonTableExpr;
      const name = str(cte.ctename) ?? '';
      const aliasNames = asArray(cte.aliascolnames);
      if (recursive) {
        // The recursive reference sees the CTE's own rows: iterate until what feeds each column stops growing.
        const entry: Cte = { columns: null, opaque: EMPTY };
        ctes.set(name, entry);
        // Seeded from the non-recursive arm, the part that does not read the CTE itself.
        const q = isObj(cte.ctequery) && isObj(cte.ctequery.SelectStmt) ? cte.ctequery.SelectStmt : null;
        if (q !== null && q.op !== undefined && q.op !== 'SETOP_NONE' && isObj(q.larg)) {
          const seed = this.select(q.larg, level);
          entry.columns = renamed(seed.outputs, { colnames: aliasNames });
          entry.opaque = seed.outputs === null ? UNKNOWN : EMPTY;
        }
        let previous = '';
        for (let round = 0; round < 8; round++) {
          const r = this.statement(cte.ctequery, level);
          entry.columns = renamed(r.outputs, { colnames: aliasNames });
          entry.opaque = r.outputs === null ? UNKNOWN : unionAll(r.outputs.map((o) => o.prov));
          const sig = signature(entry);
          if (sig === previous) break;
          previous = sig;
          if (round === 7) {
            entry.columns = entry.columns?.map((col) => ({ name: col.name, prov: union(col.prov, UNKNOWN) })) ?? null;
            entry.opaque = UNKNOWN;
          }
        }
      } else {
        const r = this.statement(cte.ctequery, level);
        ctes.set(name, { columns: renamed(r.outputs, { colnames: aliasNames }), opaque: r.outputs === null ? UNKNOWN : unionAll(r.outputs.map((o) => o.prov)) });
      }
    }
    return ctes;
  }

  private select(s: Json, parent: Level | null): QueryResult {
    const ctes = this.withClause(s.withClause, parent);
    const base = ctes === null ? parent : this.level(parent, ctes);
    if (str(s.op) !== null && s.op !== 'SETOP_NONE') {
      const l = this.select(isObj(s.larg) ? s.larg : {}, base);
      const r = this.select(isObj(s.rarg) ? s.rarg : {}, base);
      const level = this.level(base, null);
      level.outputNames = new Set((l.outputs ?? []).map((o) => o.name));
      this.clauses(s, level, ['sortClause', 'limitOffset', 'limitCount']);
      if (l.outputs === null || r.outputs === null) return { outputs: null };
      return { outputs: l.outputs.map((c, i) => ({ name: c.name, prov: union(c.prov, r.outputs![i]?.prov ?? UNKNOWN) })) };
    }
    const level = this.level(base, null);
    if (Array.isArray(s.valuesLists)) {
      let outputs: RelCol[] | null = null;
      for (const row of s.valuesLists) {
        const items = isObj(row) && isObj(row.List) ? asArray(row.List.items) : [];
        const provs = items.map((e) => this.expr(e, level));
        outputs ??= provs.map((p, i) => ({ name: `column${i + 1}`, prov: p }));
        outputs = outputs.map((o, i) => ({ name: o.name, prov: union(o.prov, provs[i] ?? EMPTY) }));
      }
      return { outputs: outputs ?? [] };
    }
    this.from(s.fromClause, level);
    const outputs = this.targets(s.targetList, level);
    if (s.intoClause !== undefined) this.into(s.intoClause, outputs);
    level.outputNames = new Set((outputs ?? []).map((o) => o.name));
    this.clauses(s, level, ['whereClause', 'groupClause', 'havingClause', 'windowClause', 'sortClause', 'distinctClause', 'limitOffset', 'limitCount']);
    return { outputs };
  }

  private clauses(s: Json, level: Level, names: readonly string[]): void {
    for (const n of names) if (s[n] !== undefined) this.expr(s[n], level);
  }

  private dml(s: Json, parent: Level | null, kind: 'insert' | 'update' | 'delete' | 'merge'): QueryResult {
    const ctes = this.withClause(s.withClause, parent);
    const level = this.level(ctes === null ? parent : this.level(parent, ctes), null);
    if (isObj(s.relation)) {
      const target = this.rangeVar(s.relation, level, true);
      level.items.push(target);
      // RETURNING old.* / new.* (PostgreSQL 18, renamable in WITH (OLD AS o)) and ON CONFLICT's excluded are the target's rows.
      const rowNames = ['old', 'new', 'excluded'];
      if (isObj(s.returningClause)) {
        for (const o of asArray(s.returningClause.options)) {
          const name = isObj(o) && isObj(o.ReturningOption) ? str(o.ReturningOption.value) : null;
          if (name !== null) rowNames.push(name);
        }
      }
      for (const alias of rowNames) level.items.push({ ...target, alias, children: [] });
    }
    const table = level.items[0]?.qualified ?? '?';
    let assigned = EMPTY;
    if (kind === 'insert') {
      if (s.selectStmt !== undefined) {
        const r = this.statement(s.selectStmt, parent);
        assigned = r.outputs === null ? UNKNOWN : unionAll(r.outputs.map((o) => o.prov));
        this.positional(table, level.items[0] ?? null, s.cols, r.outputs, assigned);
      }
      if (isObj(s.onConflictClause)) {
        assigned = union(assigned, this.expr(s.onConflictClause, level));
        this.assignments(table, s.onConflictClause.targetList, level);
      }
    }
    if (kind === 'update') this.from(s.fromClause, level);
    if (kind === 'delete') this.from(s.usingClause, level);
    if (kind === 'merge') this.from([s.sourceRelation], level);
    assigned = union(assigned, this.expr(s.targetList, level));
    if (kind === 'update') this.assignments(table, s.targetList, level);
    this.expr(s.whereClause, level);
    this.expr(s.joinCondition, level);
    assigned = union(assigned, this.expr(s.mergeWhenClauses, level));
    for (const w of asArray(s.mergeWhenClauses)) {
      const c = isObj(w) && isObj(w.MergeWhenClause) ? w.MergeWhenClause : null;
      if (c === null) continue;
      if (c.commandType === 'CMD_UPDATE') this.assignments(table, c.targetList, level);
      if (c.commandType === 'CMD_INSERT') {
        const values = asArray(c.values).map((v) => ({ name: '?', prov: this.expr(v, level) }));
        this.positional(table, level.items[0] ?? null, c.targetList, values, unionAll(values.map((v) => v.prov)));
      }
    }
    // RETURNING shows the stored values: what was assigned may flow into any returned column.
    // PostgreSQL 18 holds RETURNING in `returningClause.exprs` (with OLD/NEW aliases); older trees in `returningList`.
    const list = isObj(s.returningClause) ? asArray(s.returningClause.exprs) : asArray(s.returningList);
    if (isObj(s.returningClause) && isObj(s.returningClause.options)) this.expr(s.returningClause.options, level);
    const returning = list.length > 0 ? this.targets(list, level) : [];
    return { outputs: returning === null ? null : returning.map((c) => ({ name: c.name, prov: union(c.prov, assigned) })) };
  }

  /** CREATE TABLE / MATERIALIZED VIEW … AS and SELECT … INTO store each output in a new column. */
  private into(clause: unknown, outputs: readonly RelCol[] | null): void {
    if (!isObj(clause) || !isObj(clause.rel)) return;
    const schema = str(clause.rel.schemaname);
    const name = str(clause.rel.relname) ?? '';
    const table = this.structure.qualify(schema, name);
    // Created in the first schema of the path that exists: each schema the path names may be it.
    const tables = schema === null || schema === '' ? [table, ...this.structure.shadows(name, null).filter((t) => t !== table)] : [table];
    const renames = asArray(clause.colNames).map(stringNode);
    for (const t of tables) {
      if (outputs === null) {
        // Unknown width: every new column may hold anything the statement read.
        this.copies.push({ target: `${t}.*`, sources: { columns: new Set(this.reads), unknown: true } });
        continue;
      }
      outputs.forEach((o, i) => this.copies.push({ target: `${t}.${namePart(renames[i] ?? o.name)}`, sources: o.prov }));
    }
  }

  /** The table a write stores into, and the others its unqualified name may denote under the session's path. */
  private stored(table: string): readonly string[] {
    const more = this.#shadows.get(table);
    return more === undefined ? [table] : [table, ...more];
  }

  /** `SET col = expr` (UPDATE, ON CONFLICT DO UPDATE, MERGE … UPDATE): each column stores what its expression reads. */
  private assignments(table: string, list: unknown, level: Level): void {
    for (const t of asArray(list)) {
      if (!isObj(t) || !isObj(t.ResTarget)) continue;
      const sources = this.expr(t.ResTarget.val, level);
      for (const s of this.stored(table)) this.copies.push({ target: `${s}.${namePart(str(t.ResTarget.name) ?? '*')}`, sources });
    }
  }

  /** `INSERT (cols) SELECT/VALUES …`: column i stores output i; an unknown width stores everything in every column. */
  private positional(table: string, target: Item | null, cols: unknown, outputs: readonly RelCol[] | null, all: Provenance): void {
    const named = asArray(cols).map((c) => (isObj(c) && isObj(c.ResTarget) ? str(c.ResTarget.name) : null));
    const names = named.length > 0 ? named : (target?.columns?.map((c) => c.name) ?? ['*']);
    const aligned = outputs !== null && outputs.length === names.length;
    for (const s of this.stored(table)) names.forEach((n, i) => this.copies.push({ target: `${s}.${namePart(n ?? '*')}`, sources: aligned ? outputs[i]!.prov : all }));
  }

  // ---- FROM ----

  private from(list: unknown, level: Level): void {
    for (const it of asArray(list)) {
      const item = this.fromItem(it, level);
      if (item !== null) level.items.push(item);
    }
  }

  private fromItem(node: unknown, level: Level): Item | null {
    if (!isObj(node)) return null;
    if (isObj(node.RangeVar)) return this.rangeVar(node.RangeVar, level);
    if (isObj(node.RangeSubselect)) {
      const rs = node.RangeSubselect;
      // Earlier FROM items are visible to a LATERAL subquery; PostgreSQL refuses the reference otherwise.
      const r = this.statement(rs.subquery, level);
      return this.derived(aliasOf(rs), r.outputs, rs.alias);
    }
    if (isObj(node.JoinExpr)) return this.join(node.JoinExpr, level);
    if (isObj(node.RangeFunction)) return this.rangeFunction(node.RangeFunction, level);
    if (isObj(node.RangeTableSample)) {
      const inner = this.fromItem(node.RangeTableSample.relation, level);
      this.expr(node.RangeTableSample.args, level);
      this.expr(node.RangeTableSample.repeatable, level);
      return inner;
    }
    // XMLTABLE, JSON_TABLE and anything newer: every column is computed from everything the item reads.
    const type = Object.keys(node)[0] ?? '';
    const body = node[type];
    const prov = this.expr(body, level);
    return { alias: isObj(body) ? aliasOf(body) : null, qualified: null, columns: null, children: [], opaque: union(prov, UNKNOWN) };
  }

  private derived(alias: string | null, outputs: readonly RelCol[] | null, aliasNode: unknown): Item {
    const columns = renamed(outputs, aliasNode);
    return { alias, qualified: null, columns, children: [], opaque: columns === null ? UNKNOWN : EMPTY };
  }

  /** A relation, CTE or view named in FROM (or a DML target). */
  private rangeVar(rv: Json, level: Level, target = false): Item {
    const name = str(rv.relname) ?? '';
    const schema = str(rv.schemaname);
    const alias = aliasOf(rv) ?? name;
    if ((schema === null || schema === '') && !target) {
      const cte = findCte(level, name);
      if (cte !== null) return { alias, qualified: null, columns: renamed(cte.columns, rv.alias), children: [], opaque: cte.columns === null ? cte.opaque : EMPTY };
    }
    const rel = this.structure.lookup(schema, name);
    const shadows = schema === null || schema === '' ? this.structure.shadows(name, rel) : [];
    for (const t of shadows) this.relations.add(t);
    if (rel === null) {
      const qualified = this.structure.qualify(schema, name);
      if (shadows.length > 0) this.#shadows.set(qualified, shadows.filter((t) => t !== qualified));
      this.unresolved.add(`relation ${qualified}`);
      this.relations.add(qualified);
      return { alias, qualified, columns: null, children: [], opaque: UNKNOWN };
    }
    this.relations.add(rel.qualified);
    let own = this.relationColumns(rel);
    if (shadows.length > 0) {
      // The same-named column of every table the name may denote under the path feeds the column (structure.shadows).
      this.#shadows.set(rel.qualified, shadows);
      own = own?.map((c) => ({ name: c.name, prov: union(c.prov, { columns: new Set(shadows.map((t) => `${t}.${namePart(c.name)}`)), unknown: false }) })) ?? null;
    }
    const columns = renamed(own, rv.alias);
    return { alias, qualified: rel.qualified, columns, children: [], opaque: columns === null ? UNKNOWN : EMPTY };
  }

  columnsOf(rel: StructureRelation): readonly RelCol[] | null {
    return this.relationColumns(rel);
  }

  /** A table's columns feed themselves; a view's (or materialized view's) also what its definition computes them from. */
  private relationColumns(rel: StructureRelation): readonly RelCol[] | null {
    // A partition's or inheritance child's column is also its ancestors' column of that name (structure.ts `ancestors`).
    const own = rel.columns.map((c) => {
      const part = namePart(c.name);
      const names = new Set([`${rel.qualified}.${part}`]);
      for (const a of rel.ancestors) names.add(`${a}.${part}`);
      return { name: c.name, prov: { columns: names, unknown: false } as Provenance };
    });
    if (rel.kind !== 'view' && rel.kind !== 'matview') return own;
    const view = this.view(rel);
    if (view.outputs === null || view.outputs.length !== own.length) {
      this.unresolved.add(`view ${rel.qualified}`);
      return own.map((c) => ({ name: c.name, prov: union(c.prov, UNKNOWN) }));
    }
    return own.map((c, i) => ({ name: c.name, prov: union(c.prov, view.outputs![i]!.prov) }));
  }

  private view(rel: StructureRelation): QueryResult {
    // A view's definition was read under the structure's own search_path (pg_get_viewdef), never a session's.
    const base = this.structure.base;
    let memo = viewMemo.get(base);
    if (memo === undefined) viewMemo.set(base, (memo = new Map()));
    let hit = memo.get(rel.oid);
    if (hit === undefined) {
      hit = analyzeView(rel, base, this.viewDepth + 1);
      memo.set(rel.oid, hit);
    }
    for (const r of hit.relations) this.relations.add(r);
    for (const u of hit.unresolved) this.unresolved.add(u);
    return hit;
  }

  private join(j: Json, level: Level): Item {
    const l = this.fromItem(j.larg, level);
    const r = this.fromItem(j.rarg, level);
    const children = [l, r].filter((x): x is Item => x !== null);
    // The join condition sees both sides: give it a level holding them.
    const inner: Level = { parent: level, items: children, ctes: null, outputNames: null };
    this.expr(j.quals, inner);
    const using = asArray(j.usingClause).map(stringNode).filter((s): s is string => s !== null);
    let columns: RelCol[] | null = null;
    if (l !== null && r !== null && l.columns !== null && r.columns !== null) {
      let merged = using;
      if (j.isNatural === true) {
        const rn = new Set(r.columns.map((c) => c.name));
        merged = l.columns.map((c) => c.name).filter((n) => rn.has(n));
      }
      const m = new Set(merged);
      columns = [];
      for (const name of merged) {
        const a = l.columns.find((c) => c.name === name);
        const b = r.columns.find((c) => c.name === name);
        const prov = union(a?.prov ?? UNKNOWN, b?.prov ?? UNKNOWN);
        this.read(prov);
        columns.push({ name, prov });
      }
      for (const c of l.columns) if (!m.has(c.name)) columns.push(c);
      for (const c of r.columns) if (!m.has(c.name)) columns.push(c);
    }
    const alias = isObj(j.alias) ? str(j.alias.aliasname) : null;
    const opaque = columns === null ? unionAll(children.map(wholeOf)) : EMPTY;
    if (columns === null) this.read(opaque);
    return { alias, qualified: null, columns: renamed(columns, j.alias), children, opaque: columns === null ? union(opaque, UNKNOWN) : EMPTY };
  }

  private rangeFunction(rf: Json, level: Level): Item {
    let prov = EMPTY;
    let width = 0;
    const names: string[] = [];
    let known = true;
    for (const f of asArray(rf.functions)) {
      const pair = isObj(f) && isObj(f.List) ? asArray(f.List.items) : [];
      const call = pair[0];
      prov = union(prov, this.expr(call, level));
      const coldefs = asArray(pair[1]);
      if (coldefs.length > 0) {
        for (const d of coldefs) names.push(isObj(d) && isObj(d.ColumnDef) ? (str(d.ColumnDef.colname) ?? '?') : '?');
        width += coldefs.length;
        continue;
      }
      const fname = isObj(call) && isObj(call.FuncCall) ? (asArray(call.FuncCall.funcname).map(stringNode).pop() ?? '') : '';
      const multi = MULTI_COLUMN_FUNCTIONS[fname.toLowerCase()];
      if (multi) {
        names.push(...multi);
        width += multi.length;
      } else if (fname.toLowerCase() === 'unnest' && isObj(call) && isObj(call.FuncCall)) {
        const n = Math.max(1, asArray(call.FuncCall.args).length);
        for (let i = 0; i < n; i++) names.push(n === 1 ? 'unnest' : '?');
        width += n;
      } else if (isObj(call) && (isObj(call.FuncCall) || isObj(call.SQLValueFunction) || isObj(call.TypeCast))) {
        names.push(fname || '?');
        width += 1;
      } else known = false;
    }
    if (rf.ordinality === true) {
      names.push('ordinality');
      width += 1;
    }
    const alias = aliasOf(rf);
    if (!known) return { alias, qualified: null, columns: null, children: [], opaque: union(prov, UNKNOWN) };
    // A single function without a column list is named by its alias (PostgreSQL: `f(…) AS x` names the column x).
    if (width === 1 && alias !== null) names[0] = alias;
    const cols = names.map((n) => ({ name: n, prov }));
    return { alias, qualified: null, columns: renamed(cols, rf.alias), children: [], opaque: EMPTY };
  }

  // ---- target lists ----

  private targets(list: unknown, level: Level): RelCol[] | null {
    let out: RelCol[] | null = [];
    for (const t of asArray(list)) {
      if (!isObj(t) || !isObj(t.ResTarget)) continue;
      const rt = t.ResTarget;
      const val = rt.val;
      const star = starOf(val);
      if (star !== null) {
        const cols = this.expandStar(star, level);
        if (cols === null) out = null;
        else if (out !== null) out.push(...cols);
        continue;
      }
      const prov = this.expr(val, level);
      out?.push({ name: str(rt.name) ?? outputName(val) ?? '?column?', prov });
    }
    return out;
  }

  /** `*` or `t.*` in a select list: one output per column, in PostgreSQL's order. */
  private expandStar(qualifier: string[], level: Level): RelCol[] | null {
    let items: readonly Item[];
    if (qualifier.length === 0) items = level.items;
    else {
      const found = this.findItem(qualifier, level);
      if (found === null) {
        this.unresolved.add(`${qualifier.join('.')}.*`);
        return null;
      }
      items = [found];
    }
    const out: RelCol[] = [];
    let known = true;
    for (const item of items) {
      if (item.columns === null) {
        this.read(item.opaque);
        known = false;
        continue;
      }
      for (const c of item.columns) {
        this.read(c.prov);
        out.push(c);
      }
    }
    return known ? out : null;
  }

  // ---- names ----

  private read(p: Provenance): void {
    for (const c of p.columns) this.reads.add(c);
  }

  private columnOf(item: Item, name: string): RelCol | null {
    if (item.columns === null) return null;
    for (const c of item.columns) if (c.name === name) return c;
    return null;
  }

  /** An item by its alias (`t`) or qualified name (`s.t`), innermost level first. */
  private findItem(q: readonly string[], level: Level): Item | null {
    for (let l: Level | null = level; l !== null; l = l.parent) {
      const found = findIn(l.items, q);
      if (found !== null) return found;
    }
    return null;
  }

  /** The provenance of a ColumnRef; `whole` reads of a row read every column of it. */
  private columnRef(fields: readonly unknown[], level: Level): Provenance {
    const parts: string[] = [];
    let star = false;
    for (const f of fields) {
      const s = stringNode(f);
      if (s !== null) parts.push(s);
      else if (isObj(f) && 'A_Star' in f) star = true;
    }
    if (star) {
      const cols = this.expandStar(parts, level);
      return cols === null ? UNKNOWN : unionAll(cols.map((c) => c.prov));
    }
    if (parts.length === 1) return this.bareName(parts[0]!, level);
    // `t.col`, `s.t.col`, `db.s.t.col`; or `t.col.field` / `col.field` of a composite column.
    const tries: [string[], string][] = [];
    if (parts.length === 2) tries.push([[parts[0]!], parts[1]!]);
    else if (parts.length === 3) tries.push([[parts[0]!, parts[1]!], parts[2]!], [[parts[0]!], parts[1]!]);
    else tries.push([[parts[1]!, parts[2]!], parts[3]!], [[parts[0]!], parts[1]!]);
    const candidates: Provenance[] = [];
    for (const [q, name] of tries) {
      const item = this.findItem(q, level);
      if (item === null) continue;
      const col = this.columnOf(item, name);
      candidates.push(col !== null ? col.prov : item.columns === null ? item.opaque : UNKNOWN);
      break;
    }
    // `col.field`: a field of a composite column reads the column.
    if (candidates.length === 0) candidates.push(this.bareName(parts[0]!, level));
    const p = unionAll(candidates);
    this.read(p);
    return p;
  }

  /** A bare name: a column of the innermost level that has one, else a whole row of an item of that name. */
  private bareName(name: string, level: Level): Provenance {
    let sawOpaque = false;
    for (let l: Level | null = level; l !== null; l = l.parent) {
      const hits: Provenance[] = [];
      for (const item of l.items) {
        const c = this.columnOf(item, name);
        if (c !== null) hits.push(c.prov);
        else if (item.columns === null) sawOpaque = true;
      }
      if (hits.length > 0) {
        const p = unionAll(hits);
        this.read(p);
        return sawOpaque ? union(p, UNKNOWN) : p;
      }
      if (l.outputNames?.has(name)) return EMPTY;
    }
    const item = this.findItem([name], level);
    if (item !== null) {
      // A whole-row reference (`t`, `row_to_json(t)`, `t::text`): every column of the row.
      const p = wholeOf(item);
      this.read(p);
      return p;
    }
    // System columns (ctid, xmin, tableoid) and names PostgreSQL will refuse: nothing proves them free of anything.
    return UNKNOWN;
  }

  // ---- expressions ----

  /** Provenance of any expression; subqueries are analysed as queries of their own with this level as parent. */
  expr(node: unknown, level: Level): Provenance {
    if (Array.isArray(node)) {
      let p = EMPTY;
      for (const x of node) p = union(p, this.expr(x, level));
      return p;
    }
    if (!isObj(node)) return EMPTY;
    if (isObj(node.ColumnRef)) return this.columnRef(asArray(node.ColumnRef.fields), level);
    if (isObj(node.A_Const)) return EMPTY;
    if (isObj(node.A_Indirection)) return this.indirection(node.A_Indirection, level);
    if (isObj(node.SubLink)) {
      const sl = node.SubLink;
      const r = this.statement(sl.subselect, level);
      const inner = r.outputs === null ? UNKNOWN : unionAll(r.outputs.map((o) => o.prov));
      return union(inner, this.expr(sl.testexpr, level));
    }
    if (isObj(node.SelectStmt) || isObj(node.InsertStmt) || isObj(node.UpdateStmt) || isObj(node.DeleteStmt)) {
      const r = this.statement(node, level);
      return r.outputs === null ? UNKNOWN : unionAll(r.outputs.map((o) => o.prov));
    }
    if (isObj(node.RangeVar)) return EMPTY;
    let p = EMPTY;
    for (const k in node) {
      const v = node[k];
      if (typeof v === 'object' && v !== null) p = union(p, this.expr(v, level));
    }
    return p;
  }

  /** `(t).col` reads one column of the row; any other indirection reads what its base reads. */
  private indirection(ind: Json, level: Level): Provenance {
    const arg = ind.arg;
    const path = asArray(ind.indirection);
    const field = stringNode(path[0]);
    if (field !== null && isObj(arg) && isObj(arg.ColumnRef)) {
      const names = asArray(arg.ColumnRef.fields).map(stringNode);
      const row = names.length === 1 ? names[0] : null;
      if (typeof row === 'string' && !this.isColumn(row, level)) {
        const item = this.findItem([row], level);
        if (item !== null) {
          const col = this.columnOf(item, field);
          const p = col !== null ? col.prov : item.columns === null ? item.opaque : UNKNOWN;
          this.read(p);
          return union(p, this.expr(path.slice(1), level));
        }
      }
    }
    return union(this.expr(arg, level), this.expr(path, level));
  }

  private isColumn(name: string, level: Level): boolean {
    for (let l: Level | null = level; l !== null; l = l.parent) for (const item of l.items) if (this.columnOf(item, name) !== null) return true;
    return false;
  }
}

function analyzeView(rel: StructureRelation, structure: SourceStructure, depth: number): QueryResult & { relations: readonly string[]; unresolved: readonly string[] } {
  const fail = (why: string) => ({ outputs: null, relations: [], unresolved: [`view ${rel.qualified}: ${why}`] });
  if (depth > MAX_VIEW_DEPTH) return fail('nested too deep');
  if (rel.definition === null) return fail('no definition');
  const parsed = guardedParse(rel.definition);
  if (!parsed.ok) return fail('definition does not parse');
  const stmt = parsed.tree.stmts?.[0]?.stmt;
  const a = new Analyzer(structure, depth);
  const r = a.statement(stmt, null);
  return { outputs: r.outputs, relations: [...a.relations], unresolved: [...a.unresolved] };
}

/** Analyses one parsed statement against a source's structure. */
export function analyzeStatement(stmt: unknown, structure: SourceStructure): StatementColumns {
  const a = new Analyzer(structure, 0);
  const r = a.statement(stmt, null);
  return Object.freeze({
    reads: Object.freeze([...a.reads]),
    relations: Object.freeze([...a.relations]),
    outputs: r.outputs === null ? null : Object.freeze(r.outputs.map((o) => Object.freeze({ name: o.name === '?column?' || o.name === '?' ? null : o.name, sources: o.prov }))),
    unresolved: Object.freeze([...a.unresolved]),
    copies: Object.freeze(a.copies),
  });
}

const analysisMemo = new WeakMap<SourceStructure, LRUCache<string, readonly StatementColumns[]>>();
/** Statement texts longer than this are analysed every time rather than cached. */
const MEMO_TEXT_MAX = 16 * 1024;

/** Every statement of a text, analysed once per text and structure version (the wire's hot path asks again per execution). */
export function analyzeCached(sql: string, structure: SourceStructure): readonly StatementColumns[] | null {
  let memo = analysisMemo.get(structure);
  if (memo === undefined) analysisMemo.set(structure, (memo = new LRUCache({ max: 5_000 })));
  const hit = memo.get(sql);
  if (hit !== undefined) return hit;
  const parsed = guardedParse(sql);
  if (!parsed.ok) return null;
  const out = Object.freeze((parsed.tree.stmts ?? []).map((s) => analyzeStatement(s.stmt, structure)));
  if (sql.length <= MEMO_TEXT_MAX) memo.set(sql, out);
  return out;
}

const originMemo = new WeakMap<SourceStructure, Map<string, Provenance>>();

/**
 * What a RowDescription origin (table OID, attnum) carries: the column itself, and for a view or materialized view
 * what its definition computes the column from. An OID or attnum the structure does not know is unknown.
 */
export function relationColumnProvenance(structure: SourceStructure, oid: number, attnum: number): Provenance {
  let memo = originMemo.get(structure);
  if (memo === undefined) originMemo.set(structure, (memo = new Map()));
  const key = `${oid}.${attnum}`;
  const hit = memo.get(key);
  if (hit !== undefined) return hit;
  const rel = structure.byOid(oid);
  const index = rel === null ? -1 : rel.columns.findIndex((c) => c.attnum === attnum);
  let p: Provenance = UNKNOWN;
  if (rel !== null && index >= 0) {
    const cols = new Analyzer(structure, 0).columnsOf(rel);
    p = cols?.[index]?.prov ?? UNKNOWN;
  }
  if (memo.size > 10_000) memo.clear();
  memo.set(key, p);
  return p;
}
