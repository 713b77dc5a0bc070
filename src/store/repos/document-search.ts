// Full-text search over ingested pages (docs/decisions/0026-document-search.md): a bounded set of candidate pages from
// the per-source search keys (migration 0020), best tf tiers first, ranked with ts_rank; the grant filter is the keys.
import { sql, type RawBuilder } from 'kysely';
import type { JsonObject } from '../schema.js';
import { SearchQueryError } from '../errors.js';
import type { Db } from './util.js';

/**
 * Pages ranked per search at most. A query matching no more pages than this is ranked exactly; beyond it the
 * candidates are the pages that repeat the query's words most (the tiers), then others (decision record 0026 §3).
 */
export const SEARCH_CANDIDATES = 400;
/** The tiers migration 0020 writes (`gatehouse_page_keys`), highest first: "<tag> <word> t" for a count ≥ t. */
export const SEARCH_TIERS = [64, 56, 48, 40, 32, 28, 24, 20, 16, 14, 12, 10, 8, 7, 6, 5, 4, 3, 2] as const;
/**
 * Keys per band at most (query words × sources searched): an identity granted more sources than fit is searched a
 * group of sources at a time and the groups' best merged (decision record 0026 §5).
 */
export const SEARCH_MAX_KEYS = 64;

export interface PageHit {
  source_id: string;
  document_id: number;
  path: string;
  page_no: number;
  rank: number;
  text: string;
  classification: JsonObject;
}

/** A quoted lexeme of a tsquery's text form (quotes doubled inside), a phrase operator (`<->`, `<N>`), or an operator. */
const TOKEN = /'(?:[^']|'')*'|<\d+>|<->|[()!|]/g;
const PHRASE = /<\d+>|<->/;

/**
 * The query over the search keys at tier `tier`, for the sources tagged `tags`: a word `'w'` becomes
 * `('<tag> w <tier>' | …)` where it counts towards a match, and `('<tag> w 1' | …)` under a `!` (an excluded word is
 * excluded wherever it occurs). Word order is dropped (`a <-> b` becomes `a & b`): the keys keep no positions, so a
 * phrase is checked on the page's own tsvector when ranking. Tier 1 is the query itself.
 */
export function keysQuery(tsquery: string, tags: readonly number[], tier: number): string {
  return rewrite(tsquery, (token, negated) => {
    if (token === '|') return token;
    if (token.startsWith('<')) return '&';
    const word = token.slice(1, -1);
    return `(${tags.map((tag) => `'${tag} ${word} ${negated ? 1 : tier}'`).join(' | ')})`;
  });
}

/** The query with every alternative required (`a | b` becomes `a & b` where it counts towards a match): its pages rank first. */
export function allWordsQuery(tsquery: string): string {
  return rewrite(tsquery, (token, negated) => (token === '|' && !negated ? '&' : token));
}

/** Rewrites each lexeme, phrase operator and `|` of a tsquery's text form, knowing whether it sits under a `!`. */
function rewrite(tsquery: string, replace: (token: string, negated: boolean) => string): string {
  const negated: boolean[] = [false];
  let not = false;
  return tsquery.replace(TOKEN, (m) => {
    if (m === '!') {
      not = !not;
      return m;
    }
    if (m === '(') {
      negated.push(negated[negated.length - 1] !== not);
      not = false;
      return m;
    }
    if (m === ')') {
      negated.pop();
      return m;
    }
    const out = replace(m, negated[negated.length - 1] !== not);
    if (m.startsWith("'")) not = false;
    return out;
  });
}

/**
 * The candidate bands, in order: the pages whose counted words reach tier t, for each tier from the highest, each
 * without the band above it, then every other match. A query with alternatives (`or`) first runs these bands over
 * its pages holding every alternative (ts_rank ranks a page by how many of the words it holds first), then over the
 * rest (decision record 0026 §3).
 */
export function searchBands(tsquery: string, tags: readonly number[]): string[] {
  const all = allWordsQuery(tsquery);
  if (all === tsquery) return tierBands(tsquery, tags, null);
  const first = tierBands(all, tags, null);
  return [...first, ...tierBands(tsquery, tags, keysQuery(all, tags, 1))];
}

/** Tier bands of one query, each also without the pages of `taken` (the bands run before them). */
function tierBands(tsquery: string, tags: readonly number[], taken: string | null): string[] {
  const bands: string[] = [];
  let above: string | null = null;
  for (const t of [...SEARCH_TIERS, 1]) {
    const band = keysQuery(tsquery, tags, t);
    const without = above !== null && taken !== null ? `(${above}) | (${taken})` : (above ?? taken);
    bands.push(without === null ? band : `(${band}) & !(${without})`);
    above = band;
  }
  return bands;
}

