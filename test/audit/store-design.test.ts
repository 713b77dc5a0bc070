// The audit store of docs/decisions/0024 and 0031 on a store that already holds rows: migrations 0017 and 0022 are catalog work, writes go on while partition maintenance builds the per-partition indexes concurrently, attaches them and retires what the time key replaces; searches and lookups by id use them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { migrateTo, migrateToLatest } from '../../src/store/migrate.js';
import { insertAuditEntries } from '../../src/audit/insert.js';
import { CLOSED_PARTITION_INDEXES, SEAL_TIME_ORDER_COLUMNS, SEAL_TIME_ORDER_INDEX, listPartitions, maintainPartitions } from '../../src/audit/partitions.js';
import { getAuditEntry, searchAudit } from '../../src/audit/search.js';
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

describe('migrations 0017 and 0022 on a store holding rows', () => {
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
    // The parent: lean indexes every partition carries; the new ones (0017's two, 0022's time key) are not valid until
    // the month has them, and the primary key and time index the key replaces stay until then.
    expect(await indexesOf(db, 'audit_entries')).toEqual({
      audit_entries_pkey: true, audit_entries_ts_id_idx: true, audit_entries_decision_idx: false, audit_entries_filter_brin: false,
      audit_entries_ts_id_key: false,
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
      `${month}_decision_idx`, `${month}_filter_brin`, `${month}_ts_id_key`, ...CLOSED_PARTITION_INDEXES.map((i) => `${month}_${i.suffix}`),
    ]));
    // The time key is valid everywhere: the primary key (id, ts) and the (ts desc, id desc) index are gone.
    expect(result.retired).toBe(true);
    expect(await indexesOf(db, 'audit_entries')).toEqual({
      audit_entries_ts_id_key: true, audit_entries_decision_idx: true, audit_entries_filter_brin: true,
    });
    const monthIndexes = await indexesOf(db, month);
    expect(Object.values(monthIndexes).every(Boolean)).toBe(true);
    expect(Object.keys(monthIndexes)).not.toEqual(expect.arrayContaining([`${month}_pkey`]));
    expect(Object.keys(monthIndexes)).not.toContain(`${month}_ts_id_idx`);
    for (const day of (await listPartitions(db)).filter((p) => p.kind === 'day')) {
      // The time key, the partial decision index and the BRIN filters: three indexes on the hot path.
      const { rows } = await sql<{ n: number; keys: number }>`select count(*)::int as n, count(*) filter (where i.indisunique and pg_get_indexdef(i.indexrelid) like '%(ts, id)')::int as keys
          from pg_index i where i.indrelid = ${day.name}::regclass`.execute(db);
      expect(rows[0]).toEqual({ n: 3, keys: 1 });
    }
    // Idempotent.
    expect(await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).toMatchObject({ indexed: [], retired: false });
    // The key still makes stores idempotent (ON CONFLICT (id, ts) infers it), and finds an entry by its id.
    const again = makeEntry({ request_id: 'after-retire' });
    expect(await insertAuditEntries(db, [again])).toBe(1);
    expect(await insertAuditEntries(db, [again])).toBe(0);
    const typedDb = db as unknown as Kysely<AuditDatabase>;
    expect((await getAuditEntry(typedDb, again.id))?.request_id).toBe('after-retire');
    const legacy = (await sql<{ id: string }>`select id from audit_entries where request_id = 'legacy-7'`.execute(db)).rows[0]!.id;
    expect((await getAuditEntry(typedDb, legacy))?.request_id).toBe('legacy-7');
    expect(await getAuditEntry(typedDb, makeEntry().id)).toBeNull();

    const typed = db as unknown as Kysely<AuditDatabase>;
    const page = await searchAudit(typed, { identity_id: 3, limit: 10 });
    expect(page.items).toHaveLength(10);
    expect(page.items.every((e) => e.identity_id === 3)).toBe(true);
    expect((await searchAudit(typed, { decision: 'deny', limit: 500 })).items).toHaveLength(50);
    const plan = (await sql<{ 'QUERY PLAN': string }>`explain select id from audit_entries where identity_id = 3 order by ts desc, id desc limit 10`.execute(db)).rows
      .map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toContain(`${month}_identity_idx`);
    const newest = (await sql<{ 'QUERY PLAN': string }>`explain select id from audit_entries order by ts desc, id desc limit 10`.execute(db)).rows
      .map((r) => r['QUERY PLAN']).join('\n');
    expect(newest).toMatch(/Index (Only )?Scan Backward using \S+_ts_id_key/);
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

  /**
   * Drops `name` and has another session build it again concurrently, held waiting by an open writing transaction on
   * `table` (its index already made and invalid), then runs maintenance meanwhile. The writer ends after 3 s whatever
   * happens, so a run that took the build for an interrupted one would wait for it, drop it and build it anew under
   * another oid. Answers the run's result and the index's oid before and after.
   */
  async function maintainDuringBuild(table: string, name: string, columns: string) {
    await sql`drop index ${sql.id(name)}`.execute(db);
    const writer = new pg.Client({ connectionString: database.url });
    const builder = new pg.Client({ connectionString: database.url });
    await writer.connect();
    await builder.connect();
    try {
      await writer.query('begin');
      await writer.query(`lock table ${table} in row exclusive mode`);
      const build = builder.query(`create index concurrently ${name} on ${table} (${columns})`);
      let oid: number | undefined;
      for (let i = 0; i < 200 && oid === undefined; i += 1) {
        const { rows } = await sql<{ oid: number }>`select i.indexrelid::int8 as oid from pg_index i join pg_class c on c.oid = i.indexrelid
            where c.relname = ${name} and not i.indisvalid`.execute(db);
        if (rows[0]) oid = Number(rows[0].oid);
        else await new Promise((r) => setTimeout(r, 25));
      }
      expect(oid).toBeDefined();
      const release = setTimeout(() => void writer.query('commit'), 3_000);
      const result = await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
      clearTimeout(release);
      await writer.query('commit').catch(() => undefined);
      await build;
      const after = await sql<{ oid: number; valid: boolean }>`select i.indexrelid::int8 as oid, i.indisvalid as valid from pg_index i
          join pg_class c on c.oid = i.indexrelid where c.relname = ${name}`.execute(db);
      return { result, oid, after: after.rows.map((r) => ({ oid: Number(r.oid), valid: r.valid })) };
    } finally {
      await writer.end();
      await builder.end();
    }
  }

  it('leaves a partition alone while another session builds an index on it: its index is not dropped and built again', async () => {
    const name = `${month}_channel_idx`;
    const { result, oid, after } = await maintainDuringBuild(month, name, 'channel, ts desc, id desc');
    expect(result.busy).toEqual([month]);
    expect(result.indexed).not.toContain(name);
    expect(after).toEqual([{ oid, valid: true }]);
    expect(await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).toMatchObject({ busy: [], indexed: [] });
  });

  it('leaves the seals table alone while another session builds an index on it', async () => {
    const { result, oid, after } = await maintainDuringBuild('audit_seals', SEAL_TIME_ORDER_INDEX, SEAL_TIME_ORDER_COLUMNS);
    expect(result.busy).toEqual(['audit_seals']);
    expect(result.sealOrder).toBe(false);
    expect(after).toEqual([{ oid, valid: true }]);
    expect(await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).toMatchObject({ busy: [], sealOrder: false });
  });
});

