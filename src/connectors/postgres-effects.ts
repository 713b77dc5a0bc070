// Measuring a write on its PostgreSQL source before it runs (the pipeline's WriteEffectPort): the planner's estimate from EXPLAIN, and for a queued write the exact count of a run that is always rolled back.
import type { Logger } from '../observability/logger.js';
import type { TableEffect, WriteEstimate } from '../governance/risk.js';
import type { MeasuredWriteEffect, WriteEffectPort, WriteEffectRequest, WritePreview } from '../pipeline/context.js';
import { postgresConfigOf } from './postgres.js';
import { UpstreamSqlError, quoteIdent, type PostgresExecutor, type SessionRun } from './postgres-exec.js';

type PlanNode = Record<string, unknown>;

const OPERATIONS: Readonly<Record<string, TableEffect['operation']>> = { Insert: 'insert', Update: 'update', Delete: 'delete', Merge: 'merge' };

interface Target {
  readonly schema: string;
  readonly name: string;
  readonly operation: TableEffect['operation'];
  readonly rows: number;
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

/** The rows one ModifyTable node writes: its input's rows (planned, or actual × loops after ANALYZE); for an analysed MERGE, what it inserted, updated and deleted. */
function rowsOf(node: PlanNode, analyzed: boolean): number {
  if (analyzed && node['Tuples Inserted'] !== undefined) return num(node['Tuples Inserted']) + num(node['Tuples Updated']) + num(node['Tuples Deleted']);
  const children = Array.isArray(node.Plans) ? (node.Plans as PlanNode[]) : [];
  // The node's own input, not an InitPlan or SubPlan feeding an expression.
  const input = children.find((c) => c['Parent Relationship'] !== 'InitPlan' && c['Parent Relationship'] !== 'SubPlan');
  if (!input) return analyzed ? num(node['Actual Rows']) : num(node['Plan Rows']);
  return analyzed ? num(input['Actual Rows']) * Math.max(num(input['Actual Loops']), 1) : num(input['Plan Rows']);
}

/**
 * Every table a plan writes (ModifyTable nodes, in CTEs too), from EXPLAIN (VERBOSE, FORMAT JSON). A plan whose
 * write cannot be read is an error: the caller fails closed.
 */
export function writeTargets(planJson: string | null | undefined, analyzed: boolean): Target[] {
  const parsed = JSON.parse(planJson ?? 'null') as unknown;
  if (!Array.isArray(parsed) || typeof parsed[0] !== 'object' || parsed[0] === null) throw new Error('no plan');
  const targets: Target[] = [];
  const walk = (node: PlanNode, depth: number): void => {
    if (depth > 200) throw new Error('plan too deep');
    if (node['Node Type'] === 'ModifyTable') {
      const operation = OPERATIONS[String(node.Operation)];
      if (!operation) throw new Error('unknown write operation');
      const named = typeof node['Relation Name'] === 'string' ? [node] : Array.isArray(node['Target Tables']) ? (node['Target Tables'] as PlanNode[]).slice(0, 1) : [];
      if (named.length === 0 || typeof named[0]!['Relation Name'] !== 'string' || typeof named[0]!.Schema !== 'string') throw new Error('write without a named table');
      targets.push({ schema: named[0]!.Schema as string, name: named[0]!['Relation Name'] as string, operation, rows: rowsOf(node, analyzed) });
    }
    if (Array.isArray(node.Plans)) for (const child of node.Plans as PlanNode[]) walk(child, depth + 1);
  };
  walk((parsed[0] as { Plan?: PlanNode }).Plan ?? {}, 0);
  return targets;
}

/** A failure as a reason safe for the audit entry and the approval: a class and a SQLSTATE, never the upstream's message (it may quote values). */
function reasonOf(err: unknown): string {
  const code = (err as { code?: unknown })?.code;
  if (code === 'timeout') return 'timed out';
  if (err instanceof UpstreamSqlError) return err.sqlstate === '57014' ? 'timed out' : `the source refused to plan it (SQLSTATE ${err.sqlstate})`;
  if (code === 'upstream_failed' || code === 'unavailable') return 'the source is unavailable';
  return 'the plan could not be read';
}

/** The error an estimate or preview past its bound ends with (reasonOf: 'timed out'). */
const timedOut = (): Error => Object.assign(new Error('timed out'), { code: 'timeout' });

const withTimeout = <T>(p: Promise<T>, ms: number): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(timedOut()), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e as Error);
      },
    );
  });

