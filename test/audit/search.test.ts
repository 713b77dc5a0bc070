// Audit storage and search: partitions created ahead and dropped past retention, filters, keyset pagination, CSV/JSONL export, and the HTTP routes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import type { Kysely } from 'kysely';
import { insertAuditEntries } from '../../src/audit/insert.js';
import { listPartitions, maintainPartitions } from '../../src/audit/partitions.js';
import { csvCell, exportAudit, searchAudit } from '../../src/audit/search.js';
import { registerAuditRoutes } from '../../src/audit/routes.js';
import type { AuditDatabase } from '../../src/audit/schema.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { makeEntry } from './support.js';

let migrated: MigratedStore;
let db: Kysely<AuditDatabase>;
beforeAll(async () => {
  migrated = await withMigratedStore();
  db = migrated.store.db as unknown as Kysely<AuditDatabase>;
});
afterAll(async () => {
  await migrated?.cleanup();
});

describe('partitions', () => {
  it('the migration creates today and the days ahead (daily partitions, docs/decisions/0024)', async () => {
    const names = (await listPartitions(db)).map((p) => p.name);
    const now = new Date();
    expect(names).toContain(`audit_entries_p${now.getUTCFullYear()}${String(now.getUTCMonth() + 1).padStart(2, '0')}${String(now.getUTCDate()).padStart(2, '0')}`);
    expect(names.length).toBeGreaterThanOrEqual(4);
  });

  it('creates days ahead idempotently, drops whole days past retention, and inserts auto-create a missing day', async () => {
    const now = new Date('2030-06-15T12:00:00.000Z');
    const first = await maintainPartitions(db, { monthsAhead: 2, retentionDays: 36_500, now });
    expect(first.created).toEqual(['audit_entries_p20300615', 'audit_entries_p20300616', 'audit_entries_p20300617']);
    expect((await maintainPartitions(db, { monthsAhead: 2, retentionDays: 36_500, now })).created).toEqual([]);

    // A day nobody created ahead: the insert creates its partition and succeeds.
    await insertAuditEntries(db, [makeEntry({ ts: '2031-02-03T04:05:06.789Z', request_id: 'part-auto' })]);
    expect((await listPartitions(db)).map((p) => p.name)).toContain('audit_entries_p20310203');

    await insertAuditEntries(db, [makeEntry({ ts: '2030-06-15T20:00:00.000Z', request_id: 'part-old' })]);
    // Cutoff 2031-06-16T12:00 − 365 d = 2030-06-16T12:00: the 15th ended by then, the 16th did not.
    const later = await maintainPartitions(db, { monthsAhead: 0, retentionDays: 365, now: new Date('2031-06-16T12:00:00.000Z') });
    expect(later.dropped).toContain('audit_entries_p20300615');
    expect(later.dropped).not.toContain('audit_entries_p20300616');
    const left = (await listPartitions(db)).map((p) => p.name);
    expect(left).toEqual(expect.arrayContaining(['audit_entries_p20300616', 'audit_entries_p20310203', 'audit_entries_p20310616']));
    expect((await searchAudit(db, { request_id: 'part-old' })).items).toEqual([]);
    // Closed partitions got their search indexes; the open one (the 16th of June 2031) did not.
    expect(later.indexed).toEqual(expect.arrayContaining(['audit_entries_p20310203_identity_idx', 'audit_entries_p20300616_request_idx']));
    expect(later.indexed.some((n) => n.startsWith('audit_entries_p20310616_'))).toBe(false);
    // Put the current days back for the search tests below.
    await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500 });
  });
});

