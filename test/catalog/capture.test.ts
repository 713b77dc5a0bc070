// Capture of a real PostgreSQL source by a role without SELECT: every kind of relation, columns, keys and partitions; versioned snapshots; each cap truncates and nothing unreached is called removed; catalog.enabled false; one scan per source across workers.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listChanges, listSnapshots, latestStructure } from '../../src/store/repos/catalog.js';
import type { CatalogStructure } from '../../src/catalog/model.js';
import { catalogWorld, type CatalogWorld } from './support.js';
import { TEST_PG_HOST, TEST_PG_PORT } from '../support/pg.js';

let w: CatalogWorld;
beforeAll(async () => {
  w = await catalogWorld();
});
afterAll(async () => {
  await w?.close();
});

const structureOf = async () => (await latestStructure(w.control.store.db, w.sourceId))!.structure as unknown as CatalogStructure;
const rel = (s: CatalogStructure, schema: string, name: string) => s.relations.find((r) => r.schema === schema && r.name === name);

describe('capture', () => {
  it('the scanning role cannot read a row of any table', async () => {
    const client = new pg.Client({ host: TEST_PG_HOST, port: TEST_PG_PORT, database: w.source.name, user: w.role });
    await client.connect();
    try {
      await expect(client.query('select email from public.users')).rejects.toMatchObject({ code: '42501' });
    } finally {
      await client.end();
    }
  });

  it('captures schemas, tables, views, materialized views, partitions, columns and keys, and no row data', async () => {
    const { scanner } = w.scanner();
    const outcome = await scanner.scan(w.sourceId, 'demand');
    expect(outcome).toMatchObject({ status: 'ok', version: 1, changes: 0, truncated_by: null });
    const s = await structureOf();
    expect(s.schemas.map((x) => x.name)).toEqual(['Mixed Case', 'public', 'sales']);
    expect(s.schemas_complete).toBe(true);
    expect(rel(s, 'public', 'users')).toMatchObject({
      kind: 'table',
      primary_key: ['id'],
      complete: true,
      columns: [
        { name: 'id', type: 'integer', nullable: false, has_default: true },
        { name: 'email', type: 'text', nullable: false, has_default: false },
        { name: 'name', type: 'text', nullable: true, has_default: false },
        { name: 'created_at', type: 'timestamp with time zone', nullable: true, has_default: true },
      ],
    });
    expect(rel(s, 'sales', 'orders')!.foreign_keys).toEqual([{ name: 'orders_user_id_fkey', columns: ['user_id'], references: { schema: 'public', table: 'users', columns: ['id'] } }]);
    expect(rel(s, 'sales', 'orders')!.columns.map((c) => c.type)).toEqual(['bigint', 'integer', 'numeric(10,2)', 'character varying(40)']);
    expect(rel(s, 'Mixed Case', 'Users')!.columns.map((c) => c.name)).toEqual(['Id', 'E.mail']);
    expect(rel(s, 'public', 'user_emails')!.kind).toBe('view');
    expect(rel(s, 'sales', 'order_totals')!.kind).toBe('matview');
    expect(rel(s, 'public', 'events')!.kind).toBe('partitioned');
    expect(rel(s, 'public', 'events_2024')).toMatchObject({ kind: 'table', partition_of: 'public.events' });
    expect(s.node_count).toBe(3 + s.relations.length + s.relations.reduce((n, r) => n + r.columns.length, 0));
    expect(JSON.stringify(s)).not.toContain('secret-row@example.com');
    expect(JSON.stringify(s)).not.toContain('Row Data');
  });

  it('versions snapshots and diffs added, removed, renamed and retyped objects with stable change ids', async () => {
    const { scanner } = w.scanner();
    await w.sql(`alter table public.users add column phone text;
      alter table public.users rename column name to full_name;
      alter table sales.orders alter column note type text;
      alter table sales.orders alter column amount set not null;
      drop view public.user_emails;
      create table sales.refunds (id int);
      create schema audit;`);
    const outcome = await scanner.scan(w.sourceId, 'demand');
    expect(outcome).toMatchObject({ status: 'ok', version: 2 });
    const changes = await listChanges(w.control.store.db, w.sourceId);
    const seen = changes.map((c) => `${c.kind} ${c.object_type} ${c.path}`).sort();
    expect(seen).toEqual(
      [
        'added column public.users.phone',
        'renamed column public.users.full_name',
        'type_changed column sales.orders.note',
        'changed column sales.orders.amount',
        'removed view public.user_emails',
        'added table sales.refunds',
        'added schema audit',
      ].sort(),
    );
    const retyped = changes.find((c) => c.kind === 'type_changed')!;
    expect(retyped.detail).toEqual({ before: 'character varying(40)', after: 'text' });
    expect(retyped.change_id).toMatch(/^[0-9a-f]{24}$/);
    // The rename is one (same attnum), not a removal and an addition.
    expect(changes.find((c) => c.kind === 'renamed')!.detail).toEqual({ from: 'name' });
    // The phone column's name suggests personal data: protected until acknowledged; a renamed column and every column
    // of a new table too (nothing was ever classified under those names).
    expect(changes.find((c) => c.path === 'public.users.phone')!.protected).toBe(true);
    expect(changes.find((c) => c.path === 'public.users.full_name')!.protected).toBe(true);
    expect(changes.find((c) => c.path === 'sales.refunds')!.protected).toBe(true);
    expect(changes.find((c) => c.path === 'audit')!.protected).toBe(false);
    // A third scan without DDL finds nothing; the previous structure is kept for the diff, older ones pruned.
    expect(await scanner.scan(w.sourceId, 'schedule')).toMatchObject({ status: 'ok', version: 3, changes: 0 });
    const history = await listSnapshots(w.control.store.db, w.sourceId);
    expect(history.map((h) => h.version)).toEqual([3, 2, 1]);
    const kept = await w.control.store.db.selectFrom('catalog_snapshots').select('version').where('source_id', '=', w.sourceId).where('structure', 'is not', null).orderBy('version').execute();
    expect(kept.map((k) => k.version)).toEqual([2, 3]);
  });

  it.each([
    ['max_schemas', { max_schemas: 1 }],
    ['max_tables', { max_tables: 2 }],
    ['max_columns_per_table', { max_columns_per_table: 1 }],
    ['max_nodes', { max_nodes: 6 }],
  ] as const)('reaching %s records truncated, and nothing unreached is reported removed (nor added on the next full scan)', async (cap, overrides) => {
    const before = (await listChanges(w.control.store.db, w.sourceId)).length;
    const fullRelations = (await structureOf()).relations.length;
    const capped = w.scanner(overrides);
    const outcome = await capped.scanner.scan(w.sourceId, 'demand');
    expect(outcome).toMatchObject({ status: 'ok', truncated_by: cap, changes: 0 });
    const snap = (await listSnapshots(w.control.store.db, w.sourceId))[0]!;
    expect(snap).toMatchObject({ truncated: true, truncated_by: cap });
    const s = await structureOf();
    expect(s.truncated_by).toBe(cap);
    const full = (await listSnapshots(w.control.store.db, w.sourceId))[1]!.node_count;
    expect(snap.node_count).toBeLessThan(full);
    if (cap === 'max_nodes') expect(snap.node_count).toBeLessThanOrEqual(6);
    // What the cap left unreached is carried from the snapshot before, marked by the truncated snapshot.
    expect(s.relations.length).toBe(fullRelations);
    // Back to full caps: what the capped scan did not reach is not "added" either.
    expect(await w.scanner().scanner.scan(w.sourceId, 'demand')).toMatchObject({ status: 'ok', truncated_by: null, changes: 0 });
    expect((await listChanges(w.control.store.db, w.sourceId)).length).toBe(before);
  });

  it('a capped scan still reports what it did reach', async () => {
    await w.sql('alter table "Mixed Case"."Users" add column extra int; drop table sales.refunds;');
    // max_schemas 1 reaches only "Mixed Case": its column is added; sales.refunds is unreached, so not removed.
    const outcome = await w.scanner({ max_schemas: 1 }).scanner.scan(w.sourceId, 'demand');
    expect(outcome).toMatchObject({ status: 'ok', truncated_by: 'max_schemas', changes: 1 });
    const open = (await listChanges(w.control.store.db, w.sourceId)).slice(0, 1);
    expect(open[0]).toMatchObject({ kind: 'added', path: '"Mixed Case"."Users".extra' });
    // The full scan then finds the removal it could not see before.
    expect(await w.scanner().scanner.scan(w.sourceId, 'demand')).toMatchObject({ status: 'ok', changes: 1 });
    expect((await listChanges(w.control.store.db, w.sourceId))[0]).toMatchObject({ kind: 'removed', path: 'sales.refunds' });
  });

  it('catalog.enabled false scans nothing', async () => {
    const count = (await listSnapshots(w.control.store.db, w.sourceId)).length;
    expect(await w.scanner({ enabled: false }).scanner.scan(w.sourceId, 'demand')).toEqual({ status: 'skipped', reason: 'catalog.enabled is false' });
    expect((await listSnapshots(w.control.store.db, w.sourceId)).length).toBe(count);
  });

  it('two workers never scan one source at once', async () => {
    const a = w.scanner({}, 'worker-a');
    const b = w.scanner({}, 'worker-b');
    const spans: Array<{ worker: string; start: number; end: number }> = [];
    const open = new Map<string, number>();
    for (const e of [a.events, b.events]) {
      e.on('scan:start', (x) => open.set(x.worker_id, x.at));
      e.on('scan:end', (x) => spans.push({ worker: x.worker_id, start: open.get(x.worker_id)!, end: x.at }));
    }
    const outcomes: string[] = [];
    for (let round = 0; round < 5; round += 1) {
      const results = await Promise.all([a.scanner.scan(w.sourceId, 'schedule'), b.scanner.scan(w.sourceId, 'schedule')]);
      outcomes.push(...results.map((r) => r.status));
    }
    expect(outcomes.filter((s) => s === 'busy').length).toBeGreaterThan(0);
    expect(outcomes.filter((s) => s === 'ok').length).toBeGreaterThanOrEqual(5);
    spans.sort((x, y) => x.start - y.start);
    for (let i = 1; i < spans.length; i += 1) expect(spans[i]!.start).toBeGreaterThanOrEqual(spans[i - 1]!.end);
  });

  it('a source that cannot be reached records a failed snapshot with a sanitized reason', async () => {
    await w.control.store.db
      .updateTable('data_sources')
      .set({ connection_config: JSON.stringify({ host: TEST_PG_HOST, port: 1, database: w.source.name, user: w.role, ssl_mode: 'disable', connect_timeout_ms: 500 }) })
      .where('source_id', '=', w.sourceId)
      .execute();
    const outcome = await w.scanner().scanner.scan(w.sourceId, 'demand');
    expect(outcome).toMatchObject({ status: 'failed', error: 'connection refused' });
    // The last good structure is still the one served.
    expect((await structureOf()).relations.length).toBeGreaterThan(5);
  });
});
