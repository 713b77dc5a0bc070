// Migration 0019: the document search index (docs/decisions/0026-document-search.md) — a narrow row per page with its
// words (no positions) and its source as one GIN-indexed tsvector, and a tf-tiered tsvector of the words a page
// repeats, kept by triggers; the pages' own GIN index, which the search no longer reads, is dropped.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  // The page rows below name their document and its source together, so PostgreSQL keeps them equal (a source
  // renamed through data_sources cascades here and on): the search's source filter can never disagree with the grant.
  await sql`alter table ingestion_documents add constraint ingestion_documents_id_source_key unique (id, source_id)`.execute(db);

  // The source as a lexeme no text can produce (the parser never yields a space), so the GIN index applies the
  // source filter with the words; and the tiers: "word 2", "word 4" … "word 64" for a word a page holds at least that
  // often (decision record 0026 §2). Positions are dropped: the rows stay under the TOAST threshold.
  await sql`create function gatehouse_source_lexeme(source_id text) returns text
    language sql immutable parallel safe return ' source ' || source_id`.execute(db);
  await sql`create function gatehouse_page_terms(tsv tsvector, source_id text) returns tsvector
    language sql immutable parallel safe
    return strip(tsv) || array_to_tsvector(array[gatehouse_source_lexeme(source_id)])`.execute(db);
  await sql`create function gatehouse_page_tiers(tsv tsvector, source_id text) returns tsvector
    language sql immutable parallel safe
    return array_to_tsvector(array(
      select u.lexeme || ' ' || t from unnest(tsv) u, unnest('{2,4,8,16,32,64}'::int[]) t
      where cardinality(u.positions) >= t) || gatehouse_source_lexeme(source_id))`.execute(db);

  await sql`create table ingestion_page_terms (
    document_id bigint not null,
    page_no integer not null,
    source_id text not null,
    terms tsvector not null,
    tiers tsvector not null,
    primary key (document_id, page_no),
    foreign key (document_id, page_no) references ingestion_document_pages (document_id, page_no) on delete cascade,
    foreign key (document_id, source_id) references ingestion_documents (id, source_id) on delete cascade on update cascade
  )`.execute(db);

  // Pages are written by insert (a re-ingestion deletes and inserts): one statement-level trigger adds their rows.
  await sql`create function gatehouse_page_terms_insert() returns trigger language plpgsql as $$
    begin
      insert into ingestion_page_terms (document_id, page_no, source_id, terms, tiers)
      select n.document_id, n.page_no, d.source_id, gatehouse_page_terms(n.tsv, d.source_id), gatehouse_page_tiers(n.tsv, d.source_id)
      from added n join ingestion_documents d on d.id = n.document_id;
      return null;
    end $$`.execute(db);
  await sql`create trigger ingestion_page_terms_insert after insert on ingestion_document_pages
    referencing new table as added for each statement execute function gatehouse_page_terms_insert()`.execute(db);
  await sql`create function gatehouse_page_terms_update() returns trigger language plpgsql as $$
    begin
      update ingestion_page_terms t set terms = gatehouse_page_terms(new.tsv, t.source_id), tiers = gatehouse_page_tiers(new.tsv, t.source_id)
      where t.document_id = new.document_id and t.page_no = new.page_no;
      return null;
    end $$`.execute(db);
  await sql`create trigger ingestion_page_terms_update after update of text on ingestion_document_pages
    for each row when (old.text is distinct from new.text) execute function gatehouse_page_terms_update()`.execute(db);
  // A renamed source reaches these rows through the foreign key's cascade; its lexeme follows.
  await sql`create function gatehouse_page_terms_source() returns trigger language plpgsql as $$
    begin
      new.terms := ts_delete(new.terms, gatehouse_source_lexeme(old.source_id)) || array_to_tsvector(array[gatehouse_source_lexeme(new.source_id)]);
      new.tiers := ts_delete(new.tiers, gatehouse_source_lexeme(old.source_id)) || array_to_tsvector(array[gatehouse_source_lexeme(new.source_id)]);
      return new;
    end $$`.execute(db);
  await sql`create trigger ingestion_page_terms_source before update of source_id on ingestion_page_terms
    for each row when (old.source_id is distinct from new.source_id) execute function gatehouse_page_terms_source()`.execute(db);

  // Existing pages: one pass in this transaction. The trigger above already holds off concurrent page writes
  // (ingestion waits); reads and searches on the old code go on. Decision record 0026 §5 gives the measured time.
  await sql`insert into ingestion_page_terms (document_id, page_no, source_id, terms, tiers)
    select p.document_id, p.page_no, d.source_id, gatehouse_page_terms(p.tsv, d.source_id), gatehouse_page_tiers(p.tsv, d.source_id)
    from ingestion_document_pages p join ingestion_documents d on d.id = p.document_id`.execute(db);
  await sql`create index ingestion_page_terms_terms_idx on ingestion_page_terms using gin (terms)`.execute(db);
  await sql`create index ingestion_page_terms_tiers_idx on ingestion_page_terms using gin (tiers)`.execute(db);
  await sql`drop index if exists ingestion_document_pages_tsv_idx`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`create index if not exists ingestion_document_pages_tsv_idx on ingestion_document_pages using gin (tsv)`.execute(db);
  await dropPageTerms(db);
}

/** This migration's page terms with their functions, triggers and constraint (its down step; 0020 replaces them). */
export async function dropPageTerms(db: AnyDb): Promise<void> {
  await sql`drop trigger if exists ingestion_page_terms_update on ingestion_document_pages`.execute(db);
  await sql`drop trigger if exists ingestion_page_terms_insert on ingestion_document_pages`.execute(db);
  await sql`drop table if exists ingestion_page_terms`.execute(db);
  await sql`drop function if exists gatehouse_page_terms_source()`.execute(db);
  await sql`drop function if exists gatehouse_page_terms_update()`.execute(db);
  await sql`drop function if exists gatehouse_page_terms_insert()`.execute(db);
  await sql`drop function if exists gatehouse_page_tiers(tsvector, text)`.execute(db);
  await sql`drop function if exists gatehouse_page_terms(tsvector, text)`.execute(db);
  await sql`drop function if exists gatehouse_source_lexeme(text)`.execute(db);
  await sql`alter table ingestion_documents drop constraint if exists ingestion_documents_id_source_key`.execute(db);
}

export const documentSearch: Migration = { up, down };
