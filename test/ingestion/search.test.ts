// Document search on real PostgreSQL (decision record 0026): ranking order, the source filter under the candidate
// bound, renamed, deleted and many sources, migrations 0019 and 0020 over existing pages, queries that name no word,
// and no SQL error for any query.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { sql } from 'kysely';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { migrateTo, migrateToLatest } from '../../src/store/migrate.js';
import { saveDocument, type DocumentInput } from '../../src/store/repos/documents.js';
import { SEARCH_CANDIDATES, SEARCH_MAX_KEYS, SEARCH_TIERS, allWordsQuery, keysQuery, searchBands, searchPages } from '../../src/store/repos/document-search.js';
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

  it('any query string gives results of the granted sources only, or a SearchQueryError, never a database error', async () => {
    // Words of the ungranted source (gamma: "classified", "wombat" 40 times a page) and spellings of the search keys'
    // own text ("<tag> <word> <tier>") among the pieces: no spelling may reach gamma's pages.
    const tags = (await sql<{ tag: number }>`select tag from ingestion_search_sources`.execute(db)).rows.map((r) => String(r.tag));
    const special = fc.constantFrom(...`'"():*&|!<->\\-_ .,;@#/?%$^~\`{}[]=+0123456789`.split(''), ' or ', ' and ', 'quokka', 'wombat', 'the', "it's", '\u0000', 'é', '漢字', 'classified', ' 64', ' 1', ...tags.map((t) => `${t} `), ...tags.map((t) => `'${t} wombat 64'`));
    const query = fc.oneof(fc.string({ maxLength: 60 }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.array(special, { maxLength: 25 }).map((a) => a.join('')));
    await fc.assert(
      fc.asyncProperty(query, async (q) => {
        try {
          const hits = await searchPages(db, q, ['alpha', 'beta'], 5);
          expect(hits.length).toBeLessThanOrEqual(5);
          expect(hits.filter((h) => h.source_id !== 'alpha' && h.source_id !== 'beta'), q).toEqual([]);
        } catch (error) {
          expect(error).toBeInstanceOf(SearchQueryError);
        }
      }),
      { numRuns: 300 },
    );
  }, 120_000);
});

describe('the grant filter against spellings of the keys', () => {
  it("a query written as another source's key text finds nothing of that source", async () => {
    const gamma = (await sql<{ tag: number }>`select tag from ingestion_search_sources where source_id = 'gamma'`.execute(db)).rows[0]!.tag;
    for (const q of [`${gamma} wombat 64`, `"${gamma} wombat 64"`, `'${gamma} wombat 1'`, `${gamma} classified`, `classified or "${gamma} classified 1"`, `wombat -"${gamma}"`]) {
      const hits = await searchPages(db, q, ['alpha', 'beta'], 50).catch((e: unknown) => (e instanceof SearchQueryError ? [] : Promise.reject(e)));
      expect(hits.map((h) => h.source_id).filter((s) => s === 'gamma'), q).toEqual([]);
    }
    // The same words do find gamma's pages for a reader of gamma: the filter, not the spelling, kept them out.
    expect((await searchPages(db, 'classified', ['gamma'], 50)).map((h) => h.source_id)).toContain('gamma');
  });
});

