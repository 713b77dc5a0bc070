// The alert evaluator (docs/alerts.md "Evaluation"): one holder of a coordination-store lease across replicas rolls the audit log up and evaluates every enabled rule once per tick, moving rules ok → firing → resolved with deduplicated, non-blocking notifications and a kept history.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Coordination, Lock } from '../coord/port.js';
import type { Logger } from '../observability/logger.js';
import { compare, measure, WINDOW_MAX_SECONDS } from './conditions.js';
import { queryOf } from './dry-run.js';
import { collectFigures, pruneRollups, rollUp, windowStart } from './figures.js';
import type { AlertDelivery } from './delivery.js';
import type { AlertEventKind, AlertRule, AlertsDatabase, AlertState } from './schema.js';

export const EVALUATOR_LOCK = 'alerts:evaluator';
/** Rollups are kept for the longest window plus the dry run's 24 h sparkline. */
const ROLLUP_KEEP_SECONDS = WINDOW_MAX_SECONDS + 25 * 3_600;

export interface EvaluatorOptions {
  db: Kysely<AlertsDatabase>;
  coord: Coordination;
  log: Logger;
  intervalMs: number;
  repeatMs: number;
  delivery: AlertDelivery;
  /** Identifies this evaluator in logs (the worker id). */
  holder: string;
}

export interface TickReport {
  leader: boolean;
  tick: number;
  evaluated: number;
  rolled_minutes: number;
  transitions: number;
  duration_ms: number;
  /** Where the tick's time went: rolling up, reading the figures, applying the state machine. */
  phases_ms: { rollup: number; figures: number; apply: number };
}

/**
 * The lease lives for two intervals plus 2 s and is renewed every tick and every third of its life while held, so
 * a dead holder's lease runs out within that time and the next tick of another worker takes it over.
 */
export class AlertEvaluator {
  readonly #o: EvaluatorOptions;
  readonly #ttlMs: number;
  #lock: Lock | null = null;
  #renewer: NodeJS.Timeout | null = null;
  readonly #deliveries = new Set<Promise<void>>();

  constructor(o: EvaluatorOptions) {
    this.#o = o;
    this.#ttlMs = o.intervalMs * 2 + 2_000;
  }

  get ttlMs(): number {
    return this.#ttlMs;
  }

