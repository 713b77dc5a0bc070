// Public surface of the policy engine: model, schemas, compiler and evaluator.
export { OPERATIONS, HTTP_METHODS, EFFECTS, PII_MODES, policyConditionsSchema, policyActionsSchema, parsePolicyBody } from './schema.js';
export type { Operation, HttpMethod, Effect, PiiMode, PolicyConditions, PolicyActions, PolicyRecord, PolicyIssue, PolicyParse } from './schema.js';
export { parseRateLimit, compareStrictness, MAX_RATE_POINTS, MAX_RATE_DURATION_SEC } from './rate-limit.js';
export type { RateLimitSpec } from './rate-limit.js';
export { compileGlob, compileGlobs, compileColumnGlobs, GLOB_SEP } from './glob.js';
export type { Matcher } from './glob.js';
export { compilePolicies, candidatesFor, PolicyCompileError, CONDITION_ORDER } from './compile.js';
export type { CompiledPolicy, CompiledPolicySet, PolicyInput, ConditionName } from './compile.js';
export { evaluate } from './evaluate.js';
export type { Decision, Obligations, MatchedPolicy, RateLimitObligation, TraceEntry } from './evaluate.js';
