// Policy evaluation rules, one table per rule: conditions, precedence, role-deny supremacy, obligations, trace.
import { describe, expect, it } from 'vitest';
import { compilePolicies, PolicyCompileError } from '../../../src/governance/policy/compile.js';
import type { PolicyInput } from '../../../src/governance/policy/compile.js';
import { evaluate } from '../../../src/governance/policy/evaluate.js';
import { input, policy } from './fixtures.js';

const deny = { effect: 'deny' };

function effectOf(conditions: Record<string, unknown>, req: PolicyInput): string {
  const set = compilePolicies([policy(1, conditions, deny)], { version: 1 });
  return evaluate(set, req).effect;
}

describe('each condition type (a deny policy that matches or not)', () => {
  const http = input({ operation: 'write', method: 'POST', path: '/v1/users/9', tables: [], columns: [] });
  const cases: [string, Record<string, unknown>, PolicyInput, 'deny' | 'allow'][] = [
    ['no conditions match everything', {}, input(), 'deny'],
    ['source_ids exact match', { source_ids: ['crm'] }, input(), 'deny'],
    ['source_ids exact miss', { source_ids: ['billing'] }, input(), 'allow'],
    ['source_ids glob match', { source_ids: ['c*'] }, input(), 'deny'],
    ['source_ids glob miss', { source_ids: ['b*'] }, input(), 'allow'],
    ['identity_roles any-of match', { identity_roles: ['admin', 'analyst'] }, input(), 'deny'],
    ['identity_roles miss', { identity_roles: ['admin'] }, input(), 'allow'],
    ['identity_roles with no roles', { identity_roles: ['admin'] }, input({ identity: { id: 7, roles: [], team: null } }), 'allow'],
    ['identity_ids match', { identity_ids: [7] }, input(), 'deny'],
    ['identity_ids miss', { identity_ids: [8] }, input(), 'allow'],
    ['teams match', { teams: ['data'] }, input(), 'deny'],
    ['teams miss', { teams: ['ops'] }, input(), 'allow'],
    ['teams vs identity without team', { teams: ['data'] }, input({ identity: { id: 7, roles: [], team: null } }), 'allow'],
    ['operations match', { operations: ['read'] }, input(), 'deny'],
    ['operations miss', { operations: ['write', 'ddl'] }, input(), 'allow'],
    ['methods match', { methods: ['POST'] }, http, 'deny'],
    ['methods miss', { methods: ['DELETE'] }, http, 'allow'],
    ['methods vs SQL request (no method)', { methods: ['GET'] }, input(), 'allow'],
    ['methods case-insensitive input', { methods: ['POST'] }, { ...http, method: 'post' }, 'deny'],
    ['paths one segment', { paths: ['/v1/users/*'] }, http, 'deny'],
    ['paths one segment miss', { paths: ['/v1/*'] }, http, 'allow'],
    ['paths any depth', { paths: ['/v1/**'] }, http, 'deny'],
    ['paths vs SQL request (no path)', { paths: ['/**'] }, input(), 'allow'],
    ['tables any table matches', { tables: ['public.users'] }, input({ tables: ['public.orders', 'public.users'] }), 'deny'],
    ['tables glob', { tables: ['public.*'] }, input(), 'deny'],
    ['tables miss', { tables: ['hr.*'] }, input(), 'allow'],
    ['tables vs request without tables', { tables: ['*.*'] }, input({ tables: [] }), 'allow'],
    ['tables case-sensitive', { tables: ['public.Users'] }, input(), 'allow'],
    ['columns bare name', { columns: ['email'] }, input(), 'deny'],
    ['columns qualified', { columns: ['public.users.email'] }, input(), 'deny'],
    ['columns miss', { columns: ['ssn'] }, input(), 'allow'],
    ['classification_tags match', { classification_tags: ['pii'] }, input({ classification_tags: ['finance', 'pii'] }), 'deny'],
    ['classification_tags miss', { classification_tags: ['pii'] }, input({ classification_tags: ['finance'] }), 'allow'],
    ['all conditions must hold (AND)', { source_ids: ['crm'], operations: ['write'] }, input(), 'allow'],
    ['all conditions hold', { source_ids: ['crm'], operations: ['read'], teams: ['data'], tables: ['public.*'] }, input(), 'deny'],
  ];
  it.each(cases)('%s', (_name, conditions, req, expected) => {
    expect(effectOf(conditions, req)).toBe(expected);
  });
});