/**
 * The tables whose size the share rule weighs (effectRisks): those of which the write rewrites or removes more than
 * `shareMinRows` rows, all its targets on the table together. Another table's size cannot change the decision, and
 * asking for it was one more round trip on every targeted write (docs/decisions/0029, TPC-B addendum).
 */
export function tablesToSize(targets: readonly Pick<Target, 'schema' | 'name' | 'operation' | 'rows'>[], shareMinRows: number): Set<string> {
  const rewritten = new Map<string, number>();
  for (const t of targets) {
    const key = `${t.schema}.${t.name}`;
    if (t.operation !== 'insert') rewritten.set(key, (rewritten.get(key) ?? 0) + t.rows);
  }
  return new Set([...rewritten].filter(([, rows]) => rows > shareMinRows).map(([key]) => key));
}

/** Whole-table row counts as the planner sees them now (pg_class.reltuples scaled to the table's current size), for the tables of tablesToSize. */
async function tableRows(run: SessionRun, targets: readonly Target[], keys: ReadonlySet<string>): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  let left = keys.size;
  for (const key of keys) {
    const t = targets.find((x) => `${x.schema}.${x.name}` === key)!;
    const r = await run(`EXPLAIN (FORMAT JSON) SELECT 1 FROM ${quoteIdent(t.schema)}.${quoteIdent(t.name)}`, [], { last: --left === 0 });
    const plan = JSON.parse(r.rows[0]?.[0] ?? 'null') as [{ Plan: PlanNode }] | null;
    if (!plan?.[0]?.Plan) throw new Error('no plan');
    sizes.set(key, num(plan[0].Plan['Plan Rows']));
  }
  return sizes;
}

function effectsOf(targets: readonly Target[], sizes: ReadonlyMap<string, number> | null): TableEffect[] {
  return targets.map((t) => {
    const table = `${t.schema}.${t.name}`;
    return { table, operation: t.operation, rows: t.rows, tableRows: t.operation === 'insert' ? null : (sizes?.get(table) ?? null) };
  });
}

const total = (targets: readonly Target[]) => targets.reduce((n, t) => n + t.rows, 0);

/**
 * Tables a rolled-back run could reach beyond its own rows: user triggers or rules on a written table, on a table
 * whose foreign key points at one (cascades), or on a partition of one. A trigger may act outside the transaction
 * (a foreign-data wrapper, dblink, a C function), which no rollback undoes.
 */
const REACH_SQL = `
with recursive reach(oid) as (
  select c.oid from pg_class c join pg_namespace n on n.oid = c.relnamespace
    join jsonb_to_recordset($1::jsonb) as t(schema text, name text) on n.nspname = t.schema and c.relname = t.name
  union
  select x.oid from reach r cross join lateral (
    select con.conrelid as oid from pg_constraint con where con.confrelid = r.oid and con.contype = 'f'
    union all
    select i.inhrelid from pg_inherits i where i.inhparent = r.oid
  ) x
)
select (exists (select 1 from pg_trigger g join reach r on g.tgrelid = r.oid where not g.tgisinternal)
     or exists (select 1 from pg_rewrite w join reach r on w.ev_class = r.oid where w.rulename <> '_RETURN'))::text`;

/**
 * The WriteEffectPort on PostgreSQL sources. Its own small pool per source (postgres-runtime.ts), so wire sessions
 * holding every session connection cannot starve the measurement (which would queue every write). Nothing is cached:
 * every write is measured on the table as it is now.
 */
export class PostgresWriteEffects implements WriteEffectPort {
  constructor(
    private readonly executor: PostgresExecutor,
    private readonly log: Logger,
  ) {}

