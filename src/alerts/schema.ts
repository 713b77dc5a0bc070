// The Kysely types of the alert tables (migration 0008_alerts), joined to the control-store and audit Database types.
import type { ColumnType, Generated, Selectable } from 'kysely';
import type { AuditDatabase } from '../audit/schema.js';
import type { JsonObject, Json } from '../store/schema.js';
import type { Comparator, ConditionType, NotificationChannel } from './conditions.js';

type Ts = ColumnType<Date, Date | string, Date | string>;
type NullableTs = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type Defaulted<T> = ColumnType<T, T | undefined, T>;

export type AlertState = 'ok' | 'firing' | 'resolved';
export type AlertEventKind = 'firing' | 'resolved' | 'repeat';
export type DeliveryStatus = 'none' | 'pending' | 'delivered' | 'failed';

export interface AlertRulesTable {
  id: Generated<number>;
  name: string;
  description: Defaulted<string>;
  condition_type: ConditionType;
  threshold: number;
  comparator: Comparator;
  identity_id: number | null;
  source_id: string | null;
  notification_channel: NotificationChannel;
  notification_target: Defaulted<string>;
  /** The webhook signing secret, encrypted at rest (secret.ts); never returned after creation. */
  webhook_secret: Buffer | null;
  window_seconds: number;
  enabled: Defaulted<boolean>;
  state: Defaulted<AlertState>;
  state_since: NullableTs;
  last_value: number | null;
  last_evaluated_at: NullableTs;
  /** The last evaluation tick (floor(epoch / interval)) that evaluated the rule: a tick evaluates a rule once. */
  last_tick: ColumnType<string, string | number | undefined, string | number>;
  last_notified_at: NullableTs;
  last_delivery_error: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
  updated_at: Defaulted<Date>;
}

export interface AlertEventsTable {
  id: Generated<string>;
  rule_id: number;
  ts: ColumnType<Date, Date | string | undefined, never>;
  kind: AlertEventKind;
  value: number;
  threshold: number;
  details: Json<JsonObject>;
  notified: Defaulted<boolean>;
  delivery_status: Defaulted<DeliveryStatus>;
  delivery_error: string | null;
  delivered_at: NullableTs;
}

export interface AlertRollupsTable {
  minute: Ts;
  identity_key: number;
  source_key: string;
  requests: string;
  errors: string;
  denials: string;
  rate_limited: string;
  redactions: string;
  cache_hits: Defaulted<string>;
  cache_lookups: Defaulted<string>;
  latency_hist: string[];
}

export interface AlertReachTable {
  identity_id: number;
  source_id: string;
  object: string;
  new_since: Ts;
  last_seen: Ts;
}

export interface AlertRollupStateTable {
  id: Defaulted<boolean>;
  watermark: Ts;
}

export type AlertsDatabase = AuditDatabase & {
  alert_rules: AlertRulesTable;
  alert_events: AlertEventsTable;
  alert_rollups: AlertRollupsTable;
  alert_reach: AlertReachTable;
  alert_rollup_state: AlertRollupStateTable;
};

export type AlertRule = Selectable<AlertRulesTable>;
export type AlertEvent = Selectable<AlertEventsTable>;
