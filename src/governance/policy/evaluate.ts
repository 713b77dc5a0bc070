// Evaluates a compiled policy set for one request: effect by precedence, merged obligations and a full trace.
import { candidatesFor } from './compile.js';
import type { CompiledPolicy, CompiledPolicySet, ConditionName, PolicyInput } from './compile.js';
import { compareStrictness } from './rate-limit.js';
import { OPERATIONS } from './schema.js';
import type { Effect, PiiMode } from './schema.js';

export interface RateLimitObligation {
  readonly policy_id: number;
  readonly points: number;
  readonly durationSec: number;
}

export interface Obligations {
  /** Every matching policy's limit, strictest first (ties by policy id); all of them are enforced. */
  readonly rate_limits: RateLimitObligation[];
  readonly strictest_rate_limit: RateLimitObligation | null;
  /** Union of the matching policies' column globs, sorted. */
  readonly redact_columns: string[];
  /** Strictest mode any matching policy asked for (deep > fast > off); null when none did. */
  readonly pii_mode: PiiMode | null;
  /** False when any matching policy opted out of the governed cache. */
  readonly cache: boolean;
}

export interface MatchedPolicy {
  readonly id: number;
  readonly name: string;
  readonly priority: number;
  readonly effect: Effect;
}

export type TraceEntry =
  | { readonly kind: 'source_role'; readonly allowed: boolean; readonly reason: string }
  | {
      readonly kind: 'policy';
      readonly policy_id: number;
      readonly name: string;
      readonly priority: number;
      readonly effect: Effect;
      readonly matched: boolean;
      /** The first condition that did not hold and the values it asked for; null when the policy matched. */
      readonly failed_condition: ConditionName | null;
      readonly expected: readonly unknown[] | null;
    };

export interface Decision {
  readonly effect: Effect;
  readonly reasons: string[];
  readonly policy_version: string | number;
  readonly matched_policies: MatchedPolicy[];
  /** The policy whose effect decided, or null when no policy matched or the source role denied. */
  readonly deciding_policy_id: number | null;
  readonly obligations: Obligations;
  readonly trace: TraceEntry[];
}

const KNOWN_OPERATIONS: ReadonlySet<string> = new Set(OPERATIONS);
const EFFECT_WEIGHT: Readonly<Record<Effect, number>> = { allow: 0, require_approval: 1, deny: 2 };
const PII_WEIGHT: Readonly<Record<PiiMode, number>> = { off: 0, fast: 1, deep: 2 };

function firstFailure(p: CompiledPolicy, input: PolicyInput): ConditionName | null {
  for (const t of p.tests) if (!t.test(input)) return t.name;
  return null;
}

function mergeObligations(matched: readonly CompiledPolicy[], classified?: ReadonlyMap<string, readonly string[]>): Obligations {
  const rate: RateLimitObligation[] = [];
  const redact = new Set<string>();
  let pii: PiiMode | null = null;
  let cache = true;
  for (const p of matched) {
    if (p.rateLimit !== null) rate.push({ policy_id: p.id, points: p.rateLimit.points, durationSec: p.rateLimit.durationSec });
    if (p.redactColumns.length > 0) for (const c of p.redactColumns) redact.add(c);
    if (p.redactClassified.length > 0 && classified !== undefined) {
      for (const tag of p.redactClassified) for (const c of classified.get(tag) ?? []) redact.add(c);
    }
    if (p.piiMode !== null && (pii === null || PII_WEIGHT[p.piiMode] > PII_WEIGHT[pii])) pii = p.piiMode;
    if (p.cacheOptOut) cache = false;
  }
  rate.sort((a, b) => compareStrictness(a, b) || a.policy_id - b.policy_id);
  return {
    rate_limits: rate,
    strictest_rate_limit: rate[0] ?? null,
    redact_columns: redact.size === 0 ? [] : [...redact].sort(),
    pii_mode: pii,
    cache,
  };
}

/**
 * Effect rules (docs/governance/policies.md "Precedence"):
 * 1. A source-role deny is final: the effect is deny whatever the policies say (spec §4 rule 1).
 * 2. Otherwise the highest-priority level that has a matching policy decides; within that level
 *    deny > require_approval > allow. Lower levels only contribute obligations.
 * 3. No matching policy: allow (the source role already allowed).
 * Obligations merge across every matching policy, whatever its priority or effect.
 */
export function evaluate(set: CompiledPolicySet, input: PolicyInput): Decision {
  const trace: TraceEntry[] = [];
  const roleReason = input.roleDecision.reason ?? (input.roleDecision.allowed ? 'source role allows' : 'source role denies');
  trace.push({ kind: 'source_role', allowed: input.roleDecision.allowed, reason: roleReason });

  if (!KNOWN_OPERATIONS.has(input.operation)) {
    // A front door that could not classify the request gets no policy evaluation, only a refusal.
    return {
      effect: 'deny',
      reasons: [`unknown operation "${String(input.operation)}"`],
      policy_version: set.version,
      matched_policies: [],
      deciding_policy_id: null,
      obligations: mergeObligations([]),
      trace,
    };
  }

  const candidates = candidatesFor(set, input.source_id, input.operation);
  const matched: CompiledPolicy[] = [];
  const matched_policies: MatchedPolicy[] = [];
  for (const p of candidates) {
    const failed = firstFailure(p, input);
    // One object shape for both outcomes keeps this hot loop monomorphic.
    trace.push({
      kind: 'policy', policy_id: p.id, name: p.name, priority: p.priority, effect: p.effect, matched: failed === null,
      failed_condition: failed, expected: failed === null ? null : (p.conditions[failed] as readonly unknown[]),
    });
    if (failed === null) {
      matched.push(p);
      matched_policies.push({ id: p.id, name: p.name, priority: p.priority, effect: p.effect });
    }
  }

  let decider: CompiledPolicy | null = null;
  for (const p of matched) {
    if (decider !== null && p.priority !== decider.priority) break;
    if (decider === null || EFFECT_WEIGHT[p.effect] > EFFECT_WEIGHT[decider.effect]) decider = p;
  }

  const obligations = mergeObligations(matched, input.classified);
  const reasons: string[] = [];
  let effect: Effect;
  if (!input.roleDecision.allowed) {
    effect = 'deny';
    reasons.push(`source role: ${roleReason}`);
    if (decider !== null && decider.effect !== 'deny') {
      reasons.push(`policy ${decider.id} (${decider.name}) would ${decider.effect}, but a policy cannot create source access`);
    }
    return { effect, reasons, policy_version: set.version, matched_policies, deciding_policy_id: null, obligations, trace };
  }
  if (decider === null) {
    effect = 'allow';
    reasons.push('no policy matched; source role allows');
  } else {
    effect = decider.effect;
    reasons.push(`policy ${decider.id} (${decider.name}) at priority ${decider.priority}: ${decider.effect}`);
  }
  return { effect, reasons, policy_version: set.version, matched_policies, deciding_policy_id: decider?.id ?? null, obligations, trace };
}
