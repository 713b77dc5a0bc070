// The audit store of docs/decisions/0024 on a store that already holds rows: migration 0017 is catalog work, writes go on while partition maintenance builds the per-partition indexes concurrently and attaches them, searches use them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { migrateTo, migrateToLatest } from '../../src/store/migrate.js';
import { insertAuditEntries } from '../../src/audit/insert.js';
import { CLOSED_PARTITION_INDEXES, listPartitions, maintainPartitions } from '../../src/audit/partitions.js';
import { searchAudit } from '../../src/audit/search.js';
import type { AuditDatabase } from '../../src/audit/schema.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { openControlStore, type ControlStore } from '../../src/store/db.js';
import { makeEntry } from './support.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function indexesOf(db: AnyDb, table: string): Promise<Record<string, boolean>> {
  const { rows } = await sql<{ name: string; valid: boolean }>`select c.relname as name, i.indisvalid as valid from pg_index i
      join pg_class c on c.oid = i.indexrelid where i.indrelid = ${table}::regclass`.execute(db);
  return Object.fromEntries(rows.map((r) => [r.name, r.valid]));
}

describe('migration 0017 on a store holding rows', () => {
  let database: TestDatabase;
  let store: ControlStore;
  let db: AnyDb;
  const now = new Date();
  const month = `audit_entries_p${now.getUTCFullYear()}${String(now.getUTCMonth() + 1).padStart(2, '0')}`;

  beforeAll(async () => {
    database = await createTestDatabase();
    store = await openControlStore({ url: database.url, embeddedDir: '/unused', poolMax: 4, connectTimeoutMs: 5_000, ssl: { mode: 'disable' } });
    db = store.db;
    await migrateTo(db, '0010_ingestion');
    // Rows in the current month's partition of 0002, with every index of 0002.
    await insertAuditEntries(db, Array.from({ length: 500 }, (_, i) => makeEntry({ request_id: `legacy-${i}`, identity_id: (i % 5) + 1, decision: i % 10 === 0 ? 'deny' : 'allow' })));
  });
  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  it('keeps the month holding rows, drops the empty ones ahead, moves to daily partitions and leaves the hot path lean', async () => {
    await migrateToLatest(db);
    const parts = await listPartitions(db);
    expect(parts.filter((p) => p.kind === 'month').map((p) => p.name)).toEqual([month]);
    // The month's secondary indexes went with the parent's: only the primary key and the time order are left on it.
    expect(Object.keys(await indexesOf(db, month)).sort()).toEqual([`${month}_pkey`, `${month}_ts_id_idx`]);
    // The parent: lean indexes every partition carries; the two new ones are not valid until the month has them.
    expect(await indexesOf(db, 'audit_entries')).toEqual({
      audit_entries_pkey: true, audit_entries_ts_id_idx: true, audit_entries_decision_idx: false, audit_entries_filter_brin: false,
    });
    // Days after this month get daily partitions with the lean set only.
    const day = parts.find((p) => p.kind === 'day');
    if (day) expect(Object.keys(await indexesOf(db, day.name))).toHaveLength(4);
  });

  it('maintenance builds the month\'s indexes concurrently while rows keep arriving, attaches the parent\'s and makes them valid', async () => {
    let writing = true;
    let written = 0;
    const writer = (async () => {
      while (writing) {
        await insertAuditEntries(db, [makeEntry({ request_id: `during-${written}`, identity_id: 3 })]);
        written += 1;
      }
    })();
    const result = await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
    writing = false;
    await writer;
    // Rows were stored while the indexes were built: the builds did not lock writes out.
    expect(written).toBeGreaterThan(0);
    expect(result.indexed).toEqual(expect.arrayContaining([
      `${month}_decision_idx`, `${month}_filter_brin`, ...CLOSED_PARTITION_INDEXES.map((i) => `${month}_${i.suffix}`),
    ]));
    expect(await indexesOf(db, 'audit_entries')).toEqual({
      audit_entries_pkey: true, audit_entries_ts_id_idx: true, audit_entries_decision_idx: true, audit_entries_filter_brin: true,
    });
    expect(Object.values(await indexesOf(db, month)).every(Boolean)).toBe(true);
    // Idempotent.
    expect((await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).indexed).toEqual([]);

    const typed = db as unknown as Kysely<AuditDatabase>;
    const page = await searchAudit(typed, { identity_id: 3, limit: 10 });
    expect(page.items).toHaveLength(10);
    expect(page.items.every((e) => e.identity_id === 3)).toBe(true);
    expect((await searchAudit(typed, { decision: 'deny', limit: 500 })).items).toHaveLength(50);
    const plan = (await sql<{ 'QUERY PLAN': string }>`explain select id from audit_entries where identity_id = 3 order by ts desc, id desc limit 10`.execute(db)).rows
      .map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toContain(`${month}_identity_idx`);
  });

  it('an index build interrupted (left invalid) is dropped and built again', async () => {
    await sql`drop index ${sql.id(`${month}_source_idx`)}`.execute(db);
    // What an interrupted CREATE INDEX CONCURRENTLY leaves: an index marked invalid.
    await sql`create index ${sql.id(`${month}_source_idx`)} on ${sql.id(month)} (source_id, ts desc, id desc)`.execute(db);
    await sql`update pg_index set indisvalid = false where indexrelid = ${`${month}_source_idx`}::regclass`.execute(db);
    const result = await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
    expect(result.indexed).toEqual([`${month}_source_idx`]);
    expect((await indexesOf(db, month))[`${month}_source_idx`]).toBe(true);
  });
});
