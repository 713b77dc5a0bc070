// Deny by default: every spelling and placement of a call outside the allowlist is reported refused, operators and casts included, and a role rule admits it only by name.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { SqlClassifier, initSqlParser, type SqlClassified } from '../../../src/governance/sql/index.js';
import { sourceRoleDecision, roleRulesSchema, type SourceRole } from '../../../src/governance/source-roles.js';
import { callTrustFromCatalog } from '../../../src/governance/sql/source-calls.js';

let classifier: SqlClassifier;

beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier();
});

function classify(sql: string): SqlClassified {
  const r = classifier.classify(sql);
  if (!r.ok) throw new Error(`${sql}: ${r.error.message}`);
  return r;
}

const refusedNames = (sql: string): string[] => classify(sql).calls.filter((c) => c.refusal !== null).map((c) => c.name).sort();

describe('what is judged', () => {
  it.each([
    ['select lower(name), count(*), now() from customers group by 1', []],
    ['select * from ts_stat($$select to_tsvector(value) from secrets$$)', ['ts_stat']],
    ["select ts_rewrite('a'::tsquery, 'select 1')", ['ts_rewrite']],
    ["select current_setting('data_directory')", ['current_setting']],
    ['select pg_log_backend_memory_contexts(pg_backend_pid())', ['pg_backend_pid', 'pg_log_backend_memory_contexts']],
    ["select setval('s', 1), pg_read_file('/etc/passwd'), lo_import('/etc/passwd'), pg_terminate_backend(1)", ['lo_import', 'pg_read_file', 'pg_terminate_backend', 'setval']],
    ['select public.lower(name) from customers', ['public.lower']],
    ['select "LOWER"(name) from customers', ['LOWER']],
    ['select pg_catalog.lower(name) from customers', []],
    ['select "pg_catalog"."lower"(name) from customers', []],
    ['select "PG_CATALOG".lower(name) from customers', ['PG_CATALOG.lower']],
    ['select db.pg_catalog.lower(name) from customers', ['db.pg_catalog.lower']],
    ['call do_things(1)', ['do_things']],
    ['select a operator(public.===) b from t', ['public.===']],
    ['select a operator(pg_catalog.=) b, a + 1, a || b, a ~~ b, a is distinct from b, a between 1 and 2 from t', []],
    ['select a <=> b from t', ['<=>']],
    ['select * from t where a = any(select 1) and b in (1, 2)', []],
    ['select * from t where a operator(evil.<) any(select 1)', ['evil.<']],
    ['select * from t order by a using ~<~', []],
    ['select * from t order by a using operator(public.<<<)', ['public.<<<']],
    ["select 'x'::text, 1::integer, '1'::numeric(3), 'a'::varchar(2), '{1}'::int[], 'customers'::regclass", []],
    ["select 'x'::mood, cast(1 as public.positive), null::customers", ['customers', 'mood', 'public.positive']],
    ["select 'x'::\"Text\"", ['Text']],
    ['create table t (a int default my_default())', ['my_default']],
    ['create index on t (my_hash(a))', ['my_hash']],
    ['explain select pg_sleep(1)', ['pg_sleep']],
    ['prepare p as select pg_read_file($1)', ['pg_read_file']],
    ['copy (select query_to_xml($$select 1$$, true, true, $$$$)) to stdout', ['query_to_xml']],
    ['declare c cursor for select lo_get(1)', ['lo_get']],
  ])('%s', (sql, refused) => {
    expect(refusedNames(sql)).toEqual([...refused].sort());
  });

  it('keeps the write and admin escalations of functions named by a role', () => {
    expect(classify("select nextval('s')").operation).toBe('write');
    expect(classify('select pg_terminate_backend(1)').operation).toBe('admin');
  });
});

/** Refused functions, spelled every way PostgreSQL reads as the same function. */
const REFUSED = ['ts_stat', 'pg_read_file', 'setval', 'lo_import', 'pg_terminate_backend', 'current_setting', 'query_to_xml', 'pg_sleep', 'set_config', 'evil_fn'];

