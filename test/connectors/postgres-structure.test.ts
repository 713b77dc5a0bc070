// Source structures: the catalog query against a real PostgreSQL, the per-source cache (TTL, one load at a time, DDL drops), and name resolution under search_path=public.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { buildStructure, STRUCTURE_QUERY, type StructureRow } from '../../src/governance/sql/structure.js';
import { SourceStructures } from '../../src/connectors/postgres-structure.js';
import type { RegisteredSource } from '../../src/registry/sources.js';

let db: TestDatabase;
let client: pg.Client;

async function load() {
  const r = await client.query<StructureRow>(STRUCTURE_QUERY);
  return buildStructure(r.rows);
}

beforeAll(async () => {
  db = await createTestDatabase();
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
  await client.query(`
    create schema other;
    create table customers (id int, name text, dropped text, ssn text);
    alter table customers drop column dropped;
    create table other.customers (x int);
    create view cv as select id, ssn as s from customers;
    create materialized view mv as select id, name from customers;
  `);
});
afterAll(async () => {
  await client?.end();
  await db?.drop();
});

describe('the catalog query', () => {
  test('tables, views and materialized views with their visible columns in attnum order (dropped ones left out)', async () => {
    const s = await load();
    const c = s.lookup(null, 'customers')!;
    expect(c.qualified).toBe('public.customers');
    expect(c.kind).toBe('table');
    expect(c.columns.map((x) => x.name)).toEqual(['id', 'name', 'ssn']);
    expect(s.byOid(c.oid)).toBe(c);
    expect(s.lookup('other', 'customers')!.columns.map((x) => x.name)).toEqual(['x']);
    const cv = s.lookup(null, 'cv')!;
    expect(cv.kind).toBe('view');
    expect(cv.definition).toMatch(/ssn AS s/i);
    expect(s.lookup(null, 'mv')!.kind).toBe('matview');
  });

  test('an unqualified name is looked up in pg_catalog first, then public (the pinned search_path)', async () => {
    const s = await load();
    expect(s.lookup(null, 'pg_class')!.qualified).toBe('pg_catalog.pg_class');
    expect(s.lookup(null, 'nope')).toBeNull();
    expect(s.qualify(null, 'nope')).toBe('public.nope');
  });

  test('a malformed row fails the whole load', () => {
    expect(() => buildStructure([{ oid: 'x', schema: 'public', name: 't', relkind: 'r', definition: null, columns: '[]' }])).toThrow();
    expect(() => buildStructure([{ oid: '1', schema: 'public', name: 't', relkind: 'r', definition: null, columns: '{' }])).toThrow();
  });
});

describe('the per-source cache', () => {
  const source = { source_id: 'src' } as RegisteredSource;

  test('one load per source while fresh; a new source record or the TTL loads again', async () => {
    const cache = new SourceStructures({ load, ttlMs: 60_000 });
    const [a, b] = await Promise.all([cache.get(source), cache.get(source)]);
    expect(a).toBe(b);
    expect(cache.loads).toBe(1);
    expect(cache.current(source)).toBe(a);
    expect(cache.peek('src')).toBe(a);
    const reconfigured = { source_id: 'src' } as RegisteredSource;
    expect(cache.current(reconfigured)).toBeNull();
    expect(await cache.get(reconfigured)).not.toBe(a);
    const expired = new SourceStructures({ load, ttlMs: 0 });
    await expired.get(source);
    expect(expired.current(source)).toBeNull();
  });

  test('invalidate drops the structure; a load that started before it answers its callers but is not kept', async () => {
    const cache = new SourceStructures({ load, ttlMs: 60_000 });
    const first = await cache.get(source);
    cache.invalidate('src');
    expect(cache.current(source)).toBeNull();
    const racing = cache.get(source);
    cache.invalidate('src');
    const raced = await racing;
    expect(raced).not.toBe(first);
    expect(cache.current(source)).toBeNull();
    await client.query('alter table customers add column secret text');
    const after = await cache.get(source);
    expect(after.lookup(null, 'customers')!.columns.map((x) => x.name)).toContain('secret');
  });

  test('a failed load is not cached and the next call tries again', async () => {
    let fail = true;
    const cache = new SourceStructures({ load: async () => (fail ? Promise.reject(new Error('down')) : load()), ttlMs: 60_000 });
    await expect(cache.get(source)).rejects.toThrow('down');
    fail = false;
    expect((await cache.get(source)).size).toBeGreaterThan(0);
  });
});
