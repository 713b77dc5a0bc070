// Property, against the real PostgreSQL: for a generated matrix of role rules, grants and deny policies, after reconciliation the privileges PostgreSQL lists in information_schema for each identity's session role are exactly the reads and writes the gateway's own decisions allow, run after run on the same database (so revokes are exercised too).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import pg from 'pg';
import { compilePolicies, evaluate, type PolicyRecord } from '../../src/governance/policy/index.js';
import { sourceRoleDecision, type Grant, type SourceRole } from '../../src/governance/source-roles.js';
import { desiredPrivileges } from '../../src/governance/privileges/desired.js';
import { emptyPlan, planReconciliation, planStatements } from '../../src/governance/privileges/plan.js';
import { readActual, readStructure } from '../../src/privileges/catalog.js';
import { createTestDatabase, TEST_PG_HOST, TEST_PG_PORT, type TestDatabase } from '../support/pg.js';
import { dropRoles } from './fixture.js';

const prefix = `ghm${Date.now().toString(36).slice(-5)}_`;
const adminRole = `${prefix}adm`;
let db: TestDatabase;
let admin: pg.Client;
const now = new Date();

beforeAll(async () => {
  db = await createTestDatabase();
  const c = await db.connect();
  await c.query(`create role "${adminRole}" login createrole;
    grant connect on database "${db.name}" to "${adminRole}" with grant option;
    create schema sales authorization "${adminRole}";
    grant usage, create on schema public to "${adminRole}" with grant option;
    set role "${adminRole}";
    create table public.customers (id serial primary key, email text, ssn text);
    create table public.notes (id int, body text);
    create table sales.orders (id int, email text, total numeric);
    create view sales.totals as select id, total from sales.orders;`);
  await c.end();
  admin = new pg.Client({ host: TEST_PG_HOST, port: TEST_PG_PORT, user: adminRole, database: db.name });
  await admin.connect();
}, 30_000);

afterAll(async () => {
  await admin?.end();
  await db?.drop();
  await dropRoles(prefix);
});

const tableGlob = fc.constantFrom('*.*', 'public.*', 'sales.*', '*.customers', 'sales.orders', 'public.n*', '*.totals');
const sqlRule = fc.record({ operations: fc.subarray(['read', 'write'] as const, { minLength: 1 }), tables: fc.array(tableGlob, { minLength: 1, maxLength: 2 }) });
const role = (id: number) =>
  fc.record({ id: fc.constant(id), source_id: fc.constant('src'), role_key: fc.constant(`k${id}`), description: fc.constant(''), enabled: fc.constant(true), rules: fc.record({ http: fc.constant([]), sql: fc.array(sqlRule, { minLength: 1, maxLength: 2 }) }) });
const policy = (id: number): fc.Arbitrary<PolicyRecord> =>
  fc.record({
    id: fc.constant(id),
    name: fc.constant(`p${id}`),
    priority: fc.integer({ min: 0, max: 1 }),
    enabled: fc.constant(true),
    conditions: fc.record(
      { identity_ids: fc.subarray([1, 2, 3], { minLength: 1 }), tables: fc.array(tableGlob, { minLength: 1, maxLength: 1 }), columns: fc.array(fc.constantFrom('ssn', 'email', 'sales.*.total'), { minLength: 1, maxLength: 2 }) },
      { requiredKeys: [] },
    ),
    actions: fc.record({ effect: fc.constantFrom('deny', 'deny', 'allow') }),
  });
const matrix = fc.record({
  roles: fc.tuple(role(1), role(2)),
  grants: fc.array(fc.record({ identity: fc.integer({ min: 1, max: 3 }), role: fc.integer({ min: 1, max: 2 }) }), { minLength: 1, maxLength: 4 }),
  policies: fc.array(fc.nat(), { maxLength: 3 }).chain((ids) => fc.tuple(...ids.map((_, i) => policy(i + 1)))),
});

describe('managed privileges read back from PostgreSQL', () => {
  it('equal the gateway decisions for every identity, table and column', async () => {
    await fc.assert(
      fc.asyncProperty(matrix, async ({ roles, grants: g, policies }) => {
        const grants: Grant[] = g.map((x, i) => ({ id: i + 1, identity_id: x.identity, source_id: 'src', role_id: x.role, role_key: `k${x.role}`, enabled: true, expires_at: null, granted_by: null }));
        const identities = [1, 2, 3].map((id) => ({ id, roles: [], team: null, enabled: true }));
        const set = compilePolicies(policies, { version: 1 });
        const structure = await readStructure(admin, prefix);
        const desired = desiredPrivileges({ sourceId: 'src', prefix, structure, roles: roles as SourceRole[], grants, identities, policies: set, now });
        const plan = planReconciliation(desired, await readActual(admin, prefix, 'postgres'));
        await admin.query('begin');
        await admin.query(planStatements(plan, 'postgres').join(';\n') || 'select 1');
        await admin.query('commit');
        expect(emptyPlan(planReconciliation(desired, await readActual(admin, prefix, 'postgres')))).toBe(true);
        for (const ident of identities) {
          const roleName = desired.sessionRoles.get(ident.id) ?? desired.baseRole;
          // information_schema, not the reconciler's own reading: column_privileges lists table-level grants per column too.
          const cols = await admin.query<{ c: string }>(
            `select table_schema || '.' || table_name || '.' || column_name as c from information_schema.column_privileges where grantee = $1 and privilege_type = 'SELECT'`,
            [roleName],
          );
          const writes = await admin.query<{ t: string }>(`select table_schema || '.' || table_name as t from information_schema.table_privileges where grantee = $1 and privilege_type = 'INSERT'`, [roleName]);
          const expectedReads = new Set<string>();
          const expectedWrites = new Set<string>();
          for (const rel of structure.relations) {
            const q = `${rel.schema}.${rel.name}`;
            const ctx = { source_id: 'src', identity_id: ident.id, grants, roles: roles as SourceRole[], now };
            const who = { id: ident.id, roles: [], team: null };
            const read = sourceRoleDecision(ctx, { kind: 'sql', operation: 'read', tables: [q] });
            const tableDeny = evaluate(set, { identity: who, source_id: 'src', operation: 'read', tables: [q], columns: [], roleDecision: read }).effect === 'deny';
            for (const col of rel.columns) {
              const d = evaluate(set, { identity: who, source_id: 'src', operation: 'read', tables: [q], columns: [`${q}.${col}`], roleDecision: read });
              if (read.allowed && !tableDeny && d.effect !== 'deny') expectedReads.add(`${q}.${col}`);
            }
            const write = sourceRoleDecision(ctx, { kind: 'sql', operation: 'write', tables: [q] });
            if (write.allowed && evaluate(set, { identity: who, source_id: 'src', operation: 'write', tables: [q], columns: [], roleDecision: write }).effect !== 'deny') expectedWrites.add(q);
          }
          expect(new Set(cols.rows.map((r) => r.c)), `reads of ${roleName}`).toEqual(expectedReads);
          expect(new Set(writes.rows.map((r) => r.t)), `writes of ${roleName}`).toEqual(expectedWrites);
        }
      }),
      { numRuns: 8 },
    );
  }, 120_000);
});
