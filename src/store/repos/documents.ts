// Ingested documents and their pages (docs/ingestion.md "Documents"): replace on re-ingestion, page ranges for reading (search: document-search.ts).
import { sql } from 'kysely';
import type { IngestionDocument, JsonObject, JsonValue } from '../schema.js';
import { guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'document';
/** Rows per INSERT of pages: well under PostgreSQL's 65,535 bind parameters. */
const PAGE_BATCH = 1_000;

export interface DocumentInput {
  source_id: string;
  path: string;
  job_id: number | null;
  /** The catalog asset serving the document (src/ingestion/catalog-link.ts), null when the catalog has none. */
  catalog_asset_id: string | null;
  content_type: string;
  byte_size: number;
  sha256: string;
  asset_version: string | null;
  page_count: number;
  ocr_pages: number;
  classification: JsonObject;
  extract_chars: number;
  extract_truncated: boolean;
  notes: JsonValue[];
}

export interface PageInput {
  page_no: number;
  text: string;
  ocr: boolean;
}

/** PostgreSQL text cannot hold NUL. */
const clean = (s: string) => (s.includes('\u0000') ? s.replaceAll('\u0000', '') : s);

/** Writes the document and replaces its pages, in one transaction: readers see the old or the new version, never a mix. */
export function saveDocument(db: Db, doc: DocumentInput, pages: readonly PageInput[]): Promise<IngestionDocument> {
  return guard(RESOURCE, () =>
    db.transaction().execute(async (tx) => {
      const values = { ...doc, classification: json(doc.classification), notes: json(doc.notes) };
      const row = await tx
        .insertInto('ingestion_documents')
        .values(values)
        .onConflict((oc) => oc.columns(['source_id', 'path']).doUpdateSet({ ...values, updated_at: sql`now()` }))
        .returningAll()
        .executeTakeFirstOrThrow();
      await tx.deleteFrom('ingestion_document_pages').where('document_id', '=', row.id).execute();
      for (let i = 0; i < pages.length; i += PAGE_BATCH) {
        const batch = pages.slice(i, i + PAGE_BATCH).map((p) => ({ document_id: row.id, page_no: p.page_no, text: clean(p.text), ocr: p.ocr }));
        await tx.insertInto('ingestion_document_pages').values(batch).execute();
      }
      return row;
    }),
  );
}

export function getDocument(db: Db, sourceId: string, path: string): Promise<IngestionDocument | undefined> {
  return db.selectFrom('ingestion_documents').selectAll().where('source_id', '=', sourceId).where('path', '=', path).executeTakeFirst();
}

/** Records a re-fetch that found the same bytes (sha256): the stored extract stays; the catalog link is refreshed. */
export async function touchDocument(db: Db, id: number, jobId: number, assetVersion: string | null, catalogAssetId: string | null): Promise<void> {
  await db.updateTable('ingestion_documents').set({ job_id: jobId, asset_version: assetVersion, catalog_asset_id: catalogAssetId, updated_at: sql`now()` }).where('id', '=', id).execute();
}

export function listDocuments(db: Db, sourceId: string, opts: { limit: number; afterId?: number | undefined }): Promise<IngestionDocument[]> {
  let q = db.selectFrom('ingestion_documents').selectAll().where('source_id', '=', sourceId).orderBy('id').limit(opts.limit);
  if (opts.afterId !== undefined) q = q.where('id', '>', opts.afterId);
  return q.execute();
}

export function readPages(db: Db, documentId: number, from: number, to: number): Promise<Array<{ page_no: number; text: string; ocr: boolean }>> {
  return db
    .selectFrom('ingestion_document_pages')
    .select(['page_no', 'text', 'ocr'])
    .where('document_id', '=', documentId)
    .where('page_no', '>=', from)
    .where('page_no', '<=', to)
    .orderBy('page_no')
    .execute();
}
