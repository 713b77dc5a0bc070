// Document search on real PostgreSQL (decision record 0026): ranking order, the source filter under the candidate
// bound, a renamed source, migration 0019 over existing pages, queries that name no word, and no SQL error for any query.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { sql } from 'kysely';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { migrateTo, migrateToLatest } from '../../src/store/migrate.js';
import { saveDocument, type DocumentInput } from '../../src/store/repos/documents.js';
import { SEARCH_CANDIDATES, atTier, searchPages, withoutPhrases } from '../../src/store/repos/document-search.js';
import { SearchQueryError } from '../../src/store/errors.js';
import type { Db } from '../../src/store/repos/util.js';

let m: MigratedStore;
let db: Db;

function doc(sourceId: string, path: string, pages: number): DocumentInput {
  return {
    source_id: sourceId, path, job_id: null, catalog_asset_id: null, content_type: 'text/plain', byte_size: 1, sha256: path,
    asset_version: null, page_count: pages, ocr_pages: 0, classification: {}, extract_chars: 1, extract_truncated: false, notes: [],
  };
}

async function source(db: Db, sourceId: string): Promise<void> {
  await sql`insert into data_sources (source_id, name, source_type) values (${sourceId}, ${sourceId}, 'files')`.execute(db);
}

/** Pages of one document, each text given. */
async function put(db: Db, sourceId: string, path: string, texts: string[]): Promise<void> {
  await saveDocument(db, doc(sourceId, path, texts.length), texts.map((text, i) => ({ page_no: i + 1, text, ocr: false })));
}

const filler = (n: number, seed: number) => Array.from({ length: n }, (_, i) => `filler${(seed * 31 + i) % 97}`).join(' ');

beforeAll(async () => {
  m = await withMigratedStore();
  db = m.store.db;
  for (const s of ['alpha', 'beta', 'gamma']) await source(db, s);
  // Ranking: the same word 1, 3 and 9 times on pages of equal length.
  await put(db, 'alpha', 'rank.txt', [`quokka ${filler(40, 1)}`, `quokka quokka quokka ${filler(38, 2)}`, `${'quokka '.repeat(9)}${filler(32, 3)}`]);
  // A word on more pages than the candidate bound: many pages hold it once, five pages of another source (not
  // granted to the reader below) and three of this one hold it often.
  const many = Array.from({ length: SEARCH_CANDIDATES + 150 }, (_, i) => `wombat ${filler(30, i)}`);
  for (let i = 0; i < many.length; i += 50) await put(db, 'beta', `many-${i}.txt`, many.slice(i, i + 50));
  await put(db, 'beta', 'often.txt', [`${'wombat '.repeat(20)}x`, `${'wombat '.repeat(12)}x`, `${'wombat '.repeat(6)}x`]);
  await put(db, 'gamma', 'secret.txt', Array.from({ length: 5 }, () => `${'wombat '.repeat(40)}classified`));
}, 120_000);

afterAll(async () => {
  await m?.cleanup();
});

describe('search_documents ranking and filters', () => {
  it('ranks pages by how often they hold the words, best first, ties by document then page', async () => {
    const hits = await searchPages(db, 'quokka', ['alpha'], 10);
    expect(hits.map((h) => h.page_no)).toEqual([3, 2, 1]);
    expect(hits[0]!.rank).toBeGreaterThan(hits[1]!.rank);
    expect(hits[1]!.rank).toBeGreaterThan(hits[2]!.rank);
  });

  it('beyond the candidate bound still returns the pages that repeat the word most, in rank order', async () => {
    const hits = await searchPages(db, 'wombat', ['beta'], 3);
    expect(hits.map((h) => `${h.path}#${h.page_no}`)).toEqual(['often.txt#1', 'often.txt#2', 'often.txt#3']);
  });

  it('never returns pages of a source outside the list, however well they rank, and finds them for a reader of it', async () => {
    const beta = await searchPages(db, 'wombat classified', ['beta'], 50);
    expect(beta).toEqual([]);
    const some = await searchPages(db, 'wombat', ['alpha', 'beta'], 50);
    expect(some.length).toBe(50);
    expect(some.every((h) => h.source_id === 'beta')).toBe(true);
    const gamma = await searchPages(db, 'wombat', ['gamma'], 50);
    expect(gamma.map((h) => h.path)).toEqual(Array(5).fill('secret.txt'));
    expect(await searchPages(db, 'wombat', [], 50)).toEqual([]);
  });

  it('understands phrases, exclusions and OR', async () => {
    await source(db, 'delta');
    await put(db, 'delta', 'p.txt', ['red panda here', 'panda red otter', 'red fox']);
    expect((await searchPages(db, '"red panda"', ['delta'], 10)).map((h) => h.page_no)).toEqual([1]);
    expect((await searchPages(db, 'red -panda', ['delta'], 10)).map((h) => h.page_no)).toEqual([3]);
    expect((await searchPages(db, 'fox or otter', ['delta'], 10)).map((h) => h.page_no).sort()).toEqual([2, 3]);
  });

  it('follows a renamed source: its pages answer to the new name only', async () => {
    await source(db, 'epsilon');
    await put(db, 'epsilon', 'e.txt', ['narwhal tusk']);
    await sql`update data_sources set source_id = 'epsilon2' where source_id = 'epsilon'`.execute(db);
    expect(await searchPages(db, 'narwhal', ['epsilon'], 10)).toEqual([]);
    expect((await searchPages(db, 'narwhal', ['epsilon2'], 10)).map((h) => h.source_id)).toEqual(['epsilon2']);
    await source(db, 'epsilon');
    expect(await searchPages(db, 'narwhal', ['epsilon'], 10)).toEqual([]);
  });

  it('replaces a re-ingested document\'s pages in the index', async () => {
    await source(db, 'zeta');
    await put(db, 'zeta', 'r.txt', ['first version ocelot']);
    await put(db, 'zeta', 'r.txt', ['second version lynx']);
    expect(await searchPages(db, 'ocelot', ['zeta'], 10)).toEqual([]);
    expect((await searchPages(db, 'lynx', ['zeta'], 10)).length).toBe(1);
  });
});

