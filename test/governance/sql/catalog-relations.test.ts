// pg_catalog relations as the classifier assumes them, checked against the real pg_class: the names taken as pg_catalog's are there, and any other unqualified pg_* name is governed in the path's schemas too.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlClassifier, initSqlParser, type SqlClassified } from '../../../src/governance/sql/index.js';
import { STABLE_CATALOG_RELATIONS, STATISTICS_RELATIONS } from '../../../src/governance/sql/catalog-relations.js';
import { pathResolution } from '../../../src/governance/sql/search-path.js';
import { TEST_PG_HOST, TEST_PG_PORT } from '../../support/pg.js';

let client: pg.Client;
let classifier: SqlClassifier;
let catalog: Set<string>;

beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier();
  client = new pg.Client({ host: TEST_PG_HOST, port: TEST_PG_PORT, user: 'postgres', database: 'postgres' });
  await client.connect();
  const rows = (await client.query("select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'pg_catalog' and c.relkind in ('r', 'v', 'm', 'p', 'f')")).rows as Array<{ relname: string }>;
  catalog = new Set(rows.map((r) => r.relname));
});
afterAll(async () => {
  await client?.end();
});

function ok(sql: string, path: Parameters<SqlClassifier['classify']>[1] = null): SqlClassified {
  const r = classifier.classify(sql, path);
  if (!r.ok) throw new Error(r.error.message);
  return r;
}

describe('pg_catalog relation names', () => {
  it('every name taken as certainly pg_catalog\'s is a pg_catalog relation of the server', () => {
    const missing = [...STABLE_CATALOG_RELATIONS].filter((n) => !catalog.has(n));
    expect(missing).toEqual([]);
  });

  it('the statistics relations the server has are all listed, and each is refused whatever the spelling', () => {
    // pg_statistic_ext holds statistics definitions only; their values live in pg_statistic_ext_data.
    const onServer = [...catalog].filter((n) => /^pg_stat(istic|s)(_ext)?(_data|_exprs)?$/.test(n) && n !== 'pg_statistic_ext');
    expect(onServer.filter((n) => !STATISTICS_RELATIONS.has(n))).toEqual([]);
    for (const n of STATISTICS_RELATIONS) {
      for (const sql of [`select * from ${n}`, `select * from pg_catalog.${n}`, `select * from "${n}"`, `select * from ${n.toUpperCase()}`, `select 1 where exists (select 1 from ${n})`, `create view v as select * from ${n}`]) {
        expect(ok(sql).traps, sql).toContain('statistics_read');
      }
    }
    expect(ok('select * from pg_stats_view').traps).not.toContain('statistics_read');
    expect(ok('select * from public.pg_stats').traps).not.toContain('statistics_read');
  });

  it('a certain pg_catalog name stays pg_catalog\'s; any other pg_* name is both pg_catalog\'s and the path\'s', () => {
    expect(ok('select * from pg_class').tables).toEqual(['pg_catalog.pg_class']);
    expect(ok('select * from pg_notes').tables).toEqual(['pg_catalog.pg_notes', 'public.pg_notes']);
    expect(ok('select n.body from pg_notes n').columns).toEqual(['pg_catalog.pg_notes.body', 'public.pg_notes.body']);
    expect(ok('insert into pg_notes values (1)').tables).toEqual(['pg_catalog.pg_notes', 'public.pg_notes']);
    expect(ok('drop table pg_notes').tables).toEqual(['pg_catalog.pg_notes', 'public.pg_notes']);
    expect(ok('select * from public.pg_notes').tables).toEqual(['public.pg_notes']);
    const path = pathResolution([['app', 'public']], 'agent');
    expect(ok('select * from pg_notes', path).tables.slice().sort()).toEqual(['app.pg_notes', 'pg_catalog.pg_notes', 'public.pg_notes']);
    expect(ok('select * from pg_class', path).tables).toEqual(['pg_catalog.pg_class']);
  });
});
