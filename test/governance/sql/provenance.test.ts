// Column resolution by provenance (pure): what each spelling reads and what feeds each result column, against a fixed structure.
import { beforeAll, describe, expect, test } from 'vitest';
import { initSqlParser } from '../../../src/governance/sql/index.js';
import { buildStructure } from '../../../src/governance/sql/structure.js';
import { analyzeCached, relationColumnProvenance } from '../../../src/governance/sql/provenance.js';
import { redactedResultColumns } from '../../../src/governance/sql/result-columns.js';

const cols = (names: string[]) => JSON.stringify(names.map((n, i) => [i + 1, n]));
const C = ['id', 'name', 'email', 'ssn', 'secret_code'];
const structure = buildStructure([
  { oid: '100', schema: 'public', name: 'customers', relkind: 'r', definition: null, columns: cols(C) },
  { oid: '101', schema: 'public', name: 'orders', relkind: 'r', definition: null, columns: cols(['id', 'customer_id', 'total']) },
  { oid: '102', schema: 'public', name: 'cv', relkind: 'v', definition: ' SELECT customers.id, customers.secret_code AS s FROM customers;', columns: cols(['id', 's']) },
  { oid: '103', schema: 'public', name: 'cvv', relkind: 'v', definition: ' SELECT cv.s AS t FROM cv;', columns: cols(['t']) },
]);
const all = C.map((c) => `public.customers.${c}`);

function analyze(sql: string) {
  const r = analyzeCached(sql, structure);
  if (r === null || r.length !== 1) throw new Error(`no analysis for ${sql}`);
  return r[0]!;
}
const fed = (sql: string) => analyze(sql).outputs?.map((o) => [...o.sources.columns].sort().concat(o.sources.unknown ? ['?'] : []));

beforeAll(async () => {
  await initSqlParser();
});

describe('reads: every spelling of a whole row or a star reads every column', () => {
  test.each([
    'select * from customers',
    'table customers',
    'select c from customers c',
    'select c.* from customers c',
    'select row_to_json(c) from customers c',
    'select to_jsonb(c) from customers c',
    'select c::text from customers c',
    'select count(c.*) from customers c',
    'select x.id from (select * from customers) x',
    'with w as (select * from customers) select 1 from w',
    'select (select c from customers c limit 1)',
    'select 1 from customers c where row(c.*) is not null',
  ])('%s', (sql) => {
    expect([...analyze(sql).reads].sort()).toEqual([...all].sort());
  });

  test('(c).col, a subquery column, a CTE column and a predicate read that one column', () => {
    expect(analyze('select (c).secret_code from customers c').reads).toEqual(['public.customers.secret_code']);
    expect(analyze('select xx.s from (select secret_code as s from customers) xx').reads).toEqual(['public.customers.secret_code']);
    expect(analyze('with w(a) as (select ssn from customers) select a from w').reads).toEqual(['public.customers.ssn']);
    expect([...analyze("select id from customers where secret_code = 'x'").reads].sort()).toEqual(['public.customers.id', 'public.customers.secret_code']);
  });

  test('views and nested views resolve to the table columns behind them', () => {
    const a = analyze('select t from cvv');
    expect(a.reads).toContain('public.customers.secret_code');
    expect(a.relations).toEqual(expect.arrayContaining(['public.cvv', 'public.cv', 'public.customers']));
  });
});

