// Alert rule fields (spec §2 "Alert rule create" / "Alert rule dry run", §8 window default 300): their validation for the JSON API and the console forms, the stored row and the public view.
import { z } from 'zod';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { SOURCE_ID_PATTERN, SOURCE_ID_RULE } from '../registry/sources.js';
import { CHANNELS, COMPARATORS, CONDITION_TYPES, WINDOW_DEFAULT_SECONDS, WINDOW_MAX_SECONDS, WINDOW_MIN_SECONDS, type ConditionType } from './conditions.js';
import type { AlertRule, AlertsDatabase } from './schema.js';

type Db = Kysely<AlertsDatabase>;

const NAME = /^[A-Za-z0-9][A-Za-z0-9 ._@:+()-]*$/;
export const RATE_CONDITIONS: ReadonlySet<ConditionType> = new Set(['error_rate', 'denial_rate']);
const TARGET_MAX = 2048;
const SLACK_CHANNEL = /^[#@]?[A-Za-z0-9][A-Za-z0-9._-]{0,79}$/;

/** JSON numbers in the API; numeric text from a form (spec §2 forms are form-encoded). */
const number = (form: boolean) => (form ? z.coerce.number({ error: 'Input should be a valid number' }) : z.number({ error: 'Input should be a valid number' })).refine(Number.isFinite, 'Input should be a finite number');
const integer = (form: boolean) => (form ? z.coerce.number({ error: 'Input should be a valid integer' }) : z.number({ error: 'Input should be a valid integer' })).int('Input should be a valid integer');

/** Empty text means "not set" (scopes: every identity / every source). */
const blankToNull = (v: unknown) => (v === '' ? null : v);

/** Spec §2 types identity_id as str; a JSON integer is taken too. Scopes one identity; empty = every identity. */
const identityIdSchema = z.preprocess(
  (v) => (typeof v === 'number' ? String(v) : blankToNull(v)),
  z.string().regex(/^[1-9][0-9]{0,9}$/, 'must be the id of an identity (a positive integer)').refine((s) => Number(s) <= 2_147_483_647, 'must be the id of an identity (a positive integer)').transform(Number).nullable(),
);
const sourceIdSchema = z.preprocess(blankToNull, z.string().regex(SOURCE_ID_PATTERN, SOURCE_ID_RULE).nullable());

const fields = (form: boolean) => ({
  name: z.string().min(1, 'must not be empty').max(128).regex(NAME, 'must start with a letter or digit and use letters, digits, spaces or . _ @ : + ( ) -'),
  condition_type: z.enum(CONDITION_TYPES, { error: `must be one of ${CONDITION_TYPES.join(', ')}` }),
  threshold: number(form),
  comparator: z.enum(COMPARATORS, { error: `must be one of ${COMPARATORS.join(' ')}` }),
  description: z.string().max(1000),
  identity_id: identityIdSchema,
  notification_channel: z.enum(CHANNELS, { error: `must be one of ${CHANNELS.join(', ')}` }),
  notification_target: z.string().max(TARGET_MAX),
  source_id: sourceIdSchema,
  window_seconds: integer(form).min(WINDOW_MIN_SECONDS, `must be at least ${WINDOW_MIN_SECONDS}`).max(WINDOW_MAX_SECONDS, `must be at most ${WINDOW_MAX_SECONDS}`),
});

export interface RuleFields {
  name: string;
  condition_type: ConditionType;
  threshold: number;
  comparator: (typeof COMPARATORS)[number];
  description: string;
  identity_id: number | null;
  notification_channel: (typeof CHANNELS)[number];
  notification_target: string;
  source_id: string | null;
  window_seconds: number;
}

type Issue = { path: string; message: string };

/** Rules across fields: a rate is a share in [0, 1], counts are not negative, the target fits the channel. */
export function ruleProblems(r: Pick<RuleFields, 'condition_type' | 'threshold' | 'notification_channel' | 'notification_target'>): Issue[] {
  const out: Issue[] = [];
  if (RATE_CONDITIONS.has(r.condition_type) && (r.threshold < 0 || r.threshold > 1)) out.push({ path: 'threshold', message: `${r.condition_type} is a share of requests: threshold must be between 0 and 1` });
  else if (r.threshold < 0) out.push({ path: 'threshold', message: 'must not be negative' });
  const t = r.notification_target;
  if (r.notification_channel === 'webhook') {
    const problem = webhookTargetProblem(t);
    if (problem) out.push({ path: 'notification_target', message: problem });
  } else if (r.notification_channel === 'slack') {
    if (t !== '' && !SLACK_CHANNEL.test(t)) out.push({ path: 'notification_target', message: 'must be a Slack channel name or id (e.g. #alerts or C0123456789), or empty for notifications.slack_channel' });
  } else if (t !== '') {
    out.push({ path: 'notification_target', message: 'the log channel takes no target' });
  }
  return out;
}

export function webhookTargetProblem(t: string): string | null {
  if (t === '') return 'a webhook needs the URL to POST to';
  let url: URL;
  try {
    url = new URL(t);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an absolute http(s) URL';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials in the URL';
  if (url.hash !== '') return 'must not have a fragment';
  return null;
}

function withProblems<T extends z.ZodType>(schema: T) {
  return schema.superRefine((v, ctx) => {
    for (const p of ruleProblems(v as unknown as RuleFields)) ctx.addIssue({ code: 'custom', path: [p.path], message: p.message });
  });
}

function createFields(form: boolean) {
  const f = fields(form);
  return {
    name: f.name,
    condition_type: f.condition_type,
    threshold: f.threshold,
    comparator: f.comparator.default('>'),
    description: f.description.default(''),
    identity_id: f.identity_id.default(null),
    notification_channel: f.notification_channel.default('log'),
    notification_target: f.notification_target.default(''),
    source_id: f.source_id.default(null),
    window_seconds: f.window_seconds.default(WINDOW_DEFAULT_SECONDS),
  };
}

/** Spec §2 "Alert rule create": name, condition_type, threshold required; the rest defaulted. `enabled` is the API's addition. */
export const apiCreateSchema = withProblems(z.strictObject({ ...createFields(false), enabled: z.boolean().default(true) }));
/** A browser sends every field of a form, empty when left blank: blank is "not given", so the spec's defaults apply. */
const blankIsAbsent = (b: unknown) => (b && typeof b === 'object' ? Object.fromEntries(Object.entries(b).filter(([, v]) => v !== '')) : b);

/** The console form of spec §2 "Alert rule create" (numbers arrive as text; the CSRF field rides along). */
export const formCreateSchema = z.preprocess(blankIsAbsent, withProblems(z.object(createFields(true))));

/** Spec §2 "Alert rule dry run": every field optional, with the spec's defaults. */
export function dryRunSchema(form: boolean) {
  const f = fields(form);
  const base = {
    name: f.name.default('unsaved-rule'),
    condition_type: f.condition_type.default('error_rate'),
    threshold: f.threshold.default(0.1),
    comparator: f.comparator.default('>'),
    description: f.description.default(''),
    identity_id: f.identity_id.default(null),
    notification_channel: f.notification_channel.default('log'),
    notification_target: f.notification_target.default(''),
    source_id: f.source_id.default(null),
    window_seconds: f.window_seconds.default(WINDOW_DEFAULT_SECONDS),
  };
  return form ? z.preprocess(blankIsAbsent, withProblems(z.object(base))) : withProblems(z.strictObject(base));
}

/** PATCH: every field optional; null leaves a required field unchanged and clears identity_id / source_id. */
export const updateSchema = (() => {
  const f = fields(false);
  return z.strictObject({
    name: f.name.nullish(),
    condition_type: f.condition_type.nullish(),
    threshold: f.threshold.nullish(),
    comparator: f.comparator.nullish(),
    description: f.description.nullish(),
    identity_id: f.identity_id.optional(),
    notification_channel: f.notification_channel.nullish(),
    notification_target: f.notification_target.nullish(),
    source_id: f.source_id.optional(),
    window_seconds: f.window_seconds.nullish(),
    enabled: z.boolean().nullish(),
  });
})();

export const ruleResponse = z.object({
  id: z.number().int(),
  name: z.string(),
  description: z.string(),
  condition_type: z.enum(CONDITION_TYPES),
  threshold: z.number(),
  comparator: z.enum(COMPARATORS),
  identity_id: z.string().nullable(),
  source_id: z.string().nullable(),
  notification_channel: z.enum(CHANNELS),
  notification_target: z.string(),
  window_seconds: z.number().int(),
  enabled: z.boolean(),
  state: z.enum(['ok', 'firing', 'resolved']),
  state_since: z.string().nullable(),
  last_value: z.number().nullable(),
  last_evaluated_at: z.string().nullable(),
  last_notified_at: z.string().nullable(),
  last_delivery_error: z.string().nullable(),
  webhook_secret_set: z.boolean(),
  created_at: z.string().nullable(),
  updated_at: z.string().nullable(),
});
export type RuleResponse = z.output<typeof ruleResponse>;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A webhook URL's query string can hold a token: the view keeps scheme, host and path only. */
export function maskedTarget(channel: string, target: string): string {
  if (channel !== 'webhook' || target === '') return target;
  try {
    const u = new URL(target);
    return `${u.origin}${u.pathname}${u.search ? '?…' : ''}`;
  } catch {
    return '…';
  }
}

/** The public view: the secret never leaves, only whether one is set. */
export function publicRule(r: AlertRule): RuleResponse {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    condition_type: r.condition_type,
    threshold: r.threshold,
    comparator: r.comparator,
    identity_id: r.identity_id === null ? null : String(r.identity_id),
    source_id: r.source_id,
    notification_channel: r.notification_channel,
    notification_target: maskedTarget(r.notification_channel, r.notification_target),
    window_seconds: r.window_seconds,
    enabled: r.enabled,
    state: r.state,
    state_since: iso(r.state_since),
    last_value: r.last_value,
    last_evaluated_at: iso(r.last_evaluated_at),
    last_notified_at: iso(r.last_notified_at),
    last_delivery_error: r.last_delivery_error,
    webhook_secret_set: r.webhook_secret !== null,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

// ---------------------------------------------------------------------------------------------
// Store

export function listRules(db: Db): Promise<AlertRule[]> {
  return db.selectFrom('alert_rules').selectAll().orderBy('id').execute();
}

export function getRule(db: Db, id: number): Promise<AlertRule | undefined> {
  return db.selectFrom('alert_rules').selectAll().where('id', '=', id).executeTakeFirst();
}

export function insertRule(db: Db, r: RuleFields & { enabled: boolean; webhook_secret: Buffer | null }): Promise<AlertRule> {
  return db.insertInto('alert_rules').values(r).returningAll().executeTakeFirstOrThrow();
}

export function updateRule(db: Db, id: number, patch: Partial<RuleFields & { enabled: boolean; webhook_secret: Buffer | null }>, resetState: boolean): Promise<AlertRule | undefined> {
  const reset = resetState ? { state: 'ok' as const, state_since: null, last_value: null, last_notified_at: null, last_delivery_error: null } : {};
  return db
    .updateTable('alert_rules')
    .set({ ...patch, ...reset, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteRule(db: Db, id: number): Promise<boolean> {
  const r = await db.deleteFrom('alert_rules').where('id', '=', id).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

export function listEvents(db: Db, ruleId: number, limit: number) {
  return db.selectFrom('alert_events').selectAll().where('rule_id', '=', ruleId).orderBy('ts', 'desc').orderBy('id', 'desc').limit(limit).execute();
}
