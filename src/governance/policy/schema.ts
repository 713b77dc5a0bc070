// Policy model (spec §2 Policy) and the strict zod schemas of its `conditions` and `actions` objects.
import { z } from 'zod';
import { parseRateLimit } from './rate-limit.js';

export const OPERATIONS = ['read', 'write', 'ddl', 'admin'] as const;
export type Operation = (typeof OPERATIONS)[number];

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export const EFFECTS = ['allow', 'deny', 'require_approval'] as const;
export type Effect = (typeof EFFECTS)[number];

export const PII_MODES = ['off', 'fast', 'deep'] as const;
export type PiiMode = (typeof PII_MODES)[number];

/** Bounds keep one stored policy from making every decision slow. */
const MAX_LIST = 256;
const MAX_PATTERN = 512;

const pattern = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_PATTERN)
  .refine((s) => ![...s].some((ch) => ch.charCodeAt(0) < 0x20), 'must not contain control characters');

/** An absent field matches anything; an empty list would match nothing, which is never what was meant. */
const list = <T extends z.ZodType>(item: T) => z.array(item).min(1, 'must list at least one value (omit the field to match anything)').max(MAX_LIST);

export const policyConditionsSchema = z.strictObject({
  source_ids: list(pattern).optional(),
  identity_roles: list(z.string().min(1).max(128)).optional(),
  identity_ids: list(z.number().int().nonnegative()).optional(),
  teams: list(z.string().min(1).max(128)).optional(),
  operations: list(z.enum(OPERATIONS)).optional(),
  methods: list(z.enum(HTTP_METHODS)).optional(),
  paths: list(pattern.refine((s) => s.startsWith('/') || s.startsWith('**'), 'must start with "/" (paths are anchored at the source base path)')).optional(),
  tables: list(pattern).optional(),
  columns: list(pattern).optional(),
  classification_tags: list(z.string().min(1).max(128)).optional(),
});
export type PolicyConditions = z.infer<typeof policyConditionsSchema>;

export const policyActionsSchema = z.strictObject({
  effect: z.enum(EFFECTS).default('allow'),
  rate_limit: z
    .string()
    .max(64)
    .refine((s) => parseRateLimit(s) !== null, 'must look like "100/minute" (units: second, minute, hour, day; optional count as in "300/15minutes")')
    .optional(),
  redact_columns: list(pattern).optional(),
  /** Redacts every column (or HTTP JSON field) the source's catalog classifies with one of these tags (docs/catalog.md). */
  redact_classified: list(z.string().min(1).max(128)).optional(),
  pii_mode: z.enum(PII_MODES).optional(),
  /** Only `false` has an effect: it opts matching requests out of the governed cache. */
  cache: z.boolean().optional(),
});
export type PolicyActions = z.infer<typeof policyActionsSchema>;

/** A stored policy as the control store returns it; conditions and actions are still untrusted JSON. */
export interface PolicyRecord {
  readonly id: number;
  readonly name: string;
  readonly priority: number;
  readonly conditions: unknown;
  readonly actions: unknown;
  readonly enabled: boolean;
}

export interface PolicyIssue {
  /** Path inside the policy, e.g. `["conditions","tables",0]`; the admin API prefixes `body`. */
  readonly loc: (string | number)[];
  readonly msg: string;
  readonly type: string;
}

function toIssues(prefix: string, error: z.ZodError): PolicyIssue[] {
  return error.issues.map((i) => {
    const loc: (string | number)[] = [prefix];
    for (const seg of i.path) loc.push(typeof seg === 'symbol' ? String(seg) : seg);
    if (i.code === 'unrecognized_keys') {
      return { loc, msg: `unknown field(s): ${i.keys.join(', ')}`, type: 'extra_forbidden' };
    }
    return { loc, msg: i.message, type: i.code };
  });
}

export type PolicyParse =
  | { readonly ok: true; readonly conditions: PolicyConditions; readonly actions: PolicyActions }
  | { readonly ok: false; readonly issues: PolicyIssue[] };

/** Validates the two JSON objects of a policy; the admin API and the compiler use the same function. */
export function parsePolicyBody(conditions: unknown, actions: unknown): PolicyParse {
  const c = policyConditionsSchema.safeParse(conditions ?? {});
  const a = policyActionsSchema.safeParse(actions ?? {});
  if (c.success && a.success) return { ok: true, conditions: c.data, actions: a.data };
  const issues: PolicyIssue[] = [];
  if (!c.success) issues.push(...toIssues('conditions', c.error));
  if (!a.success) issues.push(...toIssues('actions', a.error));
  return { ok: false, issues };
}