describe('query rewriting', () => {
  it('puts every counted word at the tier and every excluded word at tier 1, per source tag, without word order', () => {
    expect(keysQuery(`'red' <-> 'panda' & !( 'a' <2> 'b' )`, [3], 8)).toBe(`('3 red 8') & ('3 panda 8') & !( ('3 a 1') & ('3 b 1') )`);
    expect(keysQuery(`'x<->y' <-> 'it''s'`, [1, 2], 4)).toBe(`('1 x<->y 4' | '2 x<->y 4') & ('1 it''s 4' | '2 it''s 4')`);
    expect(keysQuery(`'c\\\\' & !'b' | 'd'`, [5], 2)).toBe(`('5 c\\\\ 2') & !('5 b 1') | ('5 d 2')`);
    // A double negation counts again; a `!` binds to the group after it only.
    expect(keysQuery(`!( !'a' & 'b' ) & 'c'`, [1], 6)).toBe(`!( !('1 a 6') & ('1 b 1') ) & ('1 c 6')`);
  });

  it('bands run from the highest tier down, each without the one above, and end with every match', () => {
    const bands = searchBands(`'w'`, [1]);
    expect(bands).toHaveLength(SEARCH_TIERS.length + 1);
    expect(bands[0]).toBe(`('1 w 64')`);
    expect(bands[1]).toBe(`(('1 w 56')) & !(('1 w 64'))`);
    expect(bands.at(-1)).toBe(`(('1 w 1')) & !(('1 w 2'))`);
  });

  it('a query with alternatives first bands its pages holding all of them, then the others', () => {
    expect(allWordsQuery(`'a' & 'b' | 'c'`)).toBe(`'a' & 'b' & 'c'`);
    expect(allWordsQuery(`'a' | !( 'b' | 'c' )`)).toBe(`'a' & !( 'b' | 'c' )`);
    expect(allWordsQuery(`'a' & !'b'`)).toBe(`'a' & !'b'`);
    const bands = searchBands(`'a' | 'b'`, [1]);
    const n = SEARCH_TIERS.length + 1;
    expect(bands).toHaveLength(2 * n);
    expect(bands[0]).toBe(`('1 a 64') & ('1 b 64')`);
    expect(bands[n]).toBe(`(('1 a 64') | ('1 b 64')) & !(('1 a 1') & ('1 b 1'))`);
    expect(bands[n + 1]).toBe(`(('1 a 56') | ('1 b 56')) & !((('1 a 64') | ('1 b 64')) | (('1 a 1') & ('1 b 1')))`);
  });
});

describe('search keys', () => {
  it('hold every tier a word reaches and tier 1 for every word, under the source tag', async () => {
    await source(db, 'iota');
    await put(db, 'iota', 'k.txt', [`${'heron '.repeat(70)}${'egret '.repeat(5)}stork`]);
    const r = await sql<{ tag: number; keys: string[] }>`
      select s.tag, tsvector_to_array(k.keys) as keys from ingestion_page_keys k join ingestion_search_sources s on s.tag = k.source_tag
      where s.source_id = 'iota'`.execute(db);
    const { tag, keys } = r.rows[0]!;
    const expected = [
      ...[1, ...SEARCH_TIERS].map((t) => `${tag} heron ${t}`),
      ...[1, ...SEARCH_TIERS.filter((t) => t <= 5)].map((t) => `${tag} egret ${t}`),
      `${tag} stork 1`,
    ];
    expect([...keys].sort()).toEqual(expected.sort());
  });

  it('an excluded word excludes a page wherever it occurs, also on a page of the highest tiers', async () => {
    await source(db, 'kappa');
    await put(db, 'kappa', 'x.txt', [`${'otter '.repeat(40)}seal`, `${'otter '.repeat(3)}walrus`]);
    expect((await searchPages(db, 'otter -seal', ['kappa'], 10)).map((h) => h.page_no)).toEqual([2]);
  });

  it('beyond the candidate bound still ranks first the pages holding every alternative of an or', async () => {
    await source(db, 'nu');
    const once = Array.from({ length: SEARCH_CANDIDATES + 50 }, (_, i) => `lemur ${filler(30, i)}`);
    for (let i = 0; i < once.length; i += 50) await put(db, 'nu', `l-${i}.txt`, once.slice(i, i + 50));
    await put(db, 'nu', 'both.txt', ['lemur tarsier', `lemur ${filler(10, 3)} tarsier`, `tarsier ${filler(20, 4)} lemur`]);
    const hits = await searchPages(db, 'lemur or tarsier', ['nu'], 3);
    expect(hits.map((h) => h.path)).toEqual(['both.txt', 'both.txt', 'both.txt']);
  });

  it('keeps one tag per source however often its documents are written', async () => {
    await source(db, 'lambda');
    for (let i = 0; i < 5; i++) await put(db, 'lambda', 'same.txt', [`version ${i} marmot`]);
    const r = await sql<{ n: number; tag: number }>`select count(*)::int as n, max(tag) as tag from ingestion_search_sources where source_id = 'lambda'`.execute(db);
    expect(r.rows[0]!.n).toBe(1);
    const all = await sql<{ max: number }>`select max(tag) as max from ingestion_search_sources`.execute(db);
    expect(all.rows[0]!.max).toBe(r.rows[0]!.tag);
  });

  it('forgets a deleted source: one created again under its name starts without its pages', async () => {
    await source(db, 'mu');
    await put(db, 'mu', 'm.txt', ['pangolin scales']);
    await sql`delete from data_sources where source_id = 'mu'`.execute(db);
    await source(db, 'mu');
    expect(await searchPages(db, 'pangolin', ['mu'], 10)).toEqual([]);
    await put(db, 'mu', 'n.txt', ['pangolin again']);
    expect((await searchPages(db, 'pangolin', ['mu'], 10)).map((h) => h.path)).toEqual(['n.txt']);
  });

  it('searches more sources than one band holds a group at a time, best first overall, granted sources only', async () => {
    const n = SEARCH_MAX_KEYS + 6;
    const ids = Array.from({ length: n }, (_, i) => `many-${String(i).padStart(3, '0')}`);
    for (const [i, id] of ids.entries()) {
      await source(db, id);
      // Source i holds "gecko" (i % 9) + 1 times, and every source a page without it.
      await put(db, id, 'g.txt', [`${'gecko '.repeat((i % 9) + 1)}${filler(20, i)}`, filler(20, i + 1)]);
    }
    const granted = ids.filter((_, i) => i % 7 !== 3);
    const hits = await searchPages(db, 'gecko', granted, 50);
    const exact = await sql<{ source_id: string }>`
      select d.source_id from ingestion_document_pages p join ingestion_documents d on d.id = p.document_id
      where p.tsv @@ 'gecko'::tsquery and d.source_id = any(${granted}::text[])
      order by ts_rank(p.tsv, 'gecko'::tsquery) desc, d.id, p.page_no limit 50`.execute(db);
    expect(hits.map((h) => h.source_id)).toEqual(exact.rows.map((r) => r.source_id));
    expect(hits.every((h) => granted.includes(h.source_id))).toBe(true);
  }, 60_000);
});

