// Policy API shapes (spec §2 Policy): request and response schemas, the engine-backed body check, and the response view.
import { z } from 'zod';
import { parsePolicyBody } from '../../governance/policy/index.js';
import type { PolicyIssue } from '../../governance/policy/index.js';
import type { ValidationErrorItem } from '../../http/validation.js';
import type { JsonObject, Policy } from '../../store/schema.js';

/** The store's check constraint is 1..255 characters. */
export const policyName = z.string().trim().min(1, 'must not be empty').max(255);
export const policyPriority = z.number().int('Input should be a valid integer').min(-1_000_000).max(1_000_000);
/** conditions/actions are objects here; their fields are checked by the engine's schemas (parsePolicyBody). */
const jsonObject = z.record(z.string(), z.unknown());

export const policyCreateSchema = z.strictObject({
  name: policyName,
  conditions: jsonObject,
  actions: jsonObject,
  priority: policyPriority.default(0),
  enabled: z.boolean().default(true),
});
export type PolicyCreate = z.output<typeof policyCreateSchema>;

/** Update: every field optional and nullable (spec §2); null means "leave unchanged" (name, priority, enabled cannot be null in the store). */
export const policyUpdateSchema = z.strictObject({
  name: policyName.nullish(),
  conditions: jsonObject.nullish(),
  actions: jsonObject.nullish(),
  priority: policyPriority.nullish(),
  enabled: z.boolean().nullish(),
});
export type PolicyUpdate = z.output<typeof policyUpdateSchema>;

export const policyViewSchema = z.object({
  id: z.number().int(),
  name: z.string(),
  priority: z.number().int(),
  conditions: z.record(z.string(), z.unknown()),
  actions: z.record(z.string(), z.unknown()),
  enabled: z.boolean(),
  created_at: z.date().nullable(),
  updated_at: z.date().nullable(),
});
export type PolicyView = z.output<typeof policyViewSchema>;

export function viewPolicy(p: Policy): PolicyView {
  return {
    id: p.id,
    name: p.name,
    priority: p.priority,
    conditions: p.conditions as Record<string, unknown>,
    actions: p.actions as Record<string, unknown>,
    enabled: p.enabled,
    created_at: p.created_at,
    updated_at: p.updated_at,
  };
}

/** Issues of the engine's schemas as 422 items, located under `prefix` (e.g. ["body"] → ["body","actions","rate_limit"]). */
export function issuesAt(prefix: readonly (string | number)[], issues: readonly PolicyIssue[]): ValidationErrorItem[] {
  return issues.map((i) => ({ loc: [...prefix, ...i.loc], msg: i.msg, type: i.type === 'extra_forbidden' ? 'extra_forbidden' : `value_error.${i.type}` }));
}

export type CheckedBody = { ok: true; conditions: JsonObject; actions: JsonObject } | { ok: false; issues: PolicyIssue[] };

/**
 * Validates conditions and actions with the engine's own schemas, so nothing is stored that the compiler
 * would refuse. What is stored is what was sent (minus nothing): defaults are applied when compiled.
 */
export function checkPolicyBody(conditions: unknown, actions: unknown): CheckedBody {
  const parsed = parsePolicyBody(conditions, actions);
  if (!parsed.ok) return { ok: false, issues: parsed.issues };
  return { ok: true, conditions: conditions as JsonObject, actions: actions as JsonObject };
}

/** Canonical JSON (keys sorted) so that "unchanged" does not depend on key order. */
export function canonical(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value as Record<string, unknown>).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}
