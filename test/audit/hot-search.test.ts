// Search of the hot partition (docs/decisions/0024, "Search of the hot partition"): every plan searchAudit picks for it (time order, the probe then time order, the probe then the BRIN bloom filters, the closed days after it) answers exactly the rows and order of a plain query, page by page; and partition maintenance summarizes the hot partition's BRIN ranges so the bloom filters rule out ranges.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { insertAuditEntries } from '../../src/audit/insert.js';
import { createDayPartition, dayPartitionName, dayStart, maintainPartitions } from '../../src/audit/partitions.js';
import { HOT_PROBE_ROWS, searchAudit, type AuditFilters } from '../../src/audit/search.js';
import type { AuditDatabase } from '../../src/audit/schema.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openControlStore, type ControlStore } from '../../src/store/db.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { makeEntry } from './support.js';

let migrated: MigratedStore;
let db: Kysely<AuditDatabase>;
const HOT_ROWS = HOT_PROBE_ROWS + 4_000;
const now = Date.now();
const today = dayStart(new Date(now)).getTime();
const hot = dayPartitionName(new Date(now));
/** Identities of the hot rows: 3 common (1 in 50), 800 one in 300 (the probe then time order), 900 one in 4,000 (the probe then the bloom filters). */
function hotEntry(i: number): AuditEntry {
  return makeEntry({
    ts: new Date(today + Math.floor(((now - today) * i) / HOT_ROWS)).toISOString(),
    request_id: `hot-${i}`,
    identity_id: i % 4_000 === 7 ? 900 : i % 300 === 5 ? 800 : 1 + (i % 50),
    source_id: `src-${i % 7}`,
    decision: i % 97 === 0 ? 'deny' : 'allow',
  });
}

/** Brin reads of a search for an identity no row has, with only bitmap scans allowed: heap blocks the bloom filters did not rule out. */
async function bloomReadBlocks(): Promise<number> {
  return db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    await sql`set local enable_indexscan = off`.execute(trx);
    await sql`set local enable_indexonlyscan = off`.execute(trx);
    const plan = await sql.raw<{ 'QUERY PLAN': unknown }>(`explain (analyze, format json) select id from ${hot} where identity_id = 424242`).execute(trx);
    const text = JSON.stringify(plan.rows[0]!['QUERY PLAN']);
    expect(text).toContain('Bitmap Index Scan');
    return [...text.matchAll(/"(Lossy|Exact) Heap Blocks":(\d+)/g)].reduce((n, m) => n + Number(m[2]), 0);
  });
}

beforeAll(async () => {
  migrated = await withMigratedStore();
  db = migrated.store.db as unknown as Kysely<AuditDatabase>;
  const rows = Array.from({ length: HOT_ROWS }, (_, i) => hotEntry(i));
  // Yesterday: a closed day, with its search indexes once maintained; it holds more of every identity searched.
  for (let i = 0; i < 300; i++) {
    rows.push(makeEntry({ ts: new Date(today - 1 - i * 60_000).toISOString(), request_id: `old-${i}`, identity_id: i % 3 === 0 ? 900 : i % 2 === 0 ? 800 : 3, source_id: `src-${i % 7}`, decision: i % 10 === 0 ? 'deny' : 'allow' }));
  }
  for (let i = 0; i < rows.length; i += 500) await insertAuditEntries(db, rows.slice(i, i + 500));
}, 120_000);
afterAll(async () => {
  await migrated?.cleanup();
});

describe('partition maintenance and the hot partition BRIN index', () => {
  it('summarizes the open partitions\' block ranges (none before: every range is read), after which the bloom filters rule ranges out', async () => {
    const before = await bloomReadBlocks();
    expect(before).toBeGreaterThan(100);
    const first = await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
    expect(first.summarized).toBeGreaterThan(0);
    // Yesterday closed: its search indexes were built by this run.
    expect(first.indexed).toContain(`${dayPartitionName(new Date(today - 1))}_identity_idx`);
    const after = await bloomReadBlocks();
    // The range being filled keeps no summary, and a bloom filter's false positive rate is 1%: a range or two of 32
    // pages may still be read besides.
    expect(after).toBeLessThanOrEqual(96);
    expect(after).toBeLessThan(before / 4);
    expect((await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).summarized).toBe(0);
  });
});

