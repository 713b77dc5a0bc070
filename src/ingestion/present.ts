// The API views of ingestion resources: exactly the fields of spec §2 Ingestion job, WorkerStatus and WorkerHealth, and their zod response schemas.
import { z } from 'zod';
import type { IngestionDocument, IngestionJob, SyncRun, SyncSchedule } from '../store/schema.js';

const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);

/** Spec §2 Ingestion job response, every field; numbers as numbers, timestamps ISO 8601. */
export function presentJob(j: IngestionJob) {
  return {
    id: j.id,
    source_id: j.source_id,
    file_path: j.file_path,
    status: j.status,
    completed_at: iso(j.completed_at),
    created_at: iso(j.created_at),
    last_error_at: iso(j.last_error_at),
    lease_expires_at: iso(j.lease_expires_at),
    started_at: iso(j.started_at),
    updated_at: iso(j.updated_at),
    error_message: j.error_message,
    llm_cost: j.llm_cost,
    ocr_cost: j.ocr_cost,
    ocr_pages: j.ocr_pages,
    priority_score: j.priority_score,
    progress_current: j.progress_current,
    progress_total: j.progress_total,
    retry_count: j.retry_count,
    stage: j.stage,
    worker_id: j.worker_id,
    metadata: j.metadata,
  };
}

const ts = z.string().nullable();
export const jobResponse = z.object({
  id: z.number().int(),
  source_id: z.string(),
  file_path: z.string(),
  status: z.enum(['pending', 'running', 'completed', 'failed', 'cancelled']),
  completed_at: ts,
  created_at: ts,
  last_error_at: ts,
  lease_expires_at: ts,
  started_at: ts,
  updated_at: ts,
  error_message: z.string().nullable(),
  llm_cost: z.number().default(0),
  ocr_cost: z.number().default(0),
  ocr_pages: z.number().int().default(0),
  priority_score: z.number().default(0),
  progress_current: z.number().int().default(0),
  progress_total: z.number().int().nullable(),
  retry_count: z.number().int().default(0),
  stage: z.string().nullable(),
  worker_id: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()),
});

export const jobPageResponse = z.object({ items: z.array(jobResponse), next_cursor: z.string().nullable() });

/** Spec §2 WorkerStatus: last_heartbeat as Unix seconds (the spec's `number`). */
export const workerStatusResponse = z.object({
  worker_id: z.string(),
  last_heartbeat: z.number(),
  metadata: z.record(z.string(), z.unknown()),
  stale: z.boolean().default(false),
});

/** Spec §2 WorkerHealth. */
export const workerHealthResponse = z.object({
  worker_id: z.string(),
  alive: z.boolean(),
  last_heartbeat: z.number().nullable(),
  stale_jobs_failed: z.number().int().default(0),
});

/** Spec §2 Source sync result. */
export const syncResultResponse = z.object({
  source_id: z.string(),
  connector_key: z.string(),
  assets_seen: z.number().int(),
  jobs_created: z.number().int(),
  jobs_requeued: z.number().int().default(0),
});

export function unixSeconds(d: Date): number {
  return d.getTime() / 1000;
}

/** An ingested document as the admin API shows it (docs/ingestion.md "Documents API"): never its text. */
export function presentDocument(d: IngestionDocument) {
  return {
    id: d.id,
    source_id: d.source_id,
    path: d.path,
    catalog_asset_id: d.catalog_asset_id,
    job_id: d.job_id,
    content_type: d.content_type,
    byte_size: d.byte_size,
    sha256: d.sha256,
    page_count: d.page_count,
    ocr_pages: d.ocr_pages,
    classification: d.classification,
    extract_truncated: d.extract_truncated,
    notes: d.notes,
    created_at: d.created_at.toISOString(),
    updated_at: d.updated_at.toISOString(),
  };
}

export const documentResponse = z.object({
  id: z.number().int(),
  source_id: z.string(),
  path: z.string(),
  catalog_asset_id: z.string().nullable(),
  job_id: z.number().int().nullable(),
  content_type: z.string(),
  byte_size: z.number().int(),
  sha256: z.string(),
  page_count: z.number().int(),
  ocr_pages: z.number().int(),
  classification: z.record(z.string(), z.unknown()),
  extract_truncated: z.boolean(),
  notes: z.array(z.unknown()),
  created_at: z.string(),
  updated_at: z.string(),
});
export const documentPageResponse = z.object({ items: z.array(documentResponse), next_cursor: z.string().nullable() });

/** A sync run as the admin API shows it (docs/ingestion.md "Scheduled sync"). */
export function presentSyncRun(r: SyncRun) {
  return {
    id: r.id,
    source_id: r.source_id,
    trigger: r.trigger,
    scheduled_for: r.scheduled_for?.toISOString() ?? null,
    worker_id: r.worker_id,
    status: r.status,
    started_at: r.started_at.toISOString(),
    finished_at: r.finished_at?.toISOString() ?? null,
    error_message: r.error_message,
    result: r.result as z.infer<typeof syncResultResponse> | null,
  };
}

export const syncRunResponse = z.object({
  id: z.number().int(),
  source_id: z.string(),
  trigger: z.enum(['schedule', 'manual']),
  scheduled_for: z.string().nullable(),
  worker_id: z.string().nullable(),
  status: z.enum(['running', 'succeeded', 'failed']),
  started_at: z.string(),
  finished_at: z.string().nullable(),
  error_message: z.string().nullable(),
  result: syncResultResponse.nullable(),
});
export const syncRunPageResponse = z.object({ items: z.array(syncRunResponse), next_cursor: z.string().nullable() });

export function presentSchedule(s: SyncSchedule) {
  return {
    interval_seconds: s.interval_seconds,
    enabled: s.enabled,
    next_sync_at: s.next_sync_at.toISOString(),
    created_at: s.created_at.toISOString(),
    updated_at: s.updated_at.toISOString(),
  };
}

export const scheduleResponse = z.object({
  interval_seconds: z.number().int(),
  enabled: z.boolean(),
  next_sync_at: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** A source's sync state: its schedule (null when it has none) and its newest run. */
export const syncStatusResponse = z.object({
  source_id: z.string(),
  connector_key: z.string(),
  schedule: scheduleResponse.nullable(),
  last_run: syncRunResponse.nullable(),
});