const spelling = fc.constantFrom(...REFUSED).chain((name) =>
  fc.constantFrom(
    name,
    name.toUpperCase(),
    name.replace(/^./, (c) => c.toUpperCase()),
    `"${name}"`,
    `pg_catalog.${name}`,
    `PG_CATALOG.${name.toUpperCase()}`,
    `"pg_catalog"."${name}"`,
    `public.${name}`,
    `"public"."${name}"`,
    `"${name.toUpperCase()}"`,
  ),
);

/** Places an expression can sit in; `$` is the call. */
const PLACES = [
  'select $',
  'select 1 from customers where $ is not null',
  'select (select $)',
  'select * from customers c where exists (select 1 where $ is null)',
  'with x as (select $ as v) select * from x',
  'with recursive x(n) as (select 1 union all select n + 1 from x where $ is null) select * from x',
  'select * from customers c cross join lateral (select $ as v) l',
  'select * from $',
  'select * from rows from ($) as r',
  'select coalesce($, 1)',
  'select case when true then $ end',
  'select ($)::text',
  'select cast($ as text)',
  'select lower($::text)',
  'select array[$]',
  'select count(*) filter (where $ is null) from customers',
  'select row_number() over (order by $) from customers',
  'select 1 from customers group by $',
  'select 1 from customers order by $',
  'select 1 from customers having $ is null',
  'select 1 union select $',
  'values ($)',
  'insert into notes (body) select $',
  'update notes set body = $ where id = 1',
  'delete from notes where id = $',
  'create table t2 (a text default $)',
  'create view v as select $',
  'prepare p as select $',
  'explain select $',
  'explain analyze select $',
  'declare c cursor for select $',
  'copy (select $) to stdout',
  'select 1 from customers a join customers b on $ is null',
  'select 1 where 1 = any(array[$])',
  'select jsonb_build_object($$k$$, $)',
];

