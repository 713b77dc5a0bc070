// Source sync on the admin API (spec §2 Source sync result, docs/ingestion.md "Sync" and "Scheduled sync"): run a sync now, read a source's sync state and runs, set or remove its schedule.
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AdminModuleContext } from '../admin/module.js';
import { requirePermission } from '../admin/auth/principal.js';
import { audit, notFound } from '../admin/api/shared.js';
import { sourceParams } from '../admin/api/data-sources.js';
import { GatehouseError } from '../errors/registry.js';
import type { Services } from '../runtime/services.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { ConflictError } from '../store/errors.js';
import { abandonExpiredRuns, deleteSchedule, getSchedule, listRuns, putSchedule, runningRun, startManualRun } from '../store/repos/sync-runs.js';
import type { DataSource } from '../store/schema.js';
import { cursorField, decodeCursor, encodeCursor } from './job-routes.js';
import { presentSchedule, presentSyncRun, scheduleResponse, syncResultResponse, syncRunPageResponse, syncStatusResponse } from './present.js';
import { runSync, SyncFailure } from './sync-run.js';
import type { SyncResult } from './sync.js';

/** Source types whose documents a sync can enumerate. */
export const SYNCABLE_TYPES: readonly string[] = ['files', 'http'];

/** A failed sync as the admin API (and the console form) answers it: the recorded reason, never internals. */
function asHttp(f: SyncFailure): GatehouseError {
  const reason = f.reason;
  if (reason === 'internal' || reason === 'interrupted') return new GatehouseError('internal');
  if (reason === 'timed_out') return new GatehouseError('upstream_failed', `The source's documents could not be enumerated in time: ${f.recorded}`);
  if (reason.code === 'egress_denied') return new GatehouseError('egress_denied', reason.message);
  if (reason.code === 'upstream_failed' || reason.code === 'upstream_status' || reason.code === 'not_found' || reason.code === 'corrupt_document' || reason.code === 'document_too_large') {
    return new GatehouseError('upstream_failed', `The source's document index could not be read: ${reason.message}`);
  }
  return new GatehouseError('not_actionable', `The source cannot be synced: ${reason.message}`);
}

async function syncableSource(services: Services, sourceId: string): Promise<DataSource> {
  const source = await getDataSourceBySourceId(services.db, sourceId);
  if (!source) throw notFound('data source');
  if (!SYNCABLE_TYPES.includes(source.source_type)) throw new GatehouseError('not_actionable', `The source cannot be synced: a ${source.source_type} source holds no documents (only files and http sources do).`);
  return source;
}

/**
 * A sync an operator asks for — `POST /api/data-sources/{source_id}/sync` and the console's "Sync now" both call
 * this: recorded as a manual run (409 while another sync of the source runs), audited, errors as the API answers them.
 */
export async function syncNow(services: Services, req: FastifyRequest, sourceId: string): Promise<SyncResult> {
  const source = await syncableSource(services, sourceId);
  await abandonExpiredRuns(services.db, source.source_id);
  let run;
  try {
    run = await startManualRun(services.db, source.source_id, null, services.config.ingestion.sync.timeout_seconds);
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
    const other = await runningRun(services.db, source.source_id);
    throw new GatehouseError('conflict', `A sync of this source is already running${other ? ` (${other.trigger}, started ${other.started_at.toISOString()}${other.worker_id ? ` by worker ${other.worker_id}` : ''})` : ''}.`);
  }
  try {
    const result = await runSync(services, source, run);
    await audit(services, req, 'data_source.sync', { type: 'data_source', id: source.source_id }, undefined, 200, { ...result });
    return result;
  } catch (err) {
    throw err instanceof SyncFailure ? asHttp(err) : err;
  }
}

/** The schedule's interval rule, shared by the API body and the console form (the bounds: ingestion.sync.min_interval_seconds, 30 days). */
export function intervalSchema(minInterval: number) {
  return z
    .number()
    .int('must be a whole number of seconds')
    .min(minInterval, `must be at least ${minInterval} seconds (ingestion.sync.min_interval_seconds)`)
    .max(MAX_INTERVAL_SECONDS, `must be at most ${MAX_INTERVAL_SECONDS} seconds (30 days)`);
}
export const MAX_INTERVAL_SECONDS = 30 * 86_400;

