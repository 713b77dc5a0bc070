// Compiles stored policies once per change into a versioned set indexed by source id and operation.
import { compileColumnGlobs, compileGlobs, GLOB_SEP, hasWildcard } from './glob.js';
import type { Matcher } from './glob.js';
import { parseRateLimit } from './rate-limit.js';
import type { RateLimitSpec } from './rate-limit.js';
import { OPERATIONS, parsePolicyBody } from './schema.js';
import type { Effect, Operation, PiiMode, PolicyActions, PolicyConditions, PolicyIssue, PolicyRecord } from './schema.js';

/** What a policy is evaluated against; every front door builds the same shape (DESIGN §1). */
export interface PolicyInput {
  readonly identity: { readonly id: number; readonly roles: readonly string[]; readonly team: string | null };
  readonly source_id: string;
  readonly operation: Operation;
  readonly method?: string | undefined;
  readonly path?: string | undefined;
  readonly tables?: readonly string[] | undefined;
  readonly columns?: readonly string[] | undefined;
  readonly classification_tags?: readonly string[] | undefined;
  /**
   * What the source's catalog classifies, by tag: the names a `redact_classified` action redacts (dotted
   * `schema.table.column` for SQL sources, JSON field names for HTTP ones). Passed in as data: the core reads no catalog.
   */
  readonly classified?: ReadonlyMap<string, readonly string[]> | undefined;
  readonly roleDecision: { readonly allowed: boolean; readonly reason?: string | undefined };
}

/** Condition names in the order they are checked (cheap identity checks before glob work). */
export const CONDITION_ORDER = [
  'source_ids', 'operations', 'identity_ids', 'identity_roles', 'teams',
  'methods', 'paths', 'tables', 'columns', 'classification_tags',
] as const;
export type ConditionName = (typeof CONDITION_ORDER)[number];

export interface ConditionTest {
  readonly name: ConditionName;
  readonly test: (input: PolicyInput) => boolean;
}

export interface CompiledPolicy {
  readonly id: number;
  readonly name: string;
  readonly priority: number;
  readonly effect: Effect;
  /** Position in the global order (priority desc, id asc); candidate lists are merged by it. */
  readonly rank: number;
  readonly conditions: PolicyConditions;
  readonly actions: PolicyActions;
  readonly rateLimit: RateLimitSpec | null;
  readonly redactColumns: readonly string[];
  /** Tags whose classified columns this policy redacts. */
  readonly redactClassified: readonly string[];
  readonly piiMode: PiiMode | null;
  readonly cacheOptOut: boolean;
  readonly tests: readonly ConditionTest[];
  /** The `source_ids` globs, compiled, or null when the policy names no source. */
  readonly sourceMatcher: Matcher | null;
}

type OpBuckets = Readonly<Record<Operation, readonly CompiledPolicy[]>>;

export interface CompiledPolicySet {
  readonly version: string | number;
  /** Enabled policies in evaluation order. */
  readonly policies: readonly CompiledPolicy[];
  readonly disabledCount: number;
  /** Policies whose `source_ids` are all exact names, by name. */
  readonly bySource: ReadonlyMap<string, OpBuckets>;
  /** Policies with no `source_ids` condition or with a wildcard in it. */
  readonly anySource: OpBuckets;
  /** Candidate lists per operation and source, built on first use (sources are a small, registered set). */
  readonly candidateMemo: Map<string, readonly CompiledPolicy[]>;
}

/** Bound on memoised candidate lists; past it the memo restarts rather than growing with odd source ids. */
const MAX_MEMO = 4096;

export class PolicyCompileError extends Error {
  readonly code = 'POLICY_INVALID';
  constructor(
    message: string,
    readonly policyId: number,
    readonly issues: readonly PolicyIssue[],
  ) {
    super(message);
    this.name = 'PolicyCompileError';
  }
}

function anyOf(values: readonly string[] | undefined, m: Matcher): boolean {
  if (values === undefined) return false;
  for (const v of values) if (m(v)) return true;
  return false;
}

function buildTests(c: PolicyConditions): ConditionTest[] {
  const tests: ConditionTest[] = [];
  const add = (name: ConditionName, test: (input: PolicyInput) => boolean) => tests.push({ name, test });
  if (c.source_ids) {
    const m = compileGlobs(c.source_ids, GLOB_SEP.source);
    add('source_ids', (i) => m(i.source_id));
  }
  if (c.operations) {
    const ops = new Set<string>(c.operations);
    add('operations', (i) => ops.has(i.operation));
  }
  if (c.identity_ids) {
    const ids = new Set(c.identity_ids);
    add('identity_ids', (i) => ids.has(i.identity.id));
  }
  if (c.identity_roles) {
    const roles = new Set(c.identity_roles);
    add('identity_roles', (i) => i.identity.roles.some((r) => roles.has(r)));
  }
  if (c.teams) {
    const teams = new Set(c.teams);
    add('teams', (i) => i.identity.team !== null && teams.has(i.identity.team));
  }
  if (c.methods) {
    const methods = new Set<string>(c.methods);
    add('methods', (i) => i.method !== undefined && methods.has(i.method.toUpperCase()));
  }
  if (c.paths) {
    const m = compileGlobs(c.paths, GLOB_SEP.path);
    add('paths', (i) => i.path !== undefined && m(i.path));
  }
  if (c.tables) {
    const m = compileGlobs(c.tables, GLOB_SEP.table);
    add('tables', (i) => anyOf(i.tables, m));
  }
  if (c.columns) {
    const m = compileColumnGlobs(c.columns);
    add('columns', (i) => anyOf(i.columns, m));
  }
  if (c.classification_tags) {
    const tags = new Set(c.classification_tags);
    add('classification_tags', (i) => i.classification_tags !== undefined && i.classification_tags.some((t) => tags.has(t)));
  }
  return tests;
}

