// Admin JSON API for ingestion jobs under /api/jobs (docs/ingestion.md "Jobs API"): create, keyset list, read, priority, retry, cancel; 409 outside the state machine.
import { z } from 'zod';
import { GatehouseError } from '../errors/registry.js';
import { validationError } from '../http/validation.js';
import type { AdminModuleContext } from '../admin/module.js';
import { requirePermission } from '../admin/auth/principal.js';
import { intId } from '../admin/api/route.js';
import { audit, metadataSchema, notFound } from '../admin/api/shared.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { cancelJob, createJob, getJob, listJobs, retryJob, setJobPriority } from '../store/repos/ingestion-jobs.js';
import { INGESTION_JOB_STATUSES, type IngestionJob, type JsonObject } from '../store/schema.js';
import { ACTION_FROM, type JobAction } from './states.js';
import { filePathProblem } from './paths.js';
import { jobPageResponse, jobResponse, presentJob } from './present.js';

export const JOBS_PAGE_DEFAULT = 50;
export const JOBS_PAGE_MAX = 500;

const priorityScore = z.number().finite().min(-1e9).max(1e9);
const filePathSchema = z.string().superRefine((p, ctx) => {
  const problem = filePathProblem(p);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});
const sourceIdField = z.string().min(1).max(63).regex(/^[A-Za-z0-9][A-Za-z0-9._~-]{0,62}$/, 'must be a source id');

const createSchema = z.strictObject({
  source_id: sourceIdField,
  file_path: filePathSchema,
  priority_score: priorityScore.default(0),
  metadata: metadataSchema.default({}),
});
const prioritySchema = z.strictObject({ priority_score: priorityScore });
const idParams = z.strictObject({ id: intId });

/** Keyset cursors of the ingestion lists (jobs, documents): an opaque id this API gave out. */
export function encodeCursor(id: number): string {
  return Buffer.from(JSON.stringify({ id }), 'utf8').toString('base64url');
}
export function decodeCursor(cursor: string): number | null {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { id?: unknown };
    return typeof v.id === 'number' && Number.isSafeInteger(v.id) && v.id > 0 ? v.id : null;
  } catch {
    return null;
  }
}

export const cursorField = z
  .string()
  .max(200)
  .refine((c) => decodeCursor(c) !== null, 'is not a cursor this API gave out')
  .optional();

const listQuery = z.strictObject({
  status: z.enum(INGESTION_JOB_STATUSES as [string, ...string[]]).optional(),
  source_id: sourceIdField.optional(),
  worker_id: z.string().min(1).max(255).optional(),
  limit: z.coerce.number().int().min(1).max(JOBS_PAGE_MAX).default(JOBS_PAGE_DEFAULT),
  cursor: cursorField,
});

/** 404 for an unknown id, else 409 naming the status the action cannot leave from. */
async function illegal(ctx: AdminModuleContext, id: number, action: JobAction): Promise<GatehouseError> {
  const job = await getJob(ctx.services.db, id);
  if (!job) return notFound('ingestion job');
  return new GatehouseError('not_actionable', `A ${job.status} job cannot be given ${action === 'priority' ? 'a new priority' : `a ${action}`}; allowed from: ${ACTION_FROM[action].join(', ')}.`, {
    details: { status: job.status },
  });
}

export function buildJobRoutes(ctx: AdminModuleContext): void {
  const { app, api, services } = ctx;
  const read = requirePermission('jobs:read');
  const write = requirePermission('jobs:write');

  api.route(app, {
    method: 'POST',
    url: '/api/jobs',
    summary: 'Queue an ingestion job for one file of a source',
    tags: ['jobs'],
    preHandler: write,
    body: createSchema,
    response: jobResponse,
    successStatus: 201,
    handler: async ({ body, req }) => {
      const source = await getDataSourceBySourceId(services.db, body.source_id);
      if (!source) throw validationError([{ loc: ['body', 'source_id'], msg: 'source_id refers to a data source that does not exist', type: 'value_error.reference' }]);
      const job = await createJob(services.db, { source_id: body.source_id, file_path: body.file_path, priority_score: body.priority_score, metadata: body.metadata as JsonObject });
      const out = presentJob(job);
      await audit(services, req, 'ingestion_job.create', { type: 'ingestion_job', id: job.id }, { after: { source_id: job.source_id, file_path: job.file_path, priority_score: job.priority_score } }, 201);
      return out;
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/jobs',
    summary: 'List ingestion jobs, newest first, by status, source and worker (keyset pages: pass next_cursor back as cursor)',
    tags: ['jobs'],
    preHandler: read,
    query: listQuery,
    response: jobPageResponse,
    handler: async ({ query }) => {
      const page = await listJobs(services.db, {
        status: query.status as IngestionJob['status'] | undefined,
        source_id: query.source_id,
        worker_id: query.worker_id,
        before_id: query.cursor ? decodeCursor(query.cursor)! : undefined,
        limit: query.limit,
      });
      return { items: page.items.map(presentJob), next_cursor: page.next === null ? null : encodeCursor(page.next) };
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/jobs/:id',
    summary: 'One ingestion job',
    tags: ['jobs'],
    preHandler: read,
    params: idParams,
    response: jobResponse,
    handler: async ({ params }) => {
      const job = await getJob(services.db, params.id);
      if (!job) throw notFound('ingestion job');
      return presentJob(job);
    },
  });

  api.route(app, {
    method: 'PUT',
    url: '/api/jobs/:id/priority',
    summary: 'Change the priority of a job (higher runs first)',
    tags: ['jobs'],
    preHandler: write,
    params: idParams,
    body: prioritySchema,
    response: jobResponse,
    handler: async ({ params, body, req }) => {
      const job = await setJobPriority(services.db, params.id, ACTION_FROM.priority, body.priority_score);
      if (!job) throw await illegal(ctx, params.id, 'priority');
      await audit(services, req, 'ingestion_job.priority', { type: 'ingestion_job', id: job.id }, { after: { priority_score: job.priority_score } });
      return presentJob(job);
    },
  });

  for (const action of ['retry', 'cancel'] as const) {
    api.route(app, {
      method: 'POST',
      url: `/api/jobs/:id/${action}`,
      summary: action === 'retry' ? 'Queue a failed or cancelled job again with a fresh retry budget' : 'Cancel a pending or running job (a running one stops at its next lease renewal)',
      tags: ['jobs'],
      preHandler: write,
      params: idParams,
      response: jobResponse,
      handler: async ({ params, req }) => {
        const job = action === 'retry' ? await retryJob(services.db, params.id, ACTION_FROM.retry) : await cancelJob(services.db, params.id, ACTION_FROM.cancel);
        if (!job) throw await illegal(ctx, params.id, action);
        await audit(services, req, `ingestion_job.${action}`, { type: 'ingestion_job', id: job.id }, { after: { status: job.status } });
        return presentJob(job);
      },
    });
  }
}
