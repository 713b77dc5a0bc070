// Ingestion jobs (spec §2 Ingestion job): create, keyset list, operator transitions, and the runner's lease protocol (claim, renew, finish, sweep).
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { IngestionJob, IngestionJobStatus, JsonObject } from '../schema.js';
import { guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'ingestion job';

export interface NewJobInput {
  source_id: string;
  file_path: string;
  priority_score?: number;
  metadata?: JsonObject;
  asset_version?: string | null;
}

export function createJob(db: Db, input: NewJobInput): Promise<IngestionJob> {
  return guard(RESOURCE, () =>
    db
      .insertInto('ingestion_jobs')
      .values({
        source_id: input.source_id,
        file_path: input.file_path,
        priority_score: input.priority_score ?? 0,
        metadata: json(input.metadata ?? {}),
        asset_version: input.asset_version ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
}

export function getJob(db: Db, id: number): Promise<IngestionJob | undefined> {
  return db.selectFrom('ingestion_jobs').selectAll().where('id', '=', id).executeTakeFirst();
}

export function getJobByPath(db: Db, sourceId: string, filePath: string): Promise<IngestionJob | undefined> {
  return db.selectFrom('ingestion_jobs').selectAll().where('source_id', '=', sourceId).where('file_path', '=', filePath).executeTakeFirst();
}

export interface JobFilters {
  status?: IngestionJobStatus | undefined;
  source_id?: string | undefined;
  worker_id?: string | undefined;
  /** Keyset position: only jobs with a smaller id (newest first). */
  before_id?: number | undefined;
  limit: number;
}

/** One page, newest first; `next` is the keyset position of the following page or null. */
export async function listJobs(db: Db, f: JobFilters): Promise<{ items: IngestionJob[]; next: number | null }> {
  let q = db.selectFrom('ingestion_jobs').selectAll().orderBy('id', 'desc').limit(f.limit + 1);
  if (f.status) q = q.where('status', '=', f.status);
  if (f.source_id) q = q.where('source_id', '=', f.source_id);
  if (f.worker_id) q = q.where('worker_id', '=', f.worker_id);
  if (f.before_id !== undefined) q = q.where('id', '<', f.before_id);
  const rows = await q.execute();
  const more = rows.length > f.limit;
  const items = more ? rows.slice(0, f.limit) : rows;
  return { items, next: more ? items[items.length - 1]!.id : null };
}

/** Conditional transition: the update applies only from one of `from`; undefined when the job was elsewhere (or gone). */
function transition(db: Db, id: number, from: readonly IngestionJobStatus[], set: Record<string, unknown>): Promise<IngestionJob | undefined> {
  return guard(RESOURCE, () =>
    db
      .updateTable('ingestion_jobs')
      .set({ ...set, updated_at: sql`now()` } as never)
      .where('id', '=', id)
      .where('status', 'in', [...from])
      .returningAll()
      .executeTakeFirst(),
  );
}

export function cancelJob(db: Db, id: number, from: readonly IngestionJobStatus[]): Promise<IngestionJob | undefined> {
  return transition(db, id, from, { status: 'cancelled', completed_at: sql`now()`, lease_expires_at: null, lease_token: null, run_after: null });
}

/** Back to pending with a fresh retry budget; the last error stays for the record. */
export function retryJob(db: Db, id: number, from: readonly IngestionJobStatus[]): Promise<IngestionJob | undefined> {
  return transition(db, id, from, requeueSet());
}

export function setJobPriority(db: Db, id: number, from: readonly IngestionJobStatus[], priority: number): Promise<IngestionJob | undefined> {
  return transition(db, id, from, { priority_score: priority });
}

/** The columns of a job put back in the queue by an operator or a sync. */
export function requeueSet(assetVersion?: string | null): Record<string, unknown> {
  return {
    status: 'pending',
    retry_count: 0,
    run_after: null,
    worker_id: null,
    lease_token: null,
    lease_expires_at: null,
    stage: null,
    progress_current: 0,
    progress_total: null,
    started_at: null,
    completed_at: null,
    ...(assetVersion !== undefined ? { asset_version: assetVersion } : {}),
  };
}

export function requeueJob(db: Db, id: number, from: readonly IngestionJobStatus[], assetVersion?: string | null): Promise<IngestionJob | undefined> {
  return transition(db, id, from, requeueSet(assetVersion));
}

// ---------------------------------------------------------------------------------------------
// The runner's lease protocol (docs/ingestion.md "Runner")

export interface Claim {
  job: IngestionJob;
  token: string;
}

/**
 * Claims the best runnable job — highest priority, then oldest — for `leaseSeconds`. SKIP LOCKED lets concurrent
 * claimers pass over a row another transaction is taking, so two workers never claim the same job.
 */
export async function claimJob(db: Db, workerId: string, leaseSeconds: number): Promise<Claim | null> {
  const token = randomUUID();
  const row = await guard(RESOURCE, () =>
    sql<IngestionJob>`
      update ingestion_jobs j set
        status = 'running', worker_id = ${workerId}, lease_token = ${token},
        lease_expires_at = now() + make_interval(secs => ${leaseSeconds}),
        started_at = now(), completed_at = null, stage = 'queued', progress_current = 0, progress_total = null,
        run_after = null, updated_at = now()
      where j.id = (
        select id from ingestion_jobs
        where status = 'pending' and (run_after is null or run_after <= now())
        order by priority_score desc, created_at, id
        for update skip locked
        limit 1
      ) and j.status = 'pending'
      returning j.*`.execute(db),
  );
  const job = row.rows[0];
  return job ? { job, token } : null;
}

export interface Progress {
  stage?: string;
  progress_current?: number;
  progress_total?: number | null;
}

/**
 * Extends the lease and records progress, only while this claim still holds the job. False when it does not
 * (cancelled, or the lease expired and the sweep took the job back): the worker must stop.
 */
export async function renewLease(db: Db, id: number, token: string, leaseSeconds: number, progress: Progress = {}): Promise<boolean> {
  const r = await db
    .updateTable('ingestion_jobs')
    .set({
      lease_expires_at: sql`now() + make_interval(secs => ${leaseSeconds})`,
      updated_at: sql`now()`,
      ...(progress.stage !== undefined ? { stage: progress.stage } : {}),
      ...(progress.progress_current !== undefined ? { progress_current: progress.progress_current } : {}),
      ...(progress.progress_total !== undefined ? { progress_total: progress.progress_total } : {}),
    })
    .where('id', '=', id)
    .where('lease_token', '=', token)
    .where('status', '=', 'running')
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

export interface Outcome {
  llm_cost?: number;
  ocr_cost?: number;
  ocr_pages?: number;
  progress_current?: number;
  progress_total?: number | null;
}

/** Marks the claimed job completed; false when the claim was lost meanwhile (nothing is written then). */
export async function completeJob(db: Db, id: number, token: string, outcome: Outcome): Promise<boolean> {
  const r = await db
    .updateTable('ingestion_jobs')
    .set({
      status: 'completed',
      stage: 'done',
      completed_at: sql`now()`,
      updated_at: sql`now()`,
      lease_expires_at: null,
      lease_token: null,
      error_message: null,
      ...(outcome as Record<string, number>),
    })
    .where('id', '=', id)
    .where('lease_token', '=', token)
    .where('status', '=', 'running')
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

export interface FailureInput {
  message: string;
  /** Retryable failures go back to pending after the backoff while retries remain. */
  retryable: boolean;
  maxRetries: number;
  backoffSeconds: number;
  outcome?: Outcome;
}

/** Records a failed attempt of the claimed job: requeued with backoff or failed; null when the claim was lost. */
export async function failJob(db: Db, id: number, token: string, f: FailureInput): Promise<IngestionJobStatus | null> {
  const requeue = f.retryable;
  const r = await sql<{ status: IngestionJobStatus }>`
    update ingestion_jobs set
      status = case when ${requeue} and retry_count < ${f.maxRetries} then 'pending' else 'failed' end,
      retry_count = case when ${requeue} and retry_count < ${f.maxRetries} then retry_count + 1 else retry_count end,
      run_after = case when ${requeue} and retry_count < ${f.maxRetries} then now() + make_interval(secs => ${f.backoffSeconds}) else null end,
      completed_at = case when ${requeue} and retry_count < ${f.maxRetries} then null else now() end,
      error_message = ${f.message}, last_error_at = now(), updated_at = now(),
      lease_expires_at = null, lease_token = null,
      ocr_pages = ${f.outcome?.ocr_pages ?? 0}, ocr_cost = ${f.outcome?.ocr_cost ?? 0}, llm_cost = ${f.outcome?.llm_cost ?? 0}
    where id = ${id} and lease_token = ${token} and status = 'running'
    returning status`.execute(db);
  return r.rows[0]?.status ?? null;
}

export interface SweepResult {
  /** Jobs taken back per worker id. */
  byWorker: Map<string, number>;
  requeued: number;
  failed: number;
}

/**
 * Takes back running jobs whose lease expired or whose worker is stale (docs/ingestion.md "Stale workers"):
 * requeued with backoff while retries remain, failed otherwise; counted on the worker's stale_jobs_failed.
 */
export async function sweepStaleJobs(db: Db, opts: { staleAfterSeconds: number; maxRetries: number; backoffBaseSeconds: number; backoffMaxSeconds: number }): Promise<SweepResult> {
  return db.transaction().execute(async (tx) => {
    const r = await sql<{ worker_id: string | null; status: IngestionJobStatus }>`
      with taken as (
        select j.id, j.worker_id, j.retry_count from ingestion_jobs j
        left join workers w on w.worker_id = j.worker_id
        where j.status = 'running'
          and (j.lease_expires_at < now() or w.worker_id is null or w.last_heartbeat < now() - make_interval(secs => ${opts.staleAfterSeconds}))
        for update of j skip locked
      )
      update ingestion_jobs j set
        status = case when t.retry_count < ${opts.maxRetries} then 'pending' else 'failed' end,
        retry_count = case when t.retry_count < ${opts.maxRetries} then t.retry_count + 1 else t.retry_count end,
        run_after = case when t.retry_count < ${opts.maxRetries}
          then now() + make_interval(secs => least(${opts.backoffMaxSeconds}::float8, ${opts.backoffBaseSeconds}::float8 * power(2, least(t.retry_count, 30)))) else null end,
        completed_at = case when t.retry_count < ${opts.maxRetries} then null else now() end,
        error_message = 'worker ' || coalesce(t.worker_id, '?') || ' stopped renewing its lease (stale or gone)',
        last_error_at = now(), updated_at = now(), lease_expires_at = null, lease_token = null
      from taken t where j.id = t.id
      returning t.worker_id, j.status`.execute(tx);
    const byWorker = new Map<string, number>();
    let requeued = 0;
    let failed = 0;
    for (const row of r.rows) {
      if (row.status === 'pending') requeued++;
      else failed++;
      if (row.worker_id) byWorker.set(row.worker_id, (byWorker.get(row.worker_id) ?? 0) + 1);
    }
    for (const [workerId, n] of byWorker) {
      await tx
        .updateTable('workers')
        .set({ stale_jobs_failed: sql`stale_jobs_failed + ${n}`, stale_since: sql`coalesce(stale_since, now())` })
        .where('worker_id', '=', workerId)
        .execute();
    }
    return { byWorker, requeued, failed };
  });
}

/** Jobs a worker holds right now (its heartbeat metadata reports the count). */
export async function runningJobsOf(db: Db, workerId: string): Promise<number> {
  const r = await db.selectFrom('ingestion_jobs').select((eb) => eb.fn.countAll<number>().as('n')).where('worker_id', '=', workerId).where('status', '=', 'running').executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Hands a claimed job back untouched (graceful shutdown): pending again at once, no retry counted. */
export async function releaseJob(db: Db, id: number, token: string): Promise<boolean> {
  const r = await db
    .updateTable('ingestion_jobs')
    .set({ status: 'pending', worker_id: null, lease_token: null, lease_expires_at: null, stage: null, updated_at: sql`now()` })
    .where('id', '=', id)
    .where('lease_token', '=', token)
    .where('status', '=', 'running')
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}