function emptyBuckets(): Record<Operation, CompiledPolicy[]> {
  return { read: [], write: [], ddl: [], admin: [] };
}

function addToBuckets(b: Record<Operation, CompiledPolicy[]>, p: CompiledPolicy): void {
  for (const op of p.conditions.operations ?? OPERATIONS) b[op].push(p);
}

/**
 * Validates and compiles every policy; one invalid policy fails the whole compile so the caller keeps
 * its previous set — silently skipping a broken deny would loosen access.
 */
export function compilePolicies(records: readonly PolicyRecord[], options: { version: string | number }): CompiledPolicySet {
  const seen = new Set<number>();
  const enabled: PolicyRecord[] = [];
  for (const r of records) {
    if (seen.has(r.id)) throw new PolicyCompileError(`duplicate policy id ${r.id}`, r.id, [{ loc: ['id'], msg: 'duplicate policy id', type: 'duplicate' }]);
    seen.add(r.id);
    if (!Number.isSafeInteger(r.priority)) {
      throw new PolicyCompileError(`policy ${r.id}: priority must be an integer`, r.id, [{ loc: ['priority'], msg: 'must be an integer', type: 'int_type' }]);
    }
    if (r.enabled) enabled.push(r);
  }
  // Evaluation order never depends on the order of `records` (docs/governance/policies.md: determinism).
  enabled.sort((a, b) => b.priority - a.priority || a.id - b.id);

  const policies: CompiledPolicy[] = enabled.map((r, rank) => {
    const parsed = parsePolicyBody(r.conditions, r.actions);
    if (!parsed.ok) {
      const first = parsed.issues[0];
      throw new PolicyCompileError(`policy ${r.id} (${r.name}) is invalid: ${first ? `${first.loc.join('.')}: ${first.msg}` : 'invalid'}`, r.id, parsed.issues);
    }
    const { conditions, actions } = parsed;
    return {
      id: r.id,
      name: r.name,
      priority: r.priority,
      effect: actions.effect,
      rank,
      conditions,
      actions,
      rateLimit: actions.rate_limit === undefined ? null : parseRateLimit(actions.rate_limit),
      redactColumns: actions.redact_columns ?? [],
      redactClassified: actions.redact_classified ?? [],
      piiMode: actions.pii_mode ?? null,
      cacheOptOut: actions.cache === false,
      tests: buildTests(conditions),
      sourceMatcher: conditions.source_ids === undefined ? null : compileGlobs(conditions.source_ids, GLOB_SEP.source),
    };
  });

  const bySource = new Map<string, Record<Operation, CompiledPolicy[]>>();
  const anySource = emptyBuckets();
  for (const p of policies) {
    const ids = p.conditions.source_ids;
    if (ids === undefined || ids.some(hasWildcard)) {
      addToBuckets(anySource, p);
      continue;
    }
    for (const id of new Set(ids)) {
      let b = bySource.get(id);
      if (b === undefined) {
        b = emptyBuckets();
        bySource.set(id, b);
      }
      addToBuckets(b, p);
    }
  }
  return { version: options.version, policies, disabledCount: records.length - enabled.length, bySource, anySource, candidateMemo: new Map() };
}

/**
 * Candidates for one request in evaluation order: the exact-source bucket merged by rank with those
 * wildcard-bucket policies whose source glob matches this source. Memoised per (operation, source).
 */
export function candidatesFor(set: CompiledPolicySet, sourceId: string, operation: Operation): readonly CompiledPolicy[] {
  const key = `${operation}\u0000${sourceId}`;
  const hit = set.candidateMemo.get(key);
  if (hit !== undefined) return hit;
  const list = buildCandidates(set, sourceId, operation);
  if (set.candidateMemo.size >= MAX_MEMO) set.candidateMemo.clear();
  set.candidateMemo.set(key, list);
  return list;
}

function buildCandidates(set: CompiledPolicySet, sourceId: string, operation: Operation): readonly CompiledPolicy[] {
  const wild = set.anySource[operation].filter((p) => p.sourceMatcher === null || p.sourceMatcher(sourceId));
  const exact = set.bySource.get(sourceId)?.[operation];
  if (exact === undefined || exact.length === 0) return wild;
  if (wild.length === 0) return exact;
  const out: CompiledPolicy[] = [];
  let i = 0;
  let j = 0;
  while (i < exact.length && j < wild.length) {
    const a = exact[i] as CompiledPolicy;
    const b = wild[j] as CompiledPolicy;
    if (a.rank < b.rank) {
      out.push(a);
      i += 1;
    } else {
      out.push(b);
      j += 1;
    }
  }
  while (i < exact.length) out.push(exact[i++] as CompiledPolicy);
  while (j < wild.length) out.push(wild[j++] as CompiledPolicy);
  return out;
}
