// One ingestion job through its stages — fetch → extract → classify → index (docs/ingestion.md "Stages") — reporting stage and progress to the runner.
import type { Config } from '../config/index.js';
import type { IngestionRuntime } from './runtime.js';
import type { PiiScanner } from '../governance/pii/index.js';
import type { SecretResolver } from '../connectors/types.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { getDocument, saveDocument, touchDocument } from '../store/repos/documents.js';
import type { Outcome, Progress } from '../store/repos/ingestion-jobs.js';
import type { IngestionJob, JsonObject } from '../store/schema.js';
import type { Db } from '../store/repos/util.js';
import { IngestionError } from './errors.js';
import { fetchDocument } from './fetch.js';
import { sniff } from './sniff.js';
import { extract, type ExtractedPage } from './extract/index.js';
import { catalogAssetOf } from './catalog-link.js';

export interface IngestionDeps {
  db: Db;
  /** Built on first use (egress pools, scanner), shared with sync and the document tools of the process. */
  runtime: Promise<IngestionRuntime>;
  resolveSecret: SecretResolver;
  config: Readonly<Config['ingestion']>;
  /** Bound of one upstream exchange (gateway.timeouts.upstream_request_ms). */
  upstreamTimeoutMs: number;
}

export interface JobContext {
  signal: AbortSignal;
  /** Records stage and progress; the runner writes them with the next lease renewal (a stage change at once). */
  progress(p: Progress): void;
}

/** What the personal-data scanner found: which detectors, how many values, on which pages (docs/ingestion.md "Classification"). */
export function classifyPages(pii: PiiScanner, pages: readonly ExtractedPage[]): JsonObject {
  const detectors: Record<string, { count: number; pages: number[] }> = {};
  let values = 0;
  for (const page of pages) {
    for (const m of pii.detect(page.text, 'deep')) {
      const d = (detectors[m.type] ??= { count: 0, pages: [] });
      d.count++;
      values++;
      if (d.pages[d.pages.length - 1] !== page.no) d.pages.push(page.no);
    }
  }
  return { personal_data: values > 0, values, detectors: detectors as unknown as JsonObject };
}

export async function processJob(job: IngestionJob, ctx: JobContext, deps: IngestionDeps): Promise<Outcome> {
  const cfg = deps.config;
  const { egress, pii } = await deps.runtime;
  const source = await getDataSourceBySourceId(deps.db, job.source_id);
  if (!source) throw new IngestionError('source_unusable', 'the source no longer exists');
  if (!source.enabled) throw new IngestionError('source_unusable', 'the source is disabled', { retryable: true });

  ctx.progress({ stage: 'fetch' });
  const fetched = await fetchDocument(source, job.file_path, {
    egress,
    resolveSecret: deps.resolveSecret,
    filesRoots: cfg.files_roots,
    maxBytes: cfg.max_document_bytes,
    timeoutMs: deps.upstreamTimeoutMs,
    signal: ctx.signal,
  });

  // Same bytes as the stored document: nothing to extract again (change detection by hash, docs/ingestion.md "Sync").
  const existing = await getDocument(deps.db, source.source_id, job.file_path);
  const catalogAssetId = await catalogAssetOf(deps.db, source, job.file_path);
  if (existing && existing.sha256 === fetched.sha256) {
    await touchDocument(deps.db, existing.id, job.id, fetched.assetVersion, catalogAssetId);
    ctx.progress({ stage: 'index', progress_current: existing.page_count, progress_total: existing.page_count });
    return { ocr_pages: 0, ocr_cost: 0, llm_cost: 0, progress_current: existing.page_count, progress_total: existing.page_count };
  }

  ctx.progress({ stage: 'extract' });
  const sniffed = sniff(fetched.bytes, job.file_path, fetched.declaredType);
  if (!sniffed) throw new IngestionError('unsupported_type');
  const extracted = await extract(fetched.bytes, sniffed, {
    maxExtractChars: cfg.max_extract_chars,
    maxDecompressedBytes: cfg.max_decompressed_bytes,
    ocr: { enabled: cfg.ocr.enabled, language: cfg.ocr.language, pageTimeoutMs: cfg.ocr.page_timeout_seconds * 1000, maxPages: cfg.ocr.max_pages },
    signal: ctx.signal,
    onProgress: (current, total) => ctx.progress({ progress_current: current, progress_total: total }),
  });
  ctx.signal.throwIfAborted();

  ctx.progress({ stage: 'classify' });
  const classification = classifyPages(pii, extracted.pages);

  ctx.progress({ stage: 'index' });
  await saveDocument(
    deps.db,
    {
      source_id: source.source_id,
      path: job.file_path,
      job_id: job.id,
      catalog_asset_id: catalogAssetId,
      content_type: sniffed.contentType,
      byte_size: fetched.bytes.length,
      sha256: fetched.sha256,
      asset_version: fetched.assetVersion,
      page_count: extracted.pageCount,
      ocr_pages: extracted.ocrPages,
      classification,
      extract_chars: extracted.pages.reduce((n, p) => n + p.text.length, 0),
      extract_truncated: extracted.truncated,
      notes: extracted.notes,
    },
    extracted.pages.map((p) => ({ page_no: p.no, text: p.text, ocr: p.ocr })),
  );
  return {
    ocr_pages: extracted.ocrPages,
    ocr_cost: extracted.ocrPages * cfg.prices.ocr_per_page,
    // No language model runs during ingestion, so nothing is spent on one (docs/ingestion.md "Costs").
    llm_cost: 0,
    progress_current: extracted.pageCount,
    progress_total: extracted.pageCount,
  };
}
