// Full-text search over ingested pages (docs/decisions/0026-document-search.md): a bounded set of candidate pages from
// the GIN-indexed page terms, best tiers first, ranked with ts_rank; the source filter is applied inside the index.
import { sql, type RawBuilder } from 'kysely';
import type { JsonObject } from '../schema.js';
import { SearchQueryError } from '../errors.js';
import type { Db } from './util.js';

/**
 * Pages ranked per search at most. A query matching no more pages than this is ranked exactly; beyond it the
 * candidates are the pages that repeat the query's words most (the tiers), then others (decision record 0026 §3).
 */
export const SEARCH_CANDIDATES = 400;
/** The tiers migration 0019 writes (`gatehouse_page_tiers`): "word t" for a word a page holds at least t times. */
export const SEARCH_TIERS = [64, 32, 16, 8, 4, 2] as const;

export interface PageHit {
  source_id: string;
  path: string;
  page_no: number;
  rank: number;
  text: string;
  classification: JsonObject;
}

/** A quoted lexeme of a tsquery's text form (quotes doubled inside), or a phrase operator (`<->`, `<N>`). */
const LEXEME_OR_PHRASE = /'(?:[^']|'')*'|<\d+>|<->/g;

/**
 * The query without word order: `a <-> b` becomes `a & b`. The page terms keep no positions (they stay small), so
 * the candidates are found by the words and the phrase is checked on the page's own tsvector when ranking.
 */
export function withoutPhrases(tsquery: string): string {
  return tsquery.replace(LEXEME_OR_PHRASE, (m) => (m.startsWith("'") ? m : '&'));
}

/** The query over tier `t`: every lexeme `'w'` becomes `'w t'` ("w at least t times on the page"). */
export function atTier(tsquery: string, tier: number): string {
  return tsquery.replace(LEXEME_OR_PHRASE, (m) => (m.startsWith("'") ? `${m.slice(0, -1)} ${tier}'` : m));
}

/** Any of these sources, as the lexemes migration 0019 adds (`gatehouse_source_lexeme`). Source ids carry no quote. */
export function sourcesQuery(sourceIds: readonly string[]): string {
  return sourceIds.map((s) => `' source ${s.replaceAll("'", "''")}'`).join(' | ');
}

/** PostgreSQL text cannot hold NUL; the query loses it as the stored text did. */
const clean = (s: string) => (s.includes('\u0000') ? s.replaceAll('\u0000', '') : s);

/**
 * Full-text search over pages of the given sources (websearch syntax: words, "phrases", -not, or), best first.
 * An empty source list finds nothing: callers pass only the sources the identity may read; the filter is applied in
 * the index and on every row before any limit. Throws SearchQueryError for a query that names no word to find.
 */
export async function searchPages(db: Db, query: string, sourceIds: readonly string[], limit: number): Promise<PageHit[]> {
  const statement = await searchStatement(db, query, sourceIds, limit);
  return statement ? (await statement.execute(db)).rows : [];
}

/** The search statement for a query (null: no source to search), parsed and checked but not run; bench:ingest explains it. */
export async function searchStatement(db: Db, query: string, sourceIds: readonly string[], limit: number): Promise<RawBuilder<PageHit> | null> {
  const parsed = await sql<{ tree: string; q: string }>`
    select querytree(q)::text as tree, q::text as q from websearch_to_tsquery('english', ${clean(query)}) q`.execute(db);
  const { tree, q } = parsed.rows[0]!;
  // querytree is what an index can search: empty without words, 'T' when every word is excluded (that would be a scan).
  if (tree === '') throw new SearchQueryError('no_words');
  if (tree === 'T') throw new SearchQueryError('only_excluded');
  if (sourceIds.length === 0) return null;

  const loose = withoutPhrases(q);
  const sources = sourcesQuery(sourceIds);
  const ids = sql.val([...sourceIds]);
  const inSources = (text: string): RawBuilder<unknown> => sql`${`(${text}) & (${sources})`}::tsquery`;
  // Tier bands, highest first, each without the pages of the band above; then every other match. Postgres runs
  // the branches of `union all` in order and stops once the outer limit has its candidates.
  const bands = SEARCH_TIERS.map((t, i) => {
    const above = i === 0 ? sql`` : sql`and not t.tiers @@ ${inSources(atTier(loose, SEARCH_TIERS[i - 1]!))}`;
    return sql`(select t.document_id, t.page_no from ingestion_page_terms t
      where t.tiers @@ ${inSources(atTier(loose, t))} ${above}
        and (t.terms @@ ${loose}::tsquery) is true and t.source_id = any(${ids}::text[])
      limit ${SEARCH_CANDIDATES})`;
  });
  const lowest = atTier(loose, SEARCH_TIERS[SEARCH_TIERS.length - 1]!);
  const rest = sql`(select t.document_id, t.page_no from ingestion_page_terms t
    where t.terms @@ ${inSources(loose)} and not t.tiers @@ ${inSources(lowest)} and t.source_id = any(${ids}::text[])
    limit ${SEARCH_CANDIDATES})`;
  return sql<PageHit>`
    with candidates as (${sql.join([...bands, rest], sql` union all `)})
    select d.source_id, d.path, p.page_no, ts_rank(p.tsv, ${q}::tsquery) as rank, p.text, d.classification
    from (select * from candidates limit ${SEARCH_CANDIDATES}) c
    join ingestion_document_pages p on p.document_id = c.document_id and p.page_no = c.page_no
    join ingestion_documents d on d.id = p.document_id
    where p.tsv @@ ${q}::tsquery and d.source_id = any(${ids}::text[])
    order by rank desc, d.id, p.page_no
    limit ${limit}`;
}
