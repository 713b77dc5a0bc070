// Desired privileges equal the gateway's own decisions: for generated rules, grants and deny policies, a managed role may read a column exactly when the source-role stage and the policy stage would let that identity read it.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { compilePolicies, evaluate, type PolicyRecord } from '../../../src/governance/policy/index.js';
import { sourceRoleDecision, type Grant, type SourceRole } from '../../../src/governance/source-roles.js';
import { desiredPrivileges, type PrivilegeAtom, type PrivilegeStructure } from '../../../src/governance/privileges/desired.js';
import { planReconciliation, planStatements, type ActualRole } from '../../../src/governance/privileges/plan.js';

const SCHEMAS = ['public', 'sales'];
const TABLES = ['customers', 'orders', 'notes'];
const COLUMNS = ['id', 'email', 'ssn', 'body'];
const now = new Date('2026-01-01T00:00:00Z');

const structure: PrivilegeStructure = {
  database: 'db',
  relations: SCHEMAS.flatMap((schema) => TABLES.map((name) => ({ schema, name, kind: 'table' as const, columns: COLUMNS, sequences: [] }))),
  functions: [],
};

const tableGlob = fc.constantFrom('*.*', 'public.*', 'sales.*', '*.customers', 'public.orders', 'sales.notes', '*.c*', 'public.o*');
const sqlRule = fc.record({
  operations: fc.subarray(['read', 'write'] as const, { minLength: 1 }),
  tables: fc.array(tableGlob, { minLength: 1, maxLength: 3 }),
});
const role = (id: number) => fc.record({ id: fc.constant(id), source_id: fc.constant('src'), role_key: fc.constant(`role${id}`), description: fc.constant(''), enabled: fc.boolean(), rules: fc.record({ http: fc.constant([]), sql: fc.array(sqlRule, { minLength: 1, maxLength: 3 }) }) });
const columnGlob = fc.constantFrom('ssn', 'email', '*.*.ssn', 'public.customers.email', 'sales.*.body', 'id');
const policy = (id: number): fc.Arbitrary<PolicyRecord> =>
  fc.record({
    id: fc.constant(id),
    name: fc.constant(`p${id}`),
    priority: fc.integer({ min: 0, max: 2 }),
    enabled: fc.boolean(),
    conditions: fc.record(
      {
        identity_ids: fc.subarray([1, 2, 3], { minLength: 1 }),
        identity_roles: fc.constant(['analyst']),
        tables: fc.array(tableGlob, { minLength: 1, maxLength: 2 }),
        columns: fc.array(columnGlob, { minLength: 1, maxLength: 2 }),
        operations: fc.subarray(['read', 'write'] as const, { minLength: 1 }),
      },
      { requiredKeys: [] },
    ),
    actions: fc.record({ effect: fc.constantFrom('deny', 'deny', 'allow', 'require_approval') }),
  });

const world = fc.record({
  roles: fc.tuple(role(1), role(2), role(3)),
  grants: fc.array(fc.record({ identity: fc.integer({ min: 1, max: 3 }), role: fc.integer({ min: 1, max: 3 }), enabled: fc.boolean() }), { maxLength: 6 }),
  policies: fc.array(fc.nat(), { maxLength: 5 }).chain((ids) => fc.tuple(...ids.map((_, i) => policy(i + 1)))),
});

function canRead(atoms: readonly PrivilegeAtom[], schema: string, table: string, column: string): boolean {
  return atoms.some((a) => a.schema === schema && a.name === table && a.privilege === 'SELECT' && (a.kind === 'table' || (a.kind === 'column' && a.column === column)));
}

