// One source sync, however it was asked for — the admin API, the console's "Sync now", or a worker's schedule (docs/ingestion.md "Sync", "Scheduled sync"; decision record 0025): enumerate, queue, record the run.
import type { Services } from '../runtime/services.js';
import type { DataSource, JsonObject, SyncRun } from '../store/schema.js';
import { finishRun } from '../store/repos/sync-runs.js';
import { IngestionError } from './errors.js';
import { ingestionRuntimeFor } from './runtime.js';
import { applySync, listHttpAssets, walkFiles, type Asset, type SyncResult } from './sync.js';

/** Assets listed by an HTTP index at most (a sync is bounded work). */
const MAX_HTTP_ASSETS = 100_000;

/** The source's documents: a directory walk for `files`, the operator-named index for `http`. */
export async function enumerateAssets(services: Services, source: DataSource, signal: AbortSignal): Promise<Asset[]> {
  const { config } = services;
  if (source.source_type === 'files') return walkFiles(source, config.ingestion.files_roots, signal);
  if (source.source_type === 'http') {
    const { egress } = await ingestionRuntimeFor(services);
    return listHttpAssets(
      source,
      {
        egress,
        resolveSecret: services.resolveSecretRef,
        filesRoots: config.ingestion.files_roots,
        maxBytes: config.ingestion.max_document_bytes,
        timeoutMs: config.gateway.timeouts.upstream_request_ms,
        signal,
      },
      MAX_HTTP_ASSETS,
    );
  }
  throw new IngestionError('source_unusable', `a ${source.source_type} source holds no documents`);
}

/** Why a sync stopped: an IngestionError (safe text), the sync timeout, or anything else (logged, never stored). */
export class SyncFailure extends Error {
  constructor(
    readonly reason: IngestionError | 'timed_out' | 'interrupted' | 'internal',
    readonly recorded: string,
    opts?: { cause?: unknown },
  ) {
    super(recorded, opts);
    this.name = 'SyncFailure';
  }
}

/**
 * Runs the sync `run` stands for (already recorded as running) under `ingestion.sync.timeout_seconds`, records its
 * result or its error, and answers the result; a failure is recorded first, then thrown as a SyncFailure.
 */
export async function runSync(services: Services, source: DataSource, run: SyncRun, stop?: AbortSignal): Promise<SyncResult> {
  const timeoutSeconds = services.config.ingestion.sync.timeout_seconds;
  const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
  const signal = stop ? AbortSignal.any([timeout, stop]) : timeout;
  let result: SyncResult;
  try {
    const assets = await enumerateAssets(services, source, signal);
    signal.throwIfAborted();
    result = await applySync(services.db, source, assets);
  } catch (err) {
    const failure =
      err instanceof IngestionError
        ? new SyncFailure(err, err.message, { cause: err })
        : stop?.aborted
          ? new SyncFailure('interrupted', 'interrupted: the worker stopped during the sync; the next period runs as planned', { cause: err })
          : signal.aborted
          ? new SyncFailure('timed_out', `timed_out: the sync ran longer than ingestion.sync.timeout_seconds (${timeoutSeconds} s)`, { cause: err })
          : new SyncFailure('internal', 'internal: an internal error stopped the sync (details in the log)', { cause: err });
    if (failure.reason === 'internal') services.log.error({ err, source_id: source.source_id, run_id: run.id }, 'source sync failed unexpectedly');
    await finishRun(services.db, run, { status: 'failed', error: failure.recorded });
    throw failure;
  }
  await finishRun(services.db, run, { status: 'succeeded', result: { ...result } as JsonObject });
  return result;
}
