// The dry run of an unsaved rule (spec §2 "Alert rule dry run"): the measured value now, whether it would fire, and a 24 h sparkline; it reads only and sends nothing.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { compare, measure } from './conditions.js';
import { collectFigures, windowStart, type FigureQuery } from './figures.js';
import type { RuleFields } from './rules.js';
import type { AlertsDatabase } from './schema.js';

export const SPARKLINE_POINTS = 24;
const HOUR_MS = 3_600_000;

export interface DryRunResult {
  name: string;
  condition_type: RuleFields['condition_type'];
  comparator: RuleFields['comparator'];
  threshold: number;
  window_seconds: number;
  identity_id: string | null;
  source_id: string | null;
  notification_channel: RuleFields['notification_channel'];
  value: number;
  would_fire: boolean;
  details: Record<string, number | string | null>;
  window: { from: string; to: string };
  /** One point per hour, oldest first, the last one now; null where the rollups do not reach back (docs/alerts.md). */
  sparkline: Array<{ at: string; value: number | null }>;
}

export function queryOf(r: Pick<RuleFields, 'condition_type' | 'identity_id' | 'source_id' | 'window_seconds'>): FigureQuery {
  return { condition_type: r.condition_type, scope: { identity_id: r.identity_id, source_id: r.source_id }, window_seconds: r.window_seconds };
}

export async function dryRun(db: Kysely<AlertsDatabase>, rule: RuleFields, nowMs: number): Promise<DryRunResult> {
  const q = queryOf(rule);
  const [figures] = await collectFigures(db, [q], nowMs);
  const m = measure(rule.condition_type, figures!);
  const covered = await sql<{ first: Date | null }>`select min(minute) as first from alert_rollups`.execute(db);
  const first = covered.rows[0]?.first?.getTime() ?? Number.POSITIVE_INFINITY;
  const sparkline: DryRunResult['sparkline'] = [];
  for (let k = SPARKLINE_POINTS - 1; k >= 1; k--) {
    const at = nowMs - k * HOUR_MS;
    // The approval queue has no history; other figures have it as far back as the rollups go.
    if (rule.condition_type === 'approval_backlog' || windowStart(at, rule.window_seconds).getTime() < first) {
      sparkline.push({ at: new Date(at).toISOString(), value: null });
      continue;
    }
    const [f] = await collectFigures(db, [q], at);
    sparkline.push({ at: new Date(at).toISOString(), value: measure(rule.condition_type, f!).value });
  }
  sparkline.push({ at: new Date(nowMs).toISOString(), value: m.value });
  return {
    name: rule.name,
    condition_type: rule.condition_type,
    comparator: rule.comparator,
    threshold: rule.threshold,
    window_seconds: rule.window_seconds,
    identity_id: rule.identity_id === null ? null : String(rule.identity_id),
    source_id: rule.source_id,
    notification_channel: rule.notification_channel,
    value: m.value,
    would_fire: compare(m.value, rule.comparator, rule.threshold),
    details: m.details,
    window: { from: windowStart(nowMs, rule.window_seconds).toISOString(), to: new Date(nowMs).toISOString() },
    sparkline,
  };
}
