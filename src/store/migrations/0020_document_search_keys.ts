// Migration 0020: document search keys per source (docs/decisions/0026-document-search.md §5) — each page's words and
// tf tiers as lexemes of its source's tag ("<tag> <word> <tier>") in one GIN index, so no lexeme is shared by most pages;
// replaces 0019's page terms, whose source lexeme made every search walk its whole posting tree once the tree's first
// page emptied.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';
import { documentSearch, dropPageTerms } from './0019_document_search.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * The tf tiers above 1 (decision record 0026 §5): a page holding a word t times or more carries "<tag> <word> t" for
 * each t here up to its count. Exact at the low counts where most ranks are decided, then coarser. The search module
 * (SEARCH_TIERS) must list the same values.
 */
const KEY_TIERS = [2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64] as const;

async function up(db: AnyDb): Promise<void> {
  // 0019's page terms go first (its down step, minus the index on the pages' own tsv, which no search reads).
  await dropPageTerms(db);

  // A source's tag: a number that names it in the keys. A rename cascades here and leaves every key as it is; a source
  // deleted takes its tag and (through its documents) its keys with it, and one created again under the name gets a new tag.
  await sql`create table ingestion_search_sources (
    tag integer generated always as identity primary key,
    source_id text not null unique references data_sources (source_id) on delete cascade on update cascade
  )`.execute(db);

  // "<tag> <word> 1" for every word of the page, and "<tag> <word> <t>" for each tier t the word's count reaches.
  // The parser never yields a space inside a word, so no key of one source or tier can equal another's.
  const tiers = `{${KEY_TIERS.join(',')}}`;
  await sql`create function gatehouse_page_keys(tsv tsvector, tag integer) returns tsvector
    language sql immutable parallel safe
    return array_to_tsvector(
      array(select tag || ' ' || w || ' 1' from unnest(tsvector_to_array(tsv)) w)
      || array(select tag || ' ' || u.lexeme || ' ' || t
        from unnest(tsv) u, unnest((${sql.lit(tiers)}::int[])[1:width_bucket(cardinality(u.positions), ${sql.lit(tiers)}::int[])]) t
        where cardinality(u.positions) > 1))`.execute(db);

  await sql`create table ingestion_page_keys (
    document_id bigint not null,
    page_no integer not null,
    source_tag integer not null references ingestion_search_sources (tag) on delete cascade,
    keys tsvector not null,
    primary key (document_id, page_no),
    foreign key (document_id, page_no) references ingestion_document_pages (document_id, page_no) on delete cascade
  )`.execute(db);
  // The keys are only read by the index: no compression attempt on a value that hardly compresses.
  await sql`alter table ingestion_page_keys alter column keys set storage external`.execute(db);
  // Ranking reads each candidate page's tsvector: kept in the page's row (moved out only past a heap page), a
  // candidate costs one heap read instead of a TOAST index lookup and two chunks (decision record 0026 §3). Applies to
  // pages written from now on; a re-ingested document gets it.
  await sql`alter table ingestion_document_pages alter column tsv set storage main`.execute(db);

  // Pages are written by insert (a re-ingestion deletes and inserts): one statement-level trigger tags their source
  // (once) and adds their keys. The tag is inserted only when missing, so the identity does not advance per statement.
  await sql`create function gatehouse_page_keys_insert() returns trigger language plpgsql as $$
    begin
      insert into ingestion_search_sources (source_id)
      select distinct d.source_id from added n join ingestion_documents d on d.id = n.document_id
      where not exists (select 1 from ingestion_search_sources s where s.source_id = d.source_id)
      on conflict (source_id) do nothing;
      insert into ingestion_page_keys (document_id, page_no, source_tag, keys)
      select n.document_id, n.page_no, s.tag, gatehouse_page_keys(n.tsv, s.tag)
      from added n join ingestion_documents d on d.id = n.document_id join ingestion_search_sources s on s.source_id = d.source_id;
      return null;
    end $$`.execute(db);
  await sql`create trigger ingestion_page_keys_insert after insert on ingestion_document_pages
    referencing new table as added for each statement execute function gatehouse_page_keys_insert()`.execute(db);
  await sql`create function gatehouse_page_keys_update() returns trigger language plpgsql as $$
    begin
      update ingestion_page_keys k set keys = gatehouse_page_keys(new.tsv, k.source_tag)
      where k.document_id = new.document_id and k.page_no = new.page_no;
      return null;
    end $$`.execute(db);
  await sql`create trigger ingestion_page_keys_update after update of text on ingestion_document_pages
    for each row when (old.text is distinct from new.text) execute function gatehouse_page_keys_update()`.execute(db);

  // The candidates of a search: the bands in order (each a tsquery over the keys, decision record 0026 §5), rows of
  // the given tags only, until `wanted` rows. Only bitmap scans of the keys index (a sequential scan would read every
  // page's keys), planned once per session.
  await sql`create function gatehouse_search_candidates(bands tsquery[], tags integer[], wanted integer)
    returns table (document_id bigint, page_no integer)
    language plpgsql stable rows 400
    set enable_seqscan = off set plan_cache_mode = force_generic_plan
    as $$
    declare
      band tsquery;
      taken bigint := 0;
      n bigint;
    begin
      foreach band in array bands loop
        return query select k.document_id, k.page_no from ingestion_page_keys k
          where k.keys @@ band and k.source_tag = any(tags) limit wanted - taken;
        get diagnostics n = row_count;
        taken := taken + n;
        exit when taken >= wanted;
      end loop;
    end $$`.execute(db);

  // Existing pages: one pass in this transaction (the insert trigger above already holds off concurrent page writes;
  // searches on the old code go on), then the index. Decision record 0026 §5 gives the measured time.
  await sql`insert into ingestion_search_sources (source_id) select distinct source_id from ingestion_documents`.execute(db);
  await sql`insert into ingestion_page_keys (document_id, page_no, source_tag, keys)
    select p.document_id, p.page_no, s.tag, gatehouse_page_keys(p.tsv, s.tag)
    from ingestion_document_pages p join ingestion_documents d on d.id = p.document_id
    join ingestion_search_sources s on s.source_id = d.source_id`.execute(db);
  // A search scans the whole pending list once per band: 256 kB of it at most (decision record 0026 §6).
  await sql`create index ingestion_page_keys_keys_idx on ingestion_page_keys using gin (keys) with (gin_pending_list_limit = 256)`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`drop trigger if exists ingestion_page_keys_update on ingestion_document_pages`.execute(db);
  await sql`drop trigger if exists ingestion_page_keys_insert on ingestion_document_pages`.execute(db);
  await sql`drop function if exists gatehouse_search_candidates(tsquery[], integer[], integer)`.execute(db);
  await sql`drop table if exists ingestion_page_keys`.execute(db);
  await sql`drop table if exists ingestion_search_sources`.execute(db);
  await sql`drop function if exists gatehouse_page_keys_update()`.execute(db);
  await sql`drop function if exists gatehouse_page_keys_insert()`.execute(db);
  await sql`drop function if exists gatehouse_page_keys(tsvector, integer)`.execute(db);
  await sql`alter table ingestion_document_pages alter column tsv set storage extended`.execute(db);
  // Back to 0019's page terms, filled from the pages as 0019 did.
  await documentSearch.up(db);
}

export const documentSearchKeys: Migration = { up, down };
