// Property tests: a policy never turns a source-role deny into access, and evaluation ignores insertion order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compilePolicies } from '../../../src/governance/policy/compile.js';
import type { PolicyInput } from '../../../src/governance/policy/compile.js';
import { evaluate } from '../../../src/governance/policy/evaluate.js';
import type { PolicyRecord } from '../../../src/governance/policy/schema.js';

const sources = ['crm', 'billing', 'hr', 'docs'];
const roles = ['analyst', 'admin', 'bot'];
const teams = ['data', 'ops'];
const ops = ['read', 'write', 'ddl', 'admin'] as const;
const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
const tables = ['public.users', 'public.orders', 'hr.salaries', 'audit.log'];
const columns = ['public.users.email', 'public.users.ssn', 'hr.salaries.amount'];
const paths = ['/v1/users', '/v1/users/1', '/v1/orders/2/items', '/admin'];

const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const sub = <T>(values: readonly T[]) => fc.subarray([...values], { minLength: 1 });

const conditionsArb = fc.record(
  {
    source_ids: opt(fc.subarray([...sources, 'c*', '*', 'b*'], { minLength: 1 })),
    identity_roles: opt(sub(roles)),
    identity_ids: opt(sub([1, 2, 3])),
    teams: opt(sub(teams)),
    operations: opt(sub(ops)),
    methods: opt(sub(methods)),
    paths: opt(sub(['/v1/**', '/v1/users/*', '/admin', '/**'])),
    tables: opt(sub(['public.*', 'hr.salaries', '*.*', 'audit.*'])),
    columns: opt(sub(['email', 'ssn', '*.*.amount'])),
    classification_tags: opt(sub(['pii', 'finance'])),
  },
  { requiredKeys: [] },
).map((c) => Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)));

const actionsArb = fc.record(
  {
    effect: fc.constantFrom('allow', 'deny', 'require_approval'),
    rate_limit: opt(fc.constantFrom('10/second', '100/minute', '5/hour', '1000/day')),
    redact_columns: opt(sub(['email', 'ssn', '*.*.amount'])),
    pii_mode: opt(fc.constantFrom('off', 'fast', 'deep')),
    cache: opt(fc.boolean()),
  },
  { requiredKeys: ['effect'] },
).map((a) => Object.fromEntries(Object.entries(a).filter(([, v]) => v !== undefined)));

const policiesArb = fc
  .array(fc.record({ priority: fc.integer({ min: -3, max: 3 }), enabled: fc.boolean(), conditions: conditionsArb, actions: actionsArb }), { maxLength: 25 })
  .map((ps): PolicyRecord[] => ps.map((p, i) => ({ id: i + 1, name: `p${i + 1}`, ...p })));

const inputArb = (allowed: fc.Arbitrary<boolean>): fc.Arbitrary<PolicyInput> =>
  fc.record({
    identity: fc.record({ id: fc.integer({ min: 1, max: 4 }), roles: fc.subarray(roles), team: fc.option(fc.constantFrom(...teams), { nil: null }) }),
    source_id: fc.constantFrom(...sources, 'other'),
    operation: fc.constantFrom(...ops),
    method: opt(fc.constantFrom(...methods)),
    path: opt(fc.constantFrom(...paths)),
    tables: fc.subarray(tables),
    columns: fc.subarray(columns),
    classification_tags: fc.subarray(['pii', 'finance', 'public']),
    roleDecision: allowed.map((a) => ({ allowed: a })),
  });

describe('policy properties', () => {
  it('never turns a source-role deny into allow or require_approval', () => {
    fc.assert(
      fc.property(policiesArb, inputArb(fc.constant(false)), (ps, req) => {
        const d = evaluate(compilePolicies(ps, { version: 1 }), req);
        expect(d.effect).toBe('deny');
        expect(d.deciding_policy_id).toBeNull();
      }),
      { numRuns: 400 },
    );
  });

  it('gives the identical decision under any permutation of the policy array', () => {
    fc.assert(
      fc.property(
        policiesArb.chain((ps) => fc.tuple(fc.constant(ps), fc.shuffledSubarray(ps, { minLength: ps.length, maxLength: ps.length }))),
        inputArb(fc.boolean()),
        ([ps, shuffled], req) => {
          const a = evaluate(compilePolicies(ps, { version: 1 }), req);
          const b = evaluate(compilePolicies(shuffled, { version: 1 }), req);
          expect(b).toEqual(a);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('the source/operation index selects exactly what an unindexed scan would match', () => {
    fc.assert(
      fc.property(policiesArb, inputArb(fc.boolean()), (ps, req) => {
        const set = compilePolicies(ps, { version: 1 });
        const d = evaluate(set, req);
        // Reference: every enabled policy checked one by one, no index.
        const reference = set.policies.filter((p) => p.tests.every((t) => t.test(req))).map((p) => p.id);
        expect(d.matched_policies.map((m) => m.id)).toEqual(reference);
      }),
      { numRuns: 400 },
    );
  });
});
