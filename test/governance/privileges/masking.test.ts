// Masked reads, pure: for generated roles, grants and redaction policies, a column the gateway would redact for an identity is never readable on its base table by that identity's managed role; in public it is read through the role's own view, masked, and every other readable column passes through that view unmasked; elsewhere it is simply not granted.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { compilePolicies, evaluate, type PolicyRecord } from '../../../src/governance/policy/index.js';
import type { Grant, SourceRole } from '../../../src/governance/source-roles.js';
import { desiredPrivileges, type PrivilegeAtom, type PrivilegeStructure } from '../../../src/governance/privileges/desired.js';
import { maskExpression } from '../../../src/governance/privileges/masking.js';
import { redactedColumnMatcher } from '../../../src/governance/sql/result-columns.js';

const COLUMNS = ['id', 'email', 'ssn', 'body'];
const TYPES = ['integer', 'text', 'character varying(11)', 'jsonb'];
const structure: PrivilegeStructure = {
  database: 'db',
  relations: ['public', 'sales'].flatMap((schema) => ['customers', 'orders'].map((name) => ({ schema, name, kind: 'table' as const, columns: COLUMNS, types: TYPES, sequences: [] }))),
  functions: [],
};
const now = new Date('2026-01-01T00:00:00Z');
const columnGlob = fc.constantFrom('ssn', 'email', '*.*.ssn', 'public.customers.email', 'sales.*.body', 'id', 'public.orders.*');
const redactPolicy = (id: number): fc.Arbitrary<PolicyRecord> =>
  fc.record({
    id: fc.constant(id),
    name: fc.constant(`r${id}`),
    priority: fc.integer({ min: 0, max: 2 }),
    enabled: fc.constant(true),
    conditions: fc.record({ identity_ids: fc.subarray([1, 2], { minLength: 1 }) }, { requiredKeys: [] }),
    actions: fc.record({ effect: fc.constant('allow'), redact_columns: fc.array(columnGlob, { minLength: 1, maxLength: 3 }) }),
  });
const roles: SourceRole[] = [{ id: 1, source_id: 'src', role_key: 'reader', description: '', enabled: true, rules: { http: [], sql: [{ operations: ['read'], tables: ['*.*'] }] } }];
const grants: Grant[] = [1, 2].map((id) => ({ id, identity_id: id, source_id: 'src', role_id: 1, role_key: 'reader', enabled: true, expires_at: null, granted_by: null }));

function baseReadable(atoms: readonly PrivilegeAtom[], schema: string, table: string, column: string): boolean {
  return atoms.some((a) => a.schema === schema && a.name === table && a.privilege === 'SELECT' && (a.kind === 'table' || (a.kind === 'column' && a.column === column)));
}

describe('masked reads', () => {
  it('a redacted column has no base privilege; public tables are read through a view that masks exactly the redacted columns', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { minLength: 1, maxLength: 3 }).chain((ids) => fc.tuple(...ids.map((_, i) => redactPolicy(i + 1)))), (policies) => {
        const set = compilePolicies(policies, { version: 1 });
        const identities = [1, 2].map((id) => ({ id, roles: [], team: null, enabled: true }));
        const d = desiredPrivileges({ sourceId: 'src', prefix: 'gh_', structure, roles, grants, identities, policies: set, now, maskedReads: true });
        for (const id of [1, 2]) {
          const role = d.sessionRoles.get(id)!;
          const atoms = d.roles.get(role)!;
          for (const rel of structure.relations) {
            const q = `${rel.schema}.${rel.name}`;
            const decision = evaluate(set, { identity: { id, roles: [], team: null }, source_id: 'src', operation: 'read', tables: [q], columns: [], classification_tags: [], roleDecision: { allowed: true } });
            const redacted = redactedColumnMatcher(decision.obligations.redact_columns);
            const masked = COLUMNS.filter((c) => decision.obligations.redact_columns.length > 0 && redacted(`${q}.${c}`));
            for (const c of COLUMNS) expect(baseReadable(atoms, rel.schema, rel.name, c), `${role} ${q}.${c}`).toBe(!masked.includes(c));
            const view = d.views?.get(role)?.find((v) => v.name === rel.name);
            if (rel.schema !== 'public' || masked.length === 0) {
              if (rel.schema === 'public') expect(view).toBeUndefined();
              continue;
            }
            expect(view?.schema).toBe(role);
            expect(atoms).toContainEqual({ kind: 'table', schema: role, name: rel.name, column: '', privilege: 'SELECT' });
            expect(atoms).toContainEqual({ kind: 'schema', schema: role, name: role, column: '', privilege: 'USAGE' });
            for (const [i, c] of COLUMNS.entries()) {
              const expected = masked.includes(c) ? `${maskExpression(c, TYPES[i]!, [])} AS "${c}"` : `"${c}"`;
              expect(view!.create).toContain(expected);
            }
          }
        }
      }),
      { numRuns: 150 },
    );
  });

  it('masks by type and classification', () => {
    expect(maskExpression('n', 'integer', [])).toBe('NULL::integer');
    expect(maskExpression('e', 'text', ['email'])).toContain("regexp_replace(\"e\"::pg_catalog.text, '^[^@]*', '***')");
    expect(maskExpression('c', 'character varying(19)', ['card'])).toContain("pg_catalog.right(\"c\"::pg_catalog.text, 4)");
    expect(maskExpression('t', 'text', [])).toContain("'[REDACTED:column]'");
    expect(maskExpression('j', 'jsonb', [])).toContain('to_json');
    expect(maskExpression('a"b', 'text', [])).toContain('"a""b"');
  });
});