/** Sets a source's schedule (API `PUT …/sync/schedule` and the console form): 409 for a source without documents, audited. */
export async function setSchedule(services: Services, req: FastifyRequest, sourceId: string, body: { interval_seconds: number; enabled: boolean }) {
  const source = await syncableSource(services, sourceId);
  const before = await getSchedule(services.db, source.source_id);
  const after = presentSchedule(await putSchedule(services.db, source.source_id, body));
  await audit(services, req, 'data_source.sync_schedule.update', { type: 'data_source', id: source.source_id }, { before: before ? presentSchedule(before) : null, after });
  return after;
}

/** Removes a source's schedule (API `DELETE …/sync/schedule` and the console form); its runs are kept. */
export async function removeSchedule(services: Services, req: FastifyRequest, sourceId: string) {
  const source = await getDataSourceBySourceId(services.db, sourceId);
  if (!source) throw notFound('data source');
  const before = await getSchedule(services.db, source.source_id);
  if (!before || !(await deleteSchedule(services.db, source.source_id))) throw notFound('sync schedule');
  await audit(services, req, 'data_source.sync_schedule.delete', { type: 'data_source', id: source.source_id }, { before: presentSchedule(before) });
  return { deleted: true, source_id: source.source_id };
}

export const SYNC_RUNS_PAGE_MAX = 100;

export function buildSyncRoutes(ctx: AdminModuleContext): void {
  const { app, api, services } = ctx;
  const { config } = services;
  const read = requirePermission('jobs:read');
  const write = requirePermission('jobs:write');
  const minInterval = config.ingestion.sync.min_interval_seconds;

  const scheduleBody = z.strictObject({ interval_seconds: intervalSchema(minInterval), enabled: z.boolean().default(true) });

  const status = async (source: DataSource) => {
    const [schedule, last] = await Promise.all([getSchedule(services.db, source.source_id), listRuns(services.db, source.source_id, { limit: 1 })]);
    return {
      source_id: source.source_id,
      connector_key: source.connector_key ?? source.source_type,
      schedule: schedule ? presentSchedule(schedule) : null,
      last_run: last[0] ? presentSyncRun(last[0]) : null,
    };
  };

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/:source_id/sync',
    summary: "Enumerate a source's documents now and queue jobs for new, changed and failed ones",
    tags: ['jobs'],
    preHandler: write,
    params: sourceParams,
    response: syncResultResponse,
    handler: ({ params, req }) => syncNow(services, req, params.source_id),
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/sync',
    summary: "A source's sync state: its schedule (next_sync_at) and its newest run",
    tags: ['jobs'],
    preHandler: read,
    params: sourceParams,
    response: syncStatusResponse,
    handler: async ({ params }) => {
      const source = await getDataSourceBySourceId(services.db, params.source_id);
      if (!source) throw notFound('data source');
      return status(source);
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/sync/runs',
    summary: "A source's sync runs, newest first (keyset pages: pass next_cursor back as cursor)",
    tags: ['jobs'],
    preHandler: read,
    params: sourceParams,
    query: z.strictObject({ limit: z.coerce.number().int().min(1).max(SYNC_RUNS_PAGE_MAX).default(20), cursor: cursorField }),
    response: syncRunPageResponse,
    handler: async ({ params, query }) => {
      const source = await getDataSourceBySourceId(services.db, params.source_id);
      if (!source) throw notFound('data source');
      const rows = await listRuns(services.db, source.source_id, { limit: query.limit + 1, beforeId: query.cursor ? decodeCursor(query.cursor)! : undefined });
      const items = rows.slice(0, query.limit);
      return { items: items.map(presentSyncRun), next_cursor: rows.length > query.limit ? encodeCursor(items[items.length - 1]!.id) : null };
    },
  });

  api.route(app, {
    method: 'PUT',
    url: '/api/data-sources/:source_id/sync/schedule',
    summary: "Set a source's sync schedule: every interval_seconds, while enabled (a new schedule is due at once)",
    tags: ['jobs'],
    preHandler: write,
    params: sourceParams,
    body: scheduleBody,
    response: scheduleResponse,
    handler: ({ params, body, req }) => setSchedule(services, req, params.source_id, body),
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/data-sources/:source_id/sync/schedule',
    summary: "Remove a source's sync schedule (its runs are kept)",
    tags: ['jobs'],
    preHandler: write,
    params: sourceParams,
    response: z.object({ deleted: z.boolean(), source_id: z.string() }),
    handler: ({ params, req }) => removeSchedule(services, req, params.source_id),
  });
}