describe('generated spellings and placements of refused calls', () => {
  it('are refused, by the name PostgreSQL would call', () => {
    fc.assert(
      fc.property(spelling, fc.constantFrom(...PLACES), fc.integer({ min: 0, max: 3 }), (name, place, nest) => {
        let call = `${name}(1)`;
        for (let i = 0; i < nest; i++) call = `lower((${call})::text)`;
        const sql = place.replace('$', call);
        const c = classifier.classify(sql);
        if (!c.ok) return; // An unparseable text is refused before any call could run.
        const refused = c.calls.filter((k) => k.kind === 'function' && k.refusal !== null);
        expect(refused.length, sql).toBeGreaterThan(0);
        // The decision of a reader role without named functions refuses it.
        const d = sourceRoleDecision(readerCtx([]), { kind: 'sql', operation: c.operation, tables: c.tables, calls: refused.map((k) => k.name) });
        expect(d.allowed, sql).toBe(false);
      }),
      { numRuns: 600 },
    );
  });

  it('casts to types outside pg_catalog are refused however they are written', () => {
    const type = fc.constantFrom('mood', 'public.mood', '"Mood"', 'customers', 'public.positive_int', '"public"."mood"', 'pg_temp.x', 'evil.text');
    const form = fc.constantFrom('select $v::$t', 'select cast($v as $t)', 'select array[$v]::$t[]', 'select * from customers where id = $v::$t', 'select $t $$x$$');
    fc.assert(
      fc.property(type, form, (t, f) => {
        const sql = f.replace('$v', "'1'").replace('$t', t);
        const c = classifier.classify(sql);
        if (!c.ok) return;
        expect(c.calls.some((k) => k.kind === 'cast' && k.refusal === 'user_type'), sql).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});

function readerCtx(functions: readonly string[], operations: ('read' | 'write')[] = ['read']) {
  const rules = roleRulesSchema.parse({ sql: [{ operations, tables: ['*.*'], functions }] });
  const role: SourceRole = { id: 1, source_id: 's', role_key: 'r', description: '', enabled: true, rules };
  return {
    source_id: 's', identity_id: 7, now: new Date(), roles: [role],
    grants: [{ id: 1, identity_id: 7, source_id: 's', role_id: 1, role_key: 'r', enabled: true, expires_at: null, granted_by: null }],
  };
}

describe('a role rule names a call', () => {
  it('allows exactly the names it lists, for the operations it allows', () => {
    const ask = (fns: string[], calls: string[], op: 'read' | 'write' = 'read') =>
      sourceRoleDecision(readerCtx(fns, ['read']), { kind: 'sql', operation: op, tables: ['public.customers'], calls });
    expect(ask([], ['ts_stat']).allowed).toBe(false);
    expect(ask([], ['ts_stat']).refusedCall).toBe('ts_stat');
    expect(ask(['ts_stat'], ['ts_stat']).allowed).toBe(true);
    expect(ask(['ts_stat'], ['pg_catalog.ts_stat']).allowed).toBe(true);
    expect(ask(['pg_catalog.ts_stat'], ['ts_stat']).allowed).toBe(false);
    expect(ask(['public.f'], ['f']).allowed).toBe(false);
    expect(ask(['public.f'], ['public.f']).allowed).toBe(true);
    expect(ask(['f'], ['public.f']).allowed).toBe(false);
    expect(ask(['F'], ['f']).allowed).toBe(false);
    // A rule for reads does not name calls of a write.
    expect(ask(['nextval'], ['nextval'], 'write').allowed).toBe(false);
  });

  it('validates entries: names only, no globs, spaces or quotes', () => {
    for (const bad of ['*', 'pg_*', 'a b', '"x"', '', 'a.b.c.d', '.x']) {
      expect(roleRulesSchema.safeParse({ sql: [{ operations: ['read'], tables: ['*.*'], functions: [bad] }] }).success, bad).toBe(false);
    }
    for (const good of ['f', 'public.f', 'db.public.f', 'public.===', 'nextval']) {
      expect(roleRulesSchema.safeParse({ sql: [{ operations: ['read'], tables: ['*.*'], functions: [good] }] }).success, good).toBe(true);
    }
  });
});

describe('the source catalog narrows, never widens', () => {
  const judge = (sql: string, rows: Parameters<typeof callTrustFromCatalog>[0]) => {
    const trust = callTrustFromCatalog(rows);
    return classify(sql).calls.filter((c) => !trust.trusted(c)).map((c) => c.name).sort();
  };
  const builtins = (extra: Parameters<typeof callTrustFromCatalog>[0] = []) => [
    ...['lower', 'upper', 'length', 'now', 'ts_stat'].map((name) => ({ kind: 'function' as const, name, builtin: true, volatility: name === 'now' ? 's' : 'i' })),
    ...extra,
  ];

  it('doubts an allowlisted name defined outside pg_catalog, in every spelling', () => {
    const rows = builtins([{ kind: 'function', name: 'length', builtin: false, volatility: 'v' }]);
    expect(judge('select length(name), pg_catalog.length(name), upper(name) from customers', rows)).toEqual(['length', 'pg_catalog.length']);
  });

  it('doubts a built-in more volatile than its family, or one the source lacks', () => {
    const rows = builtins().map((r) => (r.name === 'lower' ? { ...r, volatility: 'v' } : r)).filter((r) => r.name !== 'upper');
    expect(judge('select lower(name), upper(name), length(name) from customers', rows)).toEqual(['lower', 'upper']);
  });

  it('doubts an operator symbol or a cast type also defined outside pg_catalog', () => {
    const rows = builtins([{ kind: 'operator', name: '=', builtin: false, volatility: null }, { kind: 'cast', name: 'text', builtin: false, volatility: null }]);
    expect(judge("select 1 from customers where id = 1 and name::text <> 'x' and id + 1 > 2", rows)).toEqual(['=', 'text']);
  });

  it('never trusts what the allowlist refuses, whatever the catalog says', () => {
    expect(judge("select * from ts_stat('select 1')", builtins())).toEqual(['ts_stat']);
  });
});