  async estimate(r: WriteEffectRequest): Promise<MeasuredWriteEffect> {
    const config = postgresConfigOf(r.source);
    if (!config) return { estimate: { ok: false, reason: 'the source configuration is invalid' }, thresholds: { max_rows: 0, max_table_share: 0, share_min_rows: 0 } };
    const { max_rows, max_table_share, share_min_rows } = config.write_risk;
    const thresholds = { max_rows, max_table_share, share_min_rows };
    try {
      const deadline = Date.now() + config.write_risk.estimate_timeout_ms;
      const measure = async (): Promise<WriteEstimate> => {
        // Bounded on the server too, so a timed-out estimate does not keep its connection planning: the measuring
        // pool's sessions start with statement_timeout = estimate_timeout_ms (postgres-runtime.ts), which DISCARD ALL
        // on release restores whatever a session set.
        // EXPLAIN without ANALYZE plans the statement with its bound parameters; it does not run it. The session's
        // reset goes with it (`last`): one round trip per estimate (docs/decisions/0029, "the measuring session in one write").
        const plan = await this.executor.withSession(r.source, r.identity, (run) => run(`EXPLAIN (VERBOSE, FORMAT JSON) ${r.sql}`, r.params, { last: true }));
        const targets = writeTargets(plan.rows[0]?.[0], false);
        if (targets.length === 0) return { ok: false, reason: 'the plan writes no table' };
        // Only a write that rewrites or removes many rows of a table needs its size: a session of its own, rarely.
        const toSize = tablesToSize(targets, share_min_rows);
        // An estimate that already timed out (withTimeout answered for it) takes no second measuring connection.
        if (toSize.size > 0 && Date.now() >= deadline) throw timedOut();
        const sizes = toSize.size === 0 ? null : await this.executor.withSession(r.source, r.identity, (run) => tableRows(run, targets, toSize));
        return { ok: true, rows: total(targets), tables: effectsOf(targets, sizes) };
      };
      const estimate = await withTimeout(measure(), config.write_risk.estimate_timeout_ms);
      return { estimate, thresholds };
    } catch (err) {
      const reason = reasonOf(err);
      this.log.warn({ source_id: r.source.source_id, reason }, 'write effect could not be estimated; the write is treated as high risk');
      return { estimate: { ok: false, reason }, thresholds };
    }
  }

  /**
   * The exact count for the approver: the statement itself under EXPLAIN ANALYZE in a transaction that is always
   * rolled back, bounded by statement_timeout and lock_timeout. No row change survives; sequences the statement
   * advanced stay advanced (as in any rolled-back transaction). Not run when a trigger or rule could act beyond the
   * rollback (REACH_SQL), when the estimate is above preview_max_rows, or when the source turns previews off: the
   * approval then shows the estimate only.
   */
  async preview(r: WriteEffectRequest, estimate: WriteEstimate): Promise<WritePreview> {
    const config = postgresConfigOf(r.source);
    if (!config || !estimate.ok) return { ok: false, reason: 'no estimate to preview' };
    if (!config.write_risk.preview_exact_count) return { ok: false, reason: 'exact counts are turned off for this source' };
    if (estimate.rows > config.write_risk.preview_max_rows) return { ok: false, reason: `estimated above preview_max_rows ${config.write_risk.preview_max_rows}: not counted` };
    const ms = config.write_risk.preview_timeout_ms;
    const written = estimate.tables.map((t) => {
      const dot = t.table.indexOf('.');
      return { schema: t.table.slice(0, dot), name: t.table.slice(dot + 1) };
    });
    try {
      return await withTimeout(
        this.executor.withSession(r.source, r.identity, async (run): Promise<WritePreview> => {
          const reach = await run(REACH_SQL, [JSON.stringify(written)]);
          if (reach.rows[0]?.[0] !== 'false') return { ok: false, reason: 'a written table has triggers or rules: not run before approval' };
          await run('BEGIN');
          try {
            // Integers from the validated configuration: nothing of the agent's text is spliced here.
            await run(`SET LOCAL statement_timeout = ${ms}`);
            await run(`SET LOCAL lock_timeout = ${Math.min(ms, 1_000)}`);
            const plan = await run(`EXPLAIN (ANALYZE, TIMING OFF, VERBOSE, FORMAT JSON) ${r.sql}`, r.params);
            const targets = writeTargets(plan.rows[0]?.[0], true);
            return { ok: true, rows: total(targets), tables: effectsOf(targets, null) };
          } finally {
            await run('ROLLBACK', [], { last: true });
          }
        }),
        ms + 2_000,
      );
    } catch (err) {
      const reason = reasonOf(err);
      return { ok: false, reason };
    }
  }
}