describe('outputs: what feeds each result column', () => {
  test.each<[string, string[][]]>([
    ['select internal_note_free.id from customers internal_note_free', [['public.customers.id']]],
    ['select email as n, lower(ssn), upper(name) from customers', [['public.customers.email'], ['public.customers.ssn'], ['public.customers.name']]],
    ["select string_agg(email, ',') from customers", [['public.customers.email']]],
    ['select name from customers union all select email from customers', [['public.customers.email', 'public.customers.name']]],
    ['select * from (select id, ssn from customers) t(a, b)', [['public.customers.id'], ['public.customers.ssn']]],
    ['select (select email from customers c2 where c2.id = c.id) from customers c', [['public.customers.email']]],
    ['select o.total from orders o join customers c on c.id = o.customer_id', [['public.orders.total']]],
    ['select * from generate_series(1, 2) g', [[]]],
    ['select n.x from customers c, lateral (select c.ssn as x) n', [['public.customers.ssn']]],
    ['with recursive r(n, s) as (select 1, ssn from customers union all select n + 1, s from r where n < 3) select n, s from r', [[], ['public.customers.ssn']]],
    ['select ctid from customers', [['?']]],
  ])('%s', (sql, expected) => {
    expect(fed(sql)).toEqual(expected);
  });

  test('USING merges a column once and keeps PostgreSQL\'s star order', () => {
    const a = analyze('select * from customers join orders using (id)');
    expect(a.outputs!.map((o) => o.name)).toEqual(['id', 'name', 'email', 'ssn', 'secret_code', 'customer_id', 'total']);
    expect([...a.outputs![0]!.sources.columns].sort()).toEqual(['public.customers.id', 'public.orders.id']);
  });

  test('RETURNING reads what it returns, whole rows included, and carries what was assigned', () => {
    expect([...analyze('delete from customers c returning c').reads].sort()).toEqual([...all].sort());
    expect([...analyze('update customers set name = name returning *').reads].sort()).toEqual([...all].sort());
    expect(analyze('update customers set name = name returning old.secret_code').reads).toContain('public.customers.secret_code');
    expect(analyze('update customers set name = name returning with (old as o) o.ssn').reads).toContain('public.customers.ssn');
    expect(fed('insert into orders (id, total) select id, ssn::numeric from customers returning total')).toEqual([['public.customers.id', 'public.customers.ssn', 'public.orders.total']]);
  });

  test('writes say what each stored column is computed from', () => {
    const copies = (sql: string) => analyze(sql).copies.map((c) => [c.target, [...c.sources.columns].sort()]);
    expect(copies("update customers set name = email, id = 1")).toEqual([['public.customers.name', ['public.customers.email']], ['public.customers.id', []]]);
    expect(copies('insert into orders (id, total) select id, ssn::numeric from customers')).toEqual([['public.orders.id', ['public.customers.id']], ['public.orders.total', ['public.customers.ssn']]]);
    expect(copies('create table x as select ssn as n, id from customers')).toEqual([['public.x.n', ['public.customers.ssn']], ['public.x.id', ['public.customers.id']]]);
    expect(copies('select email into y from customers')).toEqual([['public.y.email', ['public.customers.email']]]);
    expect(copies("insert into orders values (1, 2, 3)").map((c) => c[0])).toEqual(['public.orders.id', 'public.orders.customer_id', 'public.orders.total']);
  });

  test('an unknown relation is unresolved and leaves the width unknown', () => {
    const a = analyze('select * from nowhere');
    expect(a.unresolved).toEqual(['relation public.nowhere']);
    expect(a.outputs).toBeNull();
  });
});