describe('migrations 0019 and 0020 over existing pages', () => {
  it('indexes pages stored before them, and their down steps leave them searchable by the old index', async () => {
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

  it('0020 takes over pages 0019 indexed, follows a rename after it, and its down step refills 0019\'s terms', async () => {
    const old = await withMigratedStore();
    try {
      const odb = old.store.db;
      await migrateTo(odb, '0019_document_search');
      await source(odb, 'before');
      await source(odb, 'other');
      await put(odb, 'before', 'b.txt', [`${'axolotl '.repeat(9)}gills`, 'axolotl once']);
      await put(odb, 'other', 'o.txt', [`${'axolotl '.repeat(30)}secret`]);
      await migrateToLatest(odb);
      expect((await searchPages(odb, 'axolotl', ['before'], 10)).map((h) => h.page_no)).toEqual([1, 2]);
      await sql`update data_sources set source_id = 'after' where source_id = 'before'`.execute(odb);
      expect(await searchPages(odb, 'axolotl', ['before'], 10)).toEqual([]);
      expect((await searchPages(odb, 'axolotl', ['after'], 10)).map((h) => `${h.source_id}#${h.page_no}`)).toEqual(['after#1', 'after#2']);
      await put(odb, 'after', 'c.txt', ['axolotl later']);
      expect((await searchPages(odb, 'axolotl', ['after'], 10)).map((h) => h.path)).toEqual(['b.txt', 'b.txt', 'c.txt']);
      await migrateTo(odb, '0019_document_search');
      const terms = await sql<{ n: number; sources: string[] }>`
        select count(*)::int as n, array_agg(distinct source_id order by source_id) as sources from ingestion_page_terms`.execute(odb);
      expect(terms.rows[0]).toEqual({ n: 4, sources: ['after', 'other'] });
    } finally {
      await old.cleanup();
    }
  }, 60_000);
});
