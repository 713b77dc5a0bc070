// Column extraction: qualified, aliased, starred, assignment targets, and columns hidden behind scopes.
import { beforeAll, describe, expect, it } from 'vitest';
import { SqlClassifier, initSqlParser } from '../../../src/governance/sql/index.js';

let classifier: SqlClassifier;

beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier();
});

function columns(sql: string): string[] {
  const r = classifier.classify(sql);
  if (!r.ok) throw new Error(`${sql}: ${r.error.message}`);
  return [...r.columns].sort();
}

const CASES: readonly (readonly [string, readonly string[]])[] = [
  ['SELECT email FROM users', ['public.users.email']],
  ['SELECT * FROM users', ['public.users.*']],
  ['SELECT u.* FROM users u', ['public.users.*']],
  ['SELECT u.email, u.name FROM users AS u WHERE u.id = 1', ['public.users.email', 'public.users.id', 'public.users.name']],
  ['SELECT users.email FROM users', ['public.users.email']],
  ['SELECT app.users.email FROM app.users', ['app.users.email']],
  ['SELECT email FROM app.users', ['app.users.email']],
  ['SELECT o.total FROM users u JOIN orders o ON o.user_id = u.id', ['public.orders.total', 'public.orders.user_id', 'public.users.id']],
  // Unqualified with two candidate tables: both are recorded (the owner is unknowable without the catalog).
  ['SELECT ssn FROM users u JOIN orders o ON o.user_id = u.id', ['public.orders.ssn', 'public.orders.user_id', 'public.users.id', 'public.users.ssn']],
  ['SELECT count(*) FROM users', []],
  ['SELECT 1 FROM users WHERE ssn = \'x\' ORDER BY created_at', ['public.users.created_at', 'public.users.ssn']],
  // Correlated subquery: `u` resolves in the outer level.
  ['SELECT id FROM users u WHERE EXISTS (SELECT 1 FROM orders o WHERE o.user_id = u.id)', ['public.orders.user_id', 'public.users.id']],
  // A column of a subquery or CTE is not a base table's; the inner level records the base columns.
  ['SELECT s.email FROM (SELECT email FROM users) s', ['public.users.email']],
  ['WITH x AS (SELECT id, email FROM users) SELECT x.email FROM x', ['public.users.email', 'public.users.id']],
  ['SELECT g FROM generate_series(1, 3) g', []],
  // Assignment targets.
  ['UPDATE users SET email = \'x\', name = upper(name) WHERE id = 1', ['public.users.email', 'public.users.id', 'public.users.name']],
  ['UPDATE users u SET org = o.name FROM orgs o WHERE o.id = u.org_id', ['public.orgs.id', 'public.orgs.name', 'public.users.org', 'public.users.org_id']],
  ['INSERT INTO users (email, name) VALUES (\'a\', \'b\')', ['public.users.email', 'public.users.name']],
  ['INSERT INTO users VALUES (1, \'a\')', ['public.users.*']],
  ['INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET b = excluded.b', ['public.t.a', 'public.t.b']],
  ['DELETE FROM users WHERE id = 1 RETURNING email', ['public.users.email', 'public.users.id']],
  ['DELETE FROM orders o USING users u WHERE o.user_id = u.id AND u.banned', ['public.orders.user_id', 'public.users.banned', 'public.users.id']],
  ['MERGE INTO stock s USING deliveries d ON s.item = d.item WHEN MATCHED THEN UPDATE SET qty = d.qty', ['public.deliveries.item', 'public.deliveries.qty', 'public.stock.item', 'public.stock.qty']],
  ['COPY users (id, email) TO STDOUT', ['public.users.email', 'public.users.id']],
  ['COPY users TO STDOUT', ['public.users.*']],
  ['SELECT a FROM t1 UNION ALL SELECT b FROM t2', ['public.t1.a', 'public.t2.b']],
];

describe('column extraction', () => {
  it.each(CASES)('%s', (sql, expected) => {
    expect(columns(sql)).toEqual([...expected].sort());
  });

  it('gives each statement its own columns', () => {
    const r = classifier.classify('SELECT email FROM users; SELECT total FROM orders');
    expect(r.ok && r.statements.map((s) => s.columns)).toEqual([['public.users.email'], ['public.orders.total']]);
  });

  it('qualifies with the configured default schema', async () => {
    const c = new SqlClassifier({ defaultSchema: 'tenant_7' });
    const r = c.classify('SELECT u.email FROM users u JOIN audit.log l ON true');
    expect(r.ok && r.tables).toEqual(['tenant_7.users', 'audit.log']);
    expect(r.ok && r.columns).toEqual(['tenant_7.users.email']);
  });
});
