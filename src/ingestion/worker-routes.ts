// Admin JSON API for workers (spec §2 WorkerStatus, WorkerHealth): the list with staleness and one worker's health with its stale_jobs_failed count (docs/ingestion.md "Workers").
import { z } from 'zod';
import type { AdminModuleContext } from '../admin/module.js';
import { requirePermission } from '../admin/auth/principal.js';
import { getWorker, listWorkers } from '../store/repos/workers.js';
import { unixSeconds, workerHealthResponse, workerStatusResponse } from './present.js';

const workerParams = z.strictObject({ worker_id: z.string().min(1).max(255) });

export function buildWorkerRoutes(ctx: AdminModuleContext): void {
  const { app, api, services } = ctx;
  const read = requirePermission('jobs:read');
  const staleAfter = services.config.worker.stale_after_seconds;

  api.route(app, {
    method: 'GET',
    url: '/api/workers',
    summary: 'Every worker that has sent a heartbeat, stale when silent for worker.stale_after_seconds',
    tags: ['workers'],
    preHandler: read,
    response: z.array(workerStatusResponse),
    handler: async () =>
      (await listWorkers(services.db, staleAfter)).map((w) => ({
        worker_id: w.worker_id,
        last_heartbeat: unixSeconds(w.last_heartbeat),
        metadata: w.metadata,
        stale: w.stale || w.stale_since !== null,
      })),
  });

  api.route(app, {
    method: 'GET',
    url: '/api/workers/:worker_id/health',
    summary: "One worker's health: alive, its last heartbeat, and the jobs the stale sweep took back from it",
    tags: ['workers'],
    preHandler: read,
    params: workerParams,
    response: workerHealthResponse,
    handler: async ({ params }) => {
      const w = await getWorker(services.db, params.worker_id);
      // A worker id never seen is not alive and has no heartbeat (the spec's nullable last_heartbeat).
      if (!w) return { worker_id: params.worker_id, alive: false, last_heartbeat: null, stale_jobs_failed: 0 };
      const silentFor = (Date.now() - w.last_heartbeat.getTime()) / 1000;
      return {
        worker_id: w.worker_id,
        alive: w.stale_since === null && silentFor <= staleAfter,
        last_heartbeat: unixSeconds(w.last_heartbeat),
        stale_jobs_failed: w.stale_jobs_failed,
      };
    },
  });
}