/** PostgreSQL text cannot hold NUL; the query loses it as the stored text did. */
const clean = (s: string) => (s.includes('\u0000') ? s.replaceAll('\u0000', '') : s);

interface ParsedQuery {
  /** The tsquery's text form. */
  q: string;
  /** The tags of the sources searched that hold indexed pages. */
  tags: number[];
}

/** Parses and checks the query, and finds the tags of the sources (none: nothing to search). */
async function parse(db: Db, query: string, sourceIds: readonly string[]): Promise<ParsedQuery> {
  const parsed = await sql<{ tree: string; q: string; tags: number[] }>`
    select querytree(q)::text as tree, q::text as q,
      array(select s.tag from ingestion_search_sources s where s.source_id = any(${sql.val([...sourceIds])}::text[]) order by s.tag) as tags
    from websearch_to_tsquery('english', ${clean(query)}) q`.execute(db);
  const { tree, q, tags } = parsed.rows[0]!;
  // querytree is what an index can search: empty without words, 'T' when every word is excluded (that would be a scan).
  if (tree === '') throw new SearchQueryError('no_words');
  if (tree === 'T') throw new SearchQueryError('only_excluded');
  return { q, tags };
}

/** The sources' tags in groups whose keys per band stay within SEARCH_MAX_KEYS. */
function tagGroups(q: string, tags: readonly number[]): number[][] {
  const words = Math.max(1, (q.match(TOKEN) ?? []).filter((m) => m.startsWith("'")).length);
  const size = Math.max(1, Math.floor(SEARCH_MAX_KEYS / words));
  const groups: number[][] = [];
  for (let i = 0; i < tags.length; i += size) groups.push(tags.slice(i, i + size));
  return groups;
}

/**
 * The ranking statement over one group of tags: candidates from the keys of those tags only (the grant filter, in the
 * index and on every candidate row), ts_rank on the pages, then the documents of the best, checked against the
 * granted source ids once more (decision record 0026 §4).
 */
function rankStatement(q: string, tags: readonly number[], sourceIds: readonly string[], limit: number): RawBuilder<PageHit> {
  // The candidates already match the query without word order (the keys are exact); a phrase is checked here.
  const phrase = PHRASE.test(q) ? sql`where p.tsv @@ ${q}::tsquery` : sql``;
  return sql<PageHit>`
    with best as (
      select p.document_id, p.page_no, ts_rank(p.tsv, ${q}::tsquery) as rank, p.text
      from gatehouse_search_candidates(${sql.val(searchBands(q, tags))}::tsquery[], ${sql.val([...tags])}::integer[], ${SEARCH_CANDIDATES}) c
      join ingestion_document_pages p on p.document_id = c.document_id and p.page_no = c.page_no
      ${phrase}
      order by rank desc, p.document_id, p.page_no
      limit ${limit})
    select d.source_id, d.id as document_id, d.path, b.page_no, b.rank, b.text, d.classification
    from best b join ingestion_documents d on d.id = b.document_id
    where d.source_id = any(${sql.val([...sourceIds])}::text[])
    order by b.rank desc, d.id, b.page_no`;
}

const byRank = (a: PageHit, b: PageHit) => b.rank - a.rank || a.document_id - b.document_id || a.page_no - b.page_no;

/**
 * Full-text search over pages of the given sources (websearch syntax: words, "phrases", -not, or), best first.
 * An empty source list finds nothing: callers pass only the sources the identity may read; the filter is applied in
 * the index and on every row before any limit. Throws SearchQueryError for a query that names no word to find.
 */
export async function searchPages(db: Db, query: string, sourceIds: readonly string[], limit: number): Promise<PageHit[]> {
  const { q, tags } = await parse(db, query, sourceIds);
  const hits: PageHit[] = [];
  for (const group of tagGroups(q, tags)) hits.push(...(await rankStatement(q, group, sourceIds, limit).execute(db)).rows);
  return hits.sort(byRank).slice(0, limit);
}

/** The search of the first group of sources (null: no source holds pages), parsed and checked but not run; bench:ingest explains it. */
export async function searchStatement(
  db: Db,
  query: string,
  sourceIds: readonly string[],
  limit: number,
): Promise<{ statement: RawBuilder<PageHit>; bands: string[]; tags: number[] } | null> {
  const { q, tags } = await parse(db, query, sourceIds);
  const group = tagGroups(q, tags)[0];
  return group ? { statement: rankStatement(q, group, sourceIds, limit), bands: searchBands(q, group), tags: group } : null;
}