describe('effect precedence', () => {
  type P = [number, number, string]; // id, priority, effect
  const cases: [string, P[], string, number | null][] = [
    ['no policy: allow', [], 'allow', null],
    ['single allow', [[1, 0, 'allow']], 'allow', 1],
    ['single require_approval', [[1, 0, 'require_approval']], 'require_approval', 1],
    ['equal priority: deny beats allow', [[1, 5, 'allow'], [2, 5, 'deny']], 'deny', 2],
    ['equal priority: deny beats require_approval', [[1, 5, 'require_approval'], [2, 5, 'deny']], 'deny', 2],
    ['equal priority: require_approval beats allow', [[1, 5, 'allow'], [2, 5, 'require_approval']], 'require_approval', 2],
    ['higher priority allow beats lower deny', [[1, 10, 'allow'], [2, 5, 'deny']], 'allow', 1],
    ['higher priority deny beats lower allow', [[1, 1, 'allow'], [2, 9, 'deny']], 'deny', 2],
    ['higher priority require_approval beats lower deny', [[1, 3, 'require_approval'], [2, -3, 'deny']], 'require_approval', 1],
    ['same effect same priority: lowest id decides', [[9, 2, 'deny'], [4, 2, 'deny']], 'deny', 4],
    ['negative priorities', [[1, -1, 'deny'], [2, -2, 'allow']], 'deny', 1],
  ];
  it.each(cases)('%s', (_name, ps, effect, decidingId) => {
    const set = compilePolicies(ps.map(([id, priority, e]) => policy(id, {}, { effect: e }, { priority })), { version: 'v' });
    const d = evaluate(set, input());
    expect(d.effect).toBe(effect);
    expect(d.deciding_policy_id).toBe(decidingId);
  });

  it('disabled policies are ignored entirely', () => {
    const set = compilePolicies([policy(1, {}, deny, { enabled: false, priority: 100 }), policy(2, {}, { effect: 'allow', rate_limit: '1/s' })], { version: 1 });
    const d = evaluate(set, input());
    expect(d.effect).toBe('allow');
    expect(d.matched_policies.map((p) => p.id)).toEqual([2]);
    expect(d.trace.some((t) => t.kind === 'policy' && t.policy_id === 1)).toBe(false);
    expect(set.disabledCount).toBe(1);
  });

  it('a disabled policy is not even validated', () => {
    expect(() => compilePolicies([policy(1, { bogus: 1 }, deny, { enabled: false })], { version: 1 })).not.toThrow();
  });
});

describe('a source-role deny is final (spec §4 rule 1)', () => {
  const cases: [string, string][] = [['allow', 'allow'], ['require_approval', 'require_approval'], ['deny', 'deny']];
  it.each(cases)('a matching %s policy still yields deny', (effect) => {
    const set = compilePolicies([policy(1, {}, { effect }, { priority: 1000 })], { version: 1 });
    const d = evaluate(set, input({ roleDecision: { allowed: false, reason: 'no active grant on source crm' } }));
    expect(d.effect).toBe('deny');
    expect(d.deciding_policy_id).toBeNull();
    expect(d.reasons[0]).toBe('source role: no active grant on source crm');
    expect(d.trace[0]).toEqual({ kind: 'source_role', allowed: false, reason: 'no active grant on source crm' });
    if (effect !== 'deny') expect(d.reasons[1]).toMatch(/cannot create source access/);
  });
  it('with no policies at all', () => {
    const d = evaluate(compilePolicies([], { version: 0 }), input({ roleDecision: { allowed: false } }));
    expect(d.effect).toBe('deny');
    expect(d.reasons).toEqual(['source role: source role denies']);
  });
});

describe('obligations merge across all matching policies', () => {
  const set = compilePolicies(
    [
      policy(1, {}, { effect: 'allow', rate_limit: '100/minute', redact_columns: ['email', 'ssn'], pii_mode: 'fast' }, { priority: 10 }),
      policy(2, { operations: ['read'] }, { effect: 'allow', rate_limit: '10/second', redact_columns: ['ssn', '*.*.card_*'], pii_mode: 'off' }, { priority: 0 }),
      policy(3, { teams: ['data'] }, { effect: 'deny', rate_limit: '1000/hour', pii_mode: 'deep', cache: false }, { priority: -5 }),
      policy(4, { teams: ['ops'] }, { effect: 'allow', rate_limit: '1/day', redact_columns: ['never'], cache: false }),
    ],
    { version: 'abc' },
  );
  const d = evaluate(set, input());

  it('effect comes from the highest priority level only', () => {
    expect(d.effect).toBe('allow');
    expect(d.deciding_policy_id).toBe(1);
    expect(d.matched_policies.map((p) => p.id)).toEqual([1, 2, 3]);
  });
  it('every rate limit is kept, strictest first', () => {
    expect(d.obligations.rate_limits).toEqual([
      { policy_id: 3, points: 1000, durationSec: 3600 },
      { policy_id: 1, points: 100, durationSec: 60 },
      { policy_id: 2, points: 10, durationSec: 1 },
    ]);
    expect(d.obligations.strictest_rate_limit).toEqual({ policy_id: 3, points: 1000, durationSec: 3600 });
  });
  it('redactions are the sorted union; pii mode the strictest; cache opt-out wins', () => {
    expect(d.obligations.redact_columns).toEqual(['*.*.card_*', 'email', 'ssn']);
    expect(d.obligations.pii_mode).toBe('deep');
    expect(d.obligations.cache).toBe(false);
  });
  it('defaults when nothing matches', () => {
    const narrow = compilePolicies([policy(1, { teams: ['ops'] }, { rate_limit: '1/s', redact_columns: ['x'], pii_mode: 'deep', cache: false })], { version: 1 });
    const none = evaluate(narrow, input());
    expect(none.obligations).toEqual({ rate_limits: [], strictest_rate_limit: null, redact_columns: [], pii_mode: null, cache: true });
  });
  it('the set version travels with the decision', () => {
    expect(d.policy_version).toBe('abc');
  });
});