describe('search and export', () => {
  const base = Date.parse('2031-09-01T00:00:00.000Z');
  const entries: AuditEntry[] = [];

  beforeAll(async () => {
    await maintainPartitions(db, { monthsAhead: 1, retentionDays: 36_500, now: new Date(base) });
    for (let i = 0; i < 40; i++) {
      entries.push(
        makeEntry({
          // Pairs share a timestamp, so the id breaks ties in the keyset.
          ts: new Date(base + Math.floor(i / 2) * 1000).toISOString(),
          request_id: `search-${i}`,
          identity_id: (i % 3) + 1,
          source_id: i % 2 === 0 ? 'orders' : 'billing',
          channel: (['http', 'pgwire', 'mcp', 'admin'] as const)[i % 4],
          decision: i % 5 === 0 ? 'deny' : 'allow',
          approval_id: i === 7 ? 77 : null,
          path: i === 3 ? '=HYPERLINK("http://x","a, b")' : '/v1/orders',
          reasons: i % 5 === 0 ? ['policy:deny-writes'] : [],
        }),
      );
    }
    await insertAuditEntries(db, entries);
    // Idempotent by id: inserting again stores nothing new.
    expect(await insertAuditEntries(db, entries)).toBe(0);
  });

  const inRange = { from: new Date(base), to: new Date(base + 3_600_000) };

  it('filters by each field, newest first', async () => {
    const page = await searchAudit(db, { ...inRange, limit: 500 });
    expect(page.items).toHaveLength(40);
    expect(page.next_cursor).toBeNull();
    const ts = page.items.map((e) => e.ts);
    expect(ts).toEqual([...ts].sort().reverse());
    expect((await searchAudit(db, { ...inRange, identity_id: 2, limit: 500 })).items.every((e) => e.identity_id === 2)).toBe(true);
    expect((await searchAudit(db, { ...inRange, source_id: 'billing', limit: 500 })).items).toHaveLength(20);
    expect((await searchAudit(db, { ...inRange, channel: 'mcp', limit: 500 })).items).toHaveLength(10);
    expect((await searchAudit(db, { ...inRange, decision: 'deny', limit: 500 })).items).toHaveLength(8);
    expect((await searchAudit(db, { approval_id: 77 })).items.map((e) => e.request_id)).toEqual(['search-7']);
    expect((await searchAudit(db, { request_id: 'search-12' })).items[0]).toEqual(entries[12]);
    expect((await searchAudit(db, { from: new Date(base + 10_000), to: new Date(base + 12_000), limit: 500 })).items).toHaveLength(4);
  });

  it('keyset pages cover every entry once, in order, including ties on ts', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const page = await searchAudit(db, { ...inRange, limit: 7, ...(cursor ? { cursor } : {}) });
      seen.push(...page.items.map((e) => e.id));
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    const all = (await searchAudit(db, { ...inRange, limit: 500 })).items.map((e) => e.id);
    expect(seen).toEqual(all);
    await expect(searchAudit(db, { cursor: 'garbage' })).rejects.toMatchObject({ code: 'invalid_cursor' });
  });

  it('exports CSV with escaping and formula protection, and JSONL that parses back', async () => {
    expect(csvCell('=1+1')).toBe("'=1+1");
    expect(csvCell('-2')).toBe("'-2");
    expect(csvCell('@x')).toBe("'@x");
    expect(csvCell('a"b')).toBe('"a""b"');
    expect(csvCell(-2)).toBe('-2');
    let csv = '';
    for await (const chunk of exportAudit(db, inRange, 'csv')) csv += chunk;
    const lines = csv.trimEnd().split('\r\n');
    expect(lines[0]!.startsWith('id,ts,request_id,channel')).toBe(true);
    expect(lines).toHaveLength(41);
    expect(csv).toContain(`"'=HYPERLINK(""http://x"",""a, b"")"`);
    let jsonl = '';
    for await (const chunk of exportAudit(db, inRange, 'jsonl')) jsonl += chunk;
    const parsed = jsonl.trimEnd().split('\n').map((l) => JSON.parse(l) as AuditEntry);
    expect(parsed.map((e) => e.id).sort()).toEqual(entries.map((e) => e.id).sort());
  });

  it('routes: guarded, validated (422 HTTPValidationError shape), paginated, export streamed', async () => {
    const app = Fastify();
    registerAuditRoutes(app, {
      db,
      authorize: (req, reply) => {
        if (req.headers['x-test-auditor'] !== 'yes') void reply.code(401).send({ detail: 'Not authenticated' });
      },
    });
    await app.ready();
    try {
      const auth = { 'x-test-auditor': 'yes' };
      expect((await app.inject({ url: '/api/audit' })).statusCode).toBe(401);
      const bad = await app.inject({ url: '/api/audit?limit=1000', headers: auth });
      expect(bad.statusCode).toBe(422);
      expect(bad.json().detail[0]).toMatchObject({ loc: ['query', 'limit'], type: expect.any(String), msg: expect.any(String) });
      expect((await app.inject({ url: '/api/audit?channel=smtp', headers: auth })).json().detail[0].loc).toEqual(['query', 'channel']);
      expect((await app.inject({ url: '/api/audit?cursor=nope', headers: auth })).json().detail[0].loc).toEqual(['query', 'cursor']);
      const q = `from=${encodeURIComponent(inRange.from.toISOString())}&to=${encodeURIComponent(inRange.to.toISOString())}`;
      const first = await app.inject({ url: `/api/audit?${q}&limit=30&decision=allow`, headers: auth });
      expect(first.statusCode).toBe(200);
      const body = first.json() as { items: AuditEntry[]; next_cursor: string | null };
      expect(body.items).toHaveLength(30);
      const second = (await app.inject({ url: `/api/audit?${q}&limit=30&decision=allow&cursor=${body.next_cursor}`, headers: auth })).json() as { items: AuditEntry[]; next_cursor: string | null };
      expect(second.items).toHaveLength(2);
      expect(second.next_cursor).toBeNull();
      const csv = await app.inject({ url: `/api/audit/export?${q}&format=csv&source_id=orders`, headers: auth });
      expect(csv.statusCode).toBe(200);
      expect(csv.headers['content-type']).toContain('text/csv');
      expect(csv.body.trimEnd().split('\r\n')).toHaveLength(21);
      expect((await app.inject({ url: '/api/audit/export?format=xml', headers: auth })).statusCode).toBe(422);
      expect((await app.inject({ url: '/api/audit/export?format=csv' })).statusCode).toBe(401);
    } finally {
      await app.close();
    }
  });
});