describe('desired privileges', () => {
  it('grant a column read exactly when the gateway would allow reading it, and a write exactly when it would allow the write', () => {
    fc.assert(
      fc.property(world, ({ roles, grants: g, policies }) => {
        const grants: Grant[] = g.map((x, i) => ({ id: i + 1, identity_id: x.identity, source_id: 'src', role_id: x.role, role_key: `role${x.role}`, enabled: x.enabled, expires_at: null, granted_by: null }));
        const identities = [1, 2, 3].map((id) => ({ id, roles: id === 2 ? ['analyst'] : [], team: null, enabled: true }));
        const set = compilePolicies(policies, { version: 1 });
        const desired = desiredPrivileges({ sourceId: 'src', prefix: 'gh_', structure, roles: roles as SourceRole[], grants, identities, policies: set, now });
        for (const ident of identities) {
          const roleName = desired.sessionRoles.get(ident.id) ?? desired.baseRole;
          const atoms = desired.roles.get(roleName)!;
          expect(atoms.some((a) => a.kind === 'database' && a.privilege === 'CONNECT')).toBe(true);
          for (const rel of structure.relations) {
            const q = `${rel.schema}.${rel.name}`;
            const ctx = { source_id: 'src', identity_id: ident.id, grants, roles: roles as SourceRole[], now };
            for (const op of ['read', 'write'] as const) {
              const role = sourceRoleDecision(ctx, { kind: 'sql', operation: op, tables: [q] });
              const who = { id: ident.id, roles: ident.roles, team: null };
              if (op === 'read') {
                for (const c of rel.columns) {
                  const d = evaluate(set, { identity: who, source_id: 'src', operation: 'read', tables: [q], columns: [`${q}.${c}`], roleDecision: role });
                  const tableLevel = evaluate(set, { identity: who, source_id: 'src', operation: 'read', tables: [q], columns: [], roleDecision: role });
                  const gateway = role.allowed && d.effect !== 'deny' && tableLevel.effect !== 'deny';
                  expect(canRead(atoms, rel.schema, rel.name, c), `${roleName} read ${q}.${c}`).toBe(gateway);
                }
              } else {
                const d = evaluate(set, { identity: who, source_id: 'src', operation: 'write', tables: [q], columns: [], roleDecision: role });
                const has = atoms.some((a) => a.kind === 'table' && a.schema === rel.schema && a.name === rel.name && a.privilege === 'INSERT');
                expect(has, `${roleName} write ${q}`).toBe(role.allowed && d.effect !== 'deny');
              }
            }
          }
          // USAGE on exactly the schemas of the objects it may touch.
          const used = new Set(atoms.filter((a) => a.kind === 'table' || a.kind === 'column').map((a) => a.schema));
          expect(new Set(atoms.filter((a) => a.kind === 'schema').map((a) => a.schema))).toEqual(used);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('an identity gets its own role only when no granted role has exactly its privileges', () => {
    const roles: SourceRole[] = [{ id: 1, source_id: 'src', role_key: 'reader', description: '', enabled: true, rules: { http: [], sql: [{ operations: ['read'], tables: ['*.*'] }] } }];
    const grants: Grant[] = [1, 2].map((id) => ({ id, identity_id: id, source_id: 'src', role_id: 1, role_key: 'reader', enabled: true, expires_at: null, granted_by: null }));
    const policies = compilePolicies([{ id: 1, name: 'no ssn for 2', priority: 0, enabled: true, conditions: { identity_ids: [2], columns: ['ssn'] }, actions: { effect: 'deny' } }], { version: 1 });
    const identities = [1, 2, 3].map((id) => ({ id, roles: [], team: null, enabled: true }));
    const d = desiredPrivileges({ sourceId: 'src', prefix: 'gh_', structure, roles, grants, identities, policies, now });
    expect(d.sessionRoles.get(1)).toBe('gh_r_reader');
    expect(d.sessionRoles.get(2)).toBe('gh_i_2');
    expect(d.sessionRoles.has(3)).toBe(false);
    const own = d.roles.get('gh_i_2')!;
    expect(own.some((a) => a.column === 'ssn')).toBe(false);
    expect(own.some((a) => a.kind === 'column' && a.column === 'email' && a.name === 'orders')).toBe(true);
    expect(d.roles.get('gh_base')!.map((a) => a.privilege)).toEqual(['CONNECT']);
  });

  it('plans nothing once the actual privileges equal the desired ones, and revokes drift and unwanted roles', () => {
    const roles: SourceRole[] = [{ id: 1, source_id: 'src', role_key: 'reader', description: '', enabled: true, rules: { http: [], sql: [{ operations: ['read'], tables: ['public.*'] }] } }];
    const d = desiredPrivileges({ sourceId: 'src', prefix: 'gh_', structure, roles, grants: [], identities: [], policies: compilePolicies([], { version: 1 }), now });
    const actual = new Map<string, ActualRole>([...d.roles].map(([name, atoms]) => [name, { name, atoms, memberOf: [], extraAttributes: [] }]));
    const clean = planReconciliation(d, { roles: actual, loginMemberOf: new Set(d.roles.keys()) });
    expect(planStatements(clean, 'login')).toEqual([]);
    const drift: PrivilegeAtom = { kind: 'table', schema: 'sales', name: 'orders', column: '', privilege: 'DELETE' };
    actual.set('gh_r_reader', { ...actual.get('gh_r_reader')!, atoms: [...actual.get('gh_r_reader')!.atoms, drift], memberOf: ['pg_read_all_data'] });
    actual.set('gh_i_9', { name: 'gh_i_9', atoms: [drift], memberOf: [], extraAttributes: ['LOGIN'] });
    const sql = planStatements(planReconciliation(d, { roles: actual, loginMemberOf: new Set(d.roles.keys()) }), 'login');
    expect(sql).toEqual([
      'ALTER ROLE "gh_i_9" NOLOGIN',
      'REVOKE "pg_read_all_data" FROM "gh_r_reader"',
      'REVOKE DELETE ON TABLE "sales"."orders" FROM "gh_i_9"',
      'REVOKE DELETE ON TABLE "sales"."orders" FROM "gh_r_reader"',
      'DROP ROLE "gh_i_9"',
    ]);
  });

  it('re-grants kept columns after a table-level REVOKE (PostgreSQL drops column grants of that privilege with it)', () => {
    const col = (c: string): PrivilegeAtom => ({ kind: 'column', schema: 'public', name: 't', column: c, privilege: 'SELECT' });
    const table: PrivilegeAtom = { kind: 'table', schema: 'public', name: 't', column: '', privilege: 'SELECT' };
    const desired = { roles: new Map([['gh_r', [col('a')]]]), sessionRoles: new Map<number, string>(), baseRole: 'gh_base' };
    const actual = { roles: new Map<string, ActualRole>([['gh_r', { name: 'gh_r', atoms: [table, col('a')], memberOf: [], extraAttributes: [] }]]), loginMemberOf: new Set(['gh_r']) };
    expect(planStatements(planReconciliation(desired, actual), 'login')).toEqual(['REVOKE SELECT ON TABLE "public"."t" FROM "gh_r"', 'GRANT SELECT ("a") ON TABLE "public"."t" TO "gh_r"']);
  });
});