describe('queries that name no word', () => {
  it.each([['the and of'], ['!!! ??? ...'], ['""'], ['-'], ['()&|<->:*'], ['\u0000']])('%j is refused as no_words', async (q) => {
    await expect(searchPages(db, q, ['alpha'], 10)).rejects.toMatchObject({ name: 'SearchQueryError', reason: 'no_words' });
  });

  it('only excluded words are refused (they would read every page)', async () => {
    await expect(searchPages(db, '-quokka', ['alpha'], 10)).rejects.toBeInstanceOf(SearchQueryError);
    await expect(searchPages(db, 'quokka or -filler1', ['alpha'], 10)).rejects.toMatchObject({ reason: 'only_excluded' });
  });

  it('any query string gives results or a SearchQueryError, never a database error', async () => {
    const special = fc.constantFrom(...`'"():*&|!<->\\-_ .,;@#/?%$^~\`{}[]=+0123456789`.split(''), ' or ', ' and ', 'quokka', 'wombat', 'the', "it's", '\u0000', 'é', '漢字');
    const query = fc.oneof(fc.string({ maxLength: 60 }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.array(special, { maxLength: 25 }).map((a) => a.join('')));
    await fc.assert(
      fc.asyncProperty(query, async (q) => {
        try {
          const hits = await searchPages(db, q, ['alpha', 'beta'], 5);
          expect(hits.length).toBeLessThanOrEqual(5);
        } catch (error) {
          expect(error).toBeInstanceOf(SearchQueryError);
        }
      }),
      { numRuns: 300 },
    );
  }, 120_000);
});

describe('query rewriting', () => {
  it('drops word order and moves every lexeme to a tier, quotes included', () => {
    expect(withoutPhrases(`'red' <-> 'panda' & !( 'a' <2> 'b' )`)).toBe(`'red' & 'panda' & !( 'a' & 'b' )`);
    expect(withoutPhrases(`'x<->y' <-> 'it''s'`)).toBe(`'x<->y' & 'it''s'`);
    expect(atTier(`'it''s' & !'b' | 'c\\\\'`, 4)).toBe(`'it''s 4' & !'b 4' | 'c\\\\ 4'`);
  });
});

describe('migration 0019 over existing pages', () => {
  it('indexes pages stored before it, and its down step leaves them searchable by the old index', async () => {
    const old = await withMigratedStore();
    try {
      await migrateTo(old.store.db, '0017_audit_store');
      await source(old.store.db, 'legacy');
      const d = await sql<{ id: number }>`insert into ingestion_documents (source_id, path, content_type, byte_size, sha256, page_count)
        values ('legacy', 'old.txt', 'text/plain', 1, 'x', 2) returning id`.execute(old.store.db);
      await sql`insert into ingestion_document_pages (document_id, page_no, text) values (${d.rows[0]!.id}, 1, 'capybara'), (${d.rows[0]!.id}, 2, 'tapir')`.execute(old.store.db);
      await migrateToLatest(old.store.db);
      expect((await searchPages(old.store.db, 'capybara', ['legacy'], 10)).map((h) => h.page_no)).toEqual([1]);
      await migrateTo(old.store.db, '0017_audit_store');
      const idx = await sql<{ n: string | null }>`select to_regclass('ingestion_document_pages_tsv_idx')::text as n`.execute(old.store.db);
      expect(idx.rows[0]!.n).toBe('ingestion_document_pages_tsv_idx');
    } finally {
      await old.cleanup();
    }
  }, 60_000);
});