describe('the BRIN range being filled stays unsummarized (docs/decisions/0024, "The range being filled")', () => {
  /** A partition's BRIN index, its pages per range, its pages, and the first page of the range rows are being added to. */
  async function brinOf(partition: string): Promise<{ idx: string; ppr: number; pages: number; filling: number }> {
    const r = await sql<{ idx: string; ppr: number; pages: number }>`select c.relname as idx,
        coalesce((select o.option_value::int from pg_options_to_table(c.reloptions) o where o.option_name = 'pages_per_range'), 128) as ppr,
        (pg_relation_size(${partition}::regclass) / current_setting('block_size')::bigint)::int as pages
      from pg_index i join pg_class c on c.oid = i.indexrelid join pg_am a on a.oid = c.relam
     where i.indrelid = ${partition}::regclass and a.amname = 'brin'`.execute(db);
    expect(r.rows).toHaveLength(1);
    const { idx, ppr, pages } = r.rows[0]!;
    return { idx, ppr, pages, filling: Math.floor(pages / ppr) * ppr };
  }

  /** Whether the range at `block` had no summary: brin_summarize_range summarizes it then, and answers 1. */
  async function hadNoSummary(idx: string, block: number): Promise<boolean> {
    const r = await sql<{ n: number }>`select brin_summarize_range(${idx}::regclass, ${block}::bigint)::int as n`.execute(db);
    return r.rows[0]!.n === 1;
  }

  it('a new partition starts with no summarized range (CREATE INDEX summarizes the first range of an empty table)', async () => {
    const day = new Date(today + 9 * 86_400_000);
    expect(await createDayPartition(db, day)).toBe(true);
    // A range past the table's last page is never summarized: one row gives the range a page.
    await insertAuditEntries(db, [makeEntry({ ts: new Date(day.getTime() + 60_000).toISOString(), request_id: 'day-9' })]);
    const { idx, filling } = await brinOf(dayPartitionName(day));
    expect(filling).toBe(0);
    expect(await hadNoSummary(idx, 0)).toBe(true);
  });

  it('maintenance summarizes every full range of the hot partition and leaves the one being filled without a summary', async () => {
    await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
    const { idx, ppr, pages, filling } = await brinOf(hot);
    expect(filling).toBeGreaterThanOrEqual(4 * ppr);
    // The table's end falls inside a range: the one being filled has rows, and no summary.
    expect(pages % ppr).not.toBe(0);
    for (let block = 0; block < filling; block += ppr) expect(await hadNoSummary(idx, block)).toBe(false);
    expect(await hadNoSummary(idx, filling)).toBe(true);
    // Summarized by the probe above, the range being filled loses its summary again at the next run.
    await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
    expect(await hadNoSummary(idx, filling)).toBe(true);
    await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
  });

  it('a partition is created, and answered as created, when its first range cannot lose its summary', async () => {
    const day = new Date(today + 11 * 86_400_000);
    const name = dayPartitionName(day);
    // Every statement reaches PostgreSQL but the removal of the summary, which fails as a lost connection would.
    const failing = db.withPlugin({
      transformQuery: (args) => {
        if (JSON.stringify(args.node).includes('brin_desummarize_range')) throw new Error('connection lost');
        return args.node;
      },
      transformResult: async (args) => args.result,
    });
    expect(await createDayPartition(failing, day)).toBe(true);
    expect((await sql<{ r: string | null }>`select to_regclass(${name}) as r`.execute(db)).rows[0]!.r).toBe(name);
    // The next maintenance takes the summary off instead.
    await insertAuditEntries(db, [makeEntry({ ts: new Date(day.getTime() + 60_000).toISOString(), request_id: 'day-11' })]);
    const { idx } = await brinOf(name);
    await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
    expect(await hadNoSummary(idx, 0)).toBe(true);
  });

  it('a day partition that is itself partitioned is passed over, not failed on (its index is a partitioned one)', async () => {
    const day = new Date(today + 13 * 86_400_000);
    const name = dayPartitionName(day);
    const to = new Date(day.getTime() + 86_400_000).toISOString();
    await sql`create table ${sql.id(name)} partition of audit_entries for values from (${sql.lit(day.toISOString())}) to (${sql.lit(to)}) partition by range (ts)`.execute(db);
    await sql`create table ${sql.id(`${name}_all`)} partition of ${sql.id(name)} for values from (${sql.lit(day.toISOString())}) to (${sql.lit(to)})`.execute(db);
    try {
      await expect(maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 })).resolves.toMatchObject({ busy: [] });
    } finally {
      await sql`drop table ${sql.id(name)}`.execute(db);
    }
  });
});