describe('trace', () => {
  it('lists every candidate with the first failed condition', () => {
    const set = compilePolicies(
      [
        policy(1, { source_ids: ['crm'], teams: ['ops'] }, deny),
        policy(2, { tables: ['hr.*'] }, deny),
        policy(3, { identity_roles: ['analyst'] }, { effect: 'require_approval' }),
      ],
      { version: 1 },
    );
    const d = evaluate(set, input());
    expect(d.trace).toEqual([
      { kind: 'source_role', allowed: true, reason: 'source role allows' },
      { kind: 'policy', policy_id: 1, name: 'p1', priority: 0, effect: 'deny', matched: false, failed_condition: 'teams', expected: ['ops'] },
      { kind: 'policy', policy_id: 2, name: 'p2', priority: 0, effect: 'deny', matched: false, failed_condition: 'tables', expected: ['hr.*'] },
      { kind: 'policy', policy_id: 3, name: 'p3', priority: 0, effect: 'require_approval', matched: true, failed_condition: null, expected: null },
    ]);
    expect(d.effect).toBe('require_approval');
    expect(d.reasons).toEqual(['policy 3 (p3) at priority 0: require_approval']);
  });
});

describe('indexing by source and operation', () => {
  const set = compilePolicies(
    [
      policy(1, { source_ids: ['crm'], operations: ['write'] }, deny),
      policy(2, { source_ids: ['billing'] }, deny),
      policy(3, { source_ids: ['cr*'] }, { effect: 'require_approval' }, { priority: 1 }),
      policy(4, {}, { effect: 'allow' }, { priority: 2 }),
    ],
    { version: 1 },
  );
  it('touches only policies of the source (exact or wildcard) and operation, in global order', () => {
    const ids = (req: PolicyInput) => evaluate(set, req).trace.flatMap((t) => (t.kind === 'policy' ? [t.policy_id] : []));
    expect(ids(input())).toEqual([4, 3]);
    expect(ids(input({ operation: 'write' }))).toEqual([4, 3, 1]);
    // The source glob of policy 3 is resolved when the candidate list is built, so it is no candidate here.
    expect(ids(input({ source_id: 'billing' }))).toEqual([4, 2]);
    expect(ids(input({ source_id: 'other' }))).toEqual([4]);
    expect(ids(input({ source_id: 'crx' }))).toEqual([4, 3]);
    // Memoised lists give the same answer the second time.
    expect(ids(input({ source_id: 'crx' }))).toEqual([4, 3]);
  });
  it('an unknown operation is denied without evaluation', () => {
    const d = evaluate(set, input({ operation: 'multi' as never }));
    expect(d.effect).toBe('deny');
    expect(d.reasons[0]).toMatch(/unknown operation/);
  });
});

describe('compilePolicies', () => {
  it('rejects an invalid enabled policy with its id and issue paths', () => {
    try {
      compilePolicies([policy(1, {}, { effect: 'allow' }), policy(5, { tables: 'x' }, deny)], { version: 1 });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(PolicyCompileError);
      const err = e as PolicyCompileError;
      expect(err.code).toBe('POLICY_INVALID');
      expect(err.policyId).toBe(5);
      expect(err.issues[0]?.loc).toEqual(['conditions', 'tables']);
    }
  });
  it('rejects duplicate ids and non-integer priorities', () => {
    expect(() => compilePolicies([policy(1, {}, deny), policy(1, {}, deny)], { version: 1 })).toThrow(/duplicate policy id 1/);
    expect(() => compilePolicies([policy(1, {}, deny, { priority: 1.5 })], { version: 1 })).toThrow(/priority/);
  });
});