  async #lead(): Promise<boolean> {
    if (this.#lock && !(await this.#lock.extend(this.#ttlMs))) {
      this.#o.log.warn({ holder: this.#o.holder }, 'alert evaluator lease lost');
      this.#dropLock();
    }
    if (!this.#lock) {
      this.#lock = await this.#o.coord.acquireLock(EVALUATOR_LOCK, this.#ttlMs);
      if (!this.#lock) return false;
      this.#o.log.info({ holder: this.#o.holder }, 'alert evaluator lease taken');
      this.#renewer = setInterval(() => {
        void this.#lock?.extend(this.#ttlMs).then((ok) => {
          if (!ok) this.#dropLock();
        }, () => undefined);
      }, Math.max(500, Math.floor(this.#ttlMs / 3)));
      this.#renewer.unref();
    }
    return true;
  }

  #dropLock(): void {
    this.#lock = null;
    if (this.#renewer) clearInterval(this.#renewer);
    this.#renewer = null;
  }

  /** One tick: nothing unless this evaluator holds the lease; each rule is evaluated at most once per tick number. */
  async tick(nowMs = Date.now()): Promise<TickReport> {
    const started = performance.now();
    const tick = Math.floor(nowMs / this.#o.intervalMs);
    const report: TickReport = { leader: false, tick, evaluated: 0, rolled_minutes: 0, transitions: 0, duration_ms: 0, phases_ms: { rollup: 0, figures: 0, apply: 0 } };
    if (!(await this.#lead())) return report;
    report.leader = true;
    const db = this.#o.db;
    // Rollups never run ahead of the clock, whatever time a caller evaluates at.
    let mark = performance.now();
    const lap = () => {
      const t = performance.now();
      const ms = Math.round(t - mark);
      mark = t;
      return ms;
    };
    report.rolled_minutes = (await rollUp(db, Math.min(nowMs, Date.now()))).minutes;
    report.phases_ms.rollup = lap();
    // Claiming the tick on each rule fences a lease handover: a second evaluator in the same tick claims nothing.
    const rules = await db
      .updateTable('alert_rules')
      .set({ last_tick: String(tick) })
      .where('enabled', '=', true)
      .where('last_tick', '<', String(tick))
      .returningAll()
      .execute();
    rules.sort((a, b) => a.id - b.id);
    const figures = await collectFigures(db, rules.map(queryOf), nowMs);
    report.phases_ms.figures = lap();
    const outcomes = rules.map((rule, i) => {
      const m = measure(rule.condition_type, figures[i]!);
      return { rule, value: m.value, details: m.details, fires: compare(m.value, rule.comparator, rule.threshold) };
    });
    report.transitions = await this.#apply(outcomes, nowMs);
    report.evaluated = rules.length;
    report.phases_ms.apply = lap();
    if (tick % 20 === 0) await pruneRollups(db, nowMs, ROLLUP_KEEP_SECONDS);
    report.duration_ms = Math.round(performance.now() - started);
    this.#o.log.info({ holder: this.#o.holder, ...report }, 'alert tick');
    return report;
  }

  /** The state machine of docs/alerts.md, applied to every evaluated rule in one transaction; returns the events recorded. */
  async #apply(outcomes: Array<{ rule: AlertRule; value: number; details: Record<string, unknown>; fires: boolean }>, nowMs: number): Promise<number> {
    const now = new Date(nowMs);
    const changes = outcomes.map(({ rule, value, details, fires }) => {
      let kind: AlertEventKind | null = null;
      let next: AlertState = rule.state;
      if (fires && rule.state !== 'firing') {
        kind = 'firing';
        next = 'firing';
      } else if (fires && (rule.last_notified_at === null || nowMs - rule.last_notified_at.getTime() >= this.#o.repeatMs)) {
        kind = 'repeat';
      } else if (!fires && rule.state === 'firing') {
        kind = 'resolved';
        next = 'resolved';
      }
      return { rule, value, details, kind, next };
    });
    if (changes.length === 0) return 0;
    const notified = changes.filter((c) => c.kind !== null);
    const events = await this.#o.db.transaction().execute(async (trx) => {
      // One statement for every rule's figures and state, one for every event.
      const rows = changes.map((c) => sql`(${c.rule.id}::int, ${c.value}::float8, ${c.next}::text, ${c.kind !== null}::boolean, ${c.next !== c.rule.state}::boolean)`);
      await sql`update alert_rules r set last_value = v.value, last_evaluated_at = ${now.toISOString()}::timestamptz, state = v.state,
          last_notified_at = case when v.notified then ${now.toISOString()}::timestamptz else r.last_notified_at end,
          state_since = case when v.changed then ${now.toISOString()}::timestamptz else r.state_since end
        from (values ${sql.join(rows)}) as v(id, value, state, notified, changed) where r.id = v.id`.execute(trx);
      if (notified.length === 0) return [];
      return trx
        .insertInto('alert_events')
        .values(notified.map((c) => ({ rule_id: c.rule.id, kind: c.kind!, value: c.value, threshold: c.rule.threshold, details: JSON.stringify(c.details), notified: true, delivery_status: 'pending' as const })))
        .returning(['id', 'rule_id', 'ts'])
        .execute();
    });
    for (const e of events) {
      const c = notified.find((n) => n.rule.id === e.rule_id)!;
      const window = { from: windowStart(nowMs, c.rule.window_seconds).toISOString(), to: now.toISOString() };
      // Delivery runs beside evaluation: a slow or failing target never holds the tick up (docs/alerts.md "Delivery").
      const p = this.#deliver(c.rule, { id: String(e.id), kind: c.kind!, ts: e.ts.toISOString(), value: c.value, details: c.details }, window).finally(() => this.#deliveries.delete(p));
      this.#deliveries.add(p);
    }
    return events.length;
  }

  async #deliver(rule: AlertRule, event: { id: string; kind: AlertEventKind; ts: string; value: number; details: Record<string, unknown> }, window: { from: string; to: string }): Promise<void> {
    const outcome = await this.#o.delivery.send({ rule, event, window });
    const error = outcome.ok ? null : outcome.error.slice(0, 500);
    try {
      await this.#o.db
        .updateTable('alert_events')
        .set({ delivery_status: outcome.ok ? 'delivered' : 'failed', delivery_error: error, delivered_at: outcome.ok ? sql<Date>`now()` : null })
        .where('id', '=', event.id)
        .execute();
      await this.#o.db.updateTable('alert_rules').set({ last_delivery_error: error }).where('id', '=', rule.id).execute();
    } catch (err) {
      this.#o.log.error({ err, rule_id: rule.id }, 'alert delivery outcome could not be recorded');
    }
    if (!outcome.ok) this.#o.log.warn({ rule_id: rule.id, channel: rule.notification_channel, event: event.kind, reason: error }, 'alert notification not delivered');
  }

  /** Resolves when every delivery started so far has finished. */
  async idle(): Promise<void> {
    while (this.#deliveries.size > 0) await Promise.allSettled([...this.#deliveries]);
  }

  /** Finishes deliveries and gives the lease back, so another worker takes over at its next tick. */
  async stop(): Promise<void> {
    await this.idle();
    const lock = this.#lock;
    this.#dropLock();
    await lock?.release().catch(() => false);
  }
}