describe('searchAudit across the hot partition and the closed days', () => {
  /** Every id the filters match, newest first, by one plain query. */
  async function expected(f: AuditFilters): Promise<string[]> {
    let q = db.selectFrom('audit_entries').select('id');
    if (f.from) q = q.where('ts', '>=', f.from as never);
    if (f.to) q = q.where('ts', '<', f.to as never);
    if (f.identity_id !== undefined) q = q.where('identity_id', '=', f.identity_id);
    if (f.source_id !== undefined) q = q.where('source_id', '=', f.source_id);
    if (f.request_id !== undefined) q = q.where('request_id', '=', f.request_id);
    if (f.decision !== undefined) q = q.where('decision', '=', f.decision);
    return (await q.orderBy('ts', 'desc').orderBy('id', 'desc').execute()).map((r) => r.id);
  }

  /** Every page through the cursor, up to `max` ids. */
  async function walk(f: AuditFilters, limit: number, max: number): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await searchAudit(db, { ...f, limit, ...(cursor ? { cursor } : {}) });
      ids.push(...page.items.map((e) => e.id));
      if (!page.next_cursor || ids.length >= max) return ids;
      cursor = page.next_cursor;
    }
  }

  const cases: [string, AuditFilters][] = [
    ['no filter', {}],
    ['a common identity', { identity_id: 3 }],
    ['an identity in 1 of 300 hot rows', { identity_id: 800 }],
    ['an identity in 1 of 4,000 hot rows', { identity_id: 900 }],
    ['an identity without rows', { identity_id: 999 }],
    ['a source', { source_id: 'src-4' }],
    ['a hot request id below the probe', { request_id: 'hot-100' }],
    ['a hot request id among the newest', { request_id: `hot-${HOT_ROWS - 3}` }],
    ['a request id of yesterday', { request_id: 'old-17' }],
    ['decision deny', { decision: 'deny' }],
    ['a rare identity from an hour before today', { identity_id: 900, from: new Date(today - 3_600_000) }],
    ['a rare identity within today only', { identity_id: 900, from: new Date(today + 1) }],
    ['a rare identity before today only', { identity_id: 900, to: new Date(today) }],
    ['an identity and a source', { identity_id: 800, source_id: 'src-5' }],
  ];

  it.each(cases)('%s: the first page of 100 and every page of 7 are the plain query\'s rows in its order', async (_name, f) => {
    const all = await expected(f);
    const first = await searchAudit(db, { ...f, limit: 100 });
    expect(first.items.map((e) => e.id)).toEqual(all.slice(0, 100));
    expect(first.next_cursor === null).toBe(all.length <= 100);
    // Pages of 7 through the probe's boundary and on into yesterday (a common filter: the first 300 only).
    const max = all.length > 400 ? 300 : all.length;
    expect(await walk(f, 7, max)).toEqual(all.slice(0, Math.min(all.length, Math.ceil(max / 7) * 7)));
  });

  it('finds each rare hot row and the closed day\'s after them in one page', async () => {
    const page = await searchAudit(db, { identity_id: 900, limit: 500 });
    const hotRare = Array.from({ length: HOT_ROWS }, (_, i) => i).filter((i) => i % 4_000 === 7).map((i) => `hot-${i}`).reverse();
    expect(page.items.slice(0, hotRare.length).map((e) => e.request_id)).toEqual(hotRare);
    expect(page.items.slice(hotRare.length).every((e) => e.request_id.startsWith('old-'))).toBe(true);
    expect(page.items).toHaveLength(hotRare.length + 100);
  });
});

describe('the same search on the embedded store (PGlite)', () => {
  let dir: string;
  let store: ControlStore;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'gh-hot-search-pglite-'));
    store = await openControlStore({ url: null, embeddedDir: dir, poolMax: 1, connectTimeoutMs: 5_000 });
    await migrateToLatest(store.db);
    const rows = Array.from({ length: HOT_ROWS }, (_, i) => hotEntry(i));
    for (let i = 0; i < rows.length; i += 500) await insertAuditEntries(store.db, rows.slice(i, i + 500));
    await maintainPartitions(store.db, { monthsAhead: 1, retentionDays: 36_500, concurrently: false });
  }, 180_000);
  afterAll(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('a rare identity (the bloom filter read, in a transaction on the single connection) and a common one', async () => {
    const edb = store.db as unknown as Kysely<AuditDatabase>;
    const rare = await searchAudit(edb, { identity_id: 900, limit: 100 });
    expect(rare.items.map((e) => e.request_id)).toEqual(Array.from({ length: HOT_ROWS }, (_, i) => i).filter((i) => i % 4_000 === 7).map((i) => `hot-${i}`).reverse());
    const common = await searchAudit(edb, { identity_id: 3, limit: 100 });
    expect(common.items).toHaveLength(100);
    expect(common.items.every((e) => e.identity_id === 3)).toBe(true);
  });
});