describe('migration 0022 on a store without audit rows', () => {
  let database: TestDatabase;
  let store: ControlStore;
  let db: AnyDb;

  beforeAll(async () => {
    database = await createTestDatabase();
    store = await openControlStore({ url: database.url, embeddedDir: '/unused', poolMax: 2, connectTimeoutMs: 5_000, ssl: { mode: 'disable' } });
    db = store.db;
    await migrateToLatest(db);
  });
  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  it('has the time key in place of the primary key and time index at once; down brings them back, up again replaces them', async () => {
    const lean = { audit_entries_ts_id_key: true, audit_entries_decision_idx: true, audit_entries_filter_brin: true };
    expect(await indexesOf(db, 'audit_entries')).toEqual(lean);
    const today = (await listPartitions(db)).find((p) => p.from.getTime() <= Date.now() && Date.now() < p.to.getTime())!;
    expect(Object.keys(await indexesOf(db, today.name))).toHaveLength(3);
    expect((await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).retired).toBe(false);
    const e = makeEntry({ request_id: 'fresh-key' });
    expect(await insertAuditEntries(db, [e, e])).toBe(1);

    await migrateTo(db, '0021_audit_seal_format');
    expect(await indexesOf(db, 'audit_entries')).toEqual({ audit_entries_pkey: true, audit_entries_ts_id_idx: true, audit_entries_decision_idx: true, audit_entries_filter_brin: true });
    expect(await insertAuditEntries(db, [e])).toBe(0);
    // Rows are stored now: up again takes the path of a store holding rows, and maintenance finishes it.
    await migrateToLatest(db);
    expect((await indexesOf(db, 'audit_entries')).audit_entries_ts_id_key).toBe(false);
    expect(await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500, concurrently: false })).toMatchObject({ retired: true });
    expect(await indexesOf(db, 'audit_entries')).toEqual(lean);
    expect((await getAuditEntry(db as unknown as Kysely<AuditDatabase>, e.id))?.request_id).toBe('fresh-key');
  });
});