describe('redactedResultColumns', () => {
  const analysis = (sql: string) => ({ structure, statements: analyzeCached(sql, structure)! });
  const field = (name: string, tableOid = 0, attnum = 0) => ({ name, tableOid, attnum });

  test('a column is kept only when proven free of redacted sources', () => {
    const sql = 'select id, email as n, lower(ssn) from customers';
    expect(redactedResultColumns({ fields: [field('id', 100, 1), field('n', 100, 3), field('lower')], analysis: analysis(sql), tables: ['public.customers'], redactColumns: ['email', 'ssn'] })).toEqual([false, true, true]);
  });

  test('a result the analysis does not line up with redacts everything when anything redacted is read', () => {
    const sql = 'select id, email from customers';
    expect(redactedResultColumns({ fields: [field('id', 100, 1), field('other')], analysis: analysis(sql), tables: ['public.customers'], redactColumns: ['email'] })).toEqual([true, true]);
    expect(redactedResultColumns({ fields: [field('id', 100, 1)], analysis: analysis('select id, name from customers'), tables: ['public.customers'], redactColumns: ['email'] })).toEqual([false]);
  });

  test('RowDescription origins add to the analysis, a view origin adds what the view reads', () => {
    expect([...relationColumnProvenance(structure, 102, 2).columns].sort()).toEqual(['public.customers.secret_code', 'public.cv.s']);
    expect(relationColumnProvenance(structure, 999, 1).unknown).toBe(true);
    expect(redactedResultColumns({ fields: [field('id', 102, 2)], analysis: analysis('select id from customers'), tables: ['public.customers'], redactColumns: ['secret_code'] })).toEqual([true]);
  });

  test('no analysis over tables, or rows from EXECUTE/FETCH: every column', () => {
    expect(redactedResultColumns({ fields: [field('a')], analysis: undefined, tables: ['public.customers'], redactColumns: ['ssn'] })).toEqual([true]);
    expect(redactedResultColumns({ fields: [field('a')], analysis: undefined, tables: [], redactColumns: ['ssn'] })).toEqual([false]);
    expect(redactedResultColumns({ fields: [field('a')], analysis: undefined, tables: [], redactColumns: ['ssn'], opaque: true })).toEqual([true]);
  });
});

describe('partitions and inheritance children read their ancestors\' columns', () => {
  // events is partitioned; events_2024 a partition of it; sub_2024 a sub-partition; child inherits parent.
  const tree = buildStructure([
    { oid: '200', schema: 'crm', name: 'events', relkind: 'p', definition: null, columns: cols(['id', 'memo']) },
    { oid: '201', schema: 'crm', name: 'events_2024', relkind: 'p', definition: null, columns: cols(['id', 'memo']), parents: '["200"]' },
    { oid: '202', schema: 'crm', name: 'sub_2024', relkind: 'r', definition: null, columns: cols(['id', 'memo']), parents: '["201"]' },
    { oid: '210', schema: 'crm', name: 'parent', relkind: 'r', definition: null, columns: cols(['id', 'memo']) },
    { oid: '211', schema: 'crm', name: 'child', relkind: 'r', definition: null, columns: cols(['id', 'memo', 'extra']), parents: '["210"]' },
  ]);
  const reads = (sql: string) => [...(analyzeCached(sql, tree)?.[0]?.reads ?? [])].sort();
  test.each([
    ['select reverse(memo) from crm.sub_2024', ['crm.events.memo', 'crm.events_2024.memo', 'crm.sub_2024.memo']],
    ['select s from crm.events_2024 s', ['crm.events.id', 'crm.events.memo', 'crm.events_2024.id', 'crm.events_2024.memo']],
    ['select upper(memo) from crm.child', ['crm.child.memo', 'crm.parent.memo']],
    ['select memo from crm.parent', ['crm.parent.memo']],
  ])('%s', (sql, expected) => {
    expect(reads(sql)).toEqual(expected);
  });
  test('a RowDescription origin in a partition carries the ancestor too; a parents cycle or unknown oid is harmless', () => {
    expect([...relationColumnProvenance(tree, 202, 2).columns].sort()).toEqual(['crm.events.memo', 'crm.events_2024.memo', 'crm.sub_2024.memo']);
    const odd = buildStructure([
      { oid: '1', schema: 's', name: 'a', relkind: 'r', definition: null, columns: cols(['x']), parents: '["2", "99"]' },
      { oid: '2', schema: 's', name: 'b', relkind: 'r', definition: null, columns: cols(['x']), parents: '["1"]' },
    ]);
    expect(odd.byOid(1)!.ancestors).toEqual(['s.b']);
    expect(() => buildStructure([{ oid: '1', schema: 's', name: 'a', relkind: 'r', definition: null, columns: null, parents: '[1]' }])).toThrow(/malformed/);
  });
});
