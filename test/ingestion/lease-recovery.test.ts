// A worker SIGKILLed mid-job: its lease lapses, the other worker retries the job, the stale sweep counts it in stale_jobs_failed; cancel stops a running job; /api/workers reports staleness.
import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestionWorld, type IngestionWorld } from './support.js';
import { waitFor } from '../support/wait.js';

let world: IngestionWorld;
let upstream: Server;
/** Requests the upstream is holding (answered when the test says). */
const held = new Map<string, ServerResponse[]>();
const hits = new Map<string, number>();
let holdPaths = new Set<string>();

beforeAll(async () => {
  upstream = createServer((req, res) => {
    const p = req.url ?? '';
    hits.set(p, (hits.get(p) ?? 0) + 1);
    if (holdPaths.has(p)) {
      held.set(p, [...(held.get(p) ?? []), res]);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain', etag: '"v1"' }).end(`contents of ${p}\n`);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  world = await startIngestionWorld();
  await world.httpSource('upstream', `http://127.0.0.1:${(upstream.address() as { port: number }).port}/docs/`);
}, 120_000);
afterAll(async () => {
  for (const list of held.values()) for (const r of list) r.destroy();
  await world?.stop();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

describe('lease recovery', () => {
  it('retries the job of a SIGKILLed worker on the other worker and counts it as stale', async () => {
    holdPaths = new Set(['/docs/slow.txt']);
    const a = await world.worker('kill-a', { SERVICE_WORKER__CONCURRENCY: '1' });
    const job = (await world.admin('POST', '/api/jobs', { source_id: 'upstream', file_path: 'slow.txt' })).json;
    await waitFor(() => (held.get('/docs/slow.txt')?.length ?? 0) === 1, 30_000, 'worker A fetching');
    // The stage is written by the renewal the stage change triggers, which may land just after the request.
    let running: Record<string, unknown> = {};
    await waitFor(async () => {
      running = (await world.admin('GET', `/api/jobs/${job.id}`)).json;
      return running.stage === 'fetch';
    }, 10_000, 'stage fetch recorded');
    expect(running).toMatchObject({ status: 'running', worker_id: 'kill-a', stage: 'fetch' });
    expect(running.lease_expires_at).not.toBeNull();

    await a.stop('SIGKILL');
    // The second attempt is answered at once.
    holdPaths = new Set();
    const b = await world.worker('kill-b');
    await world.waitForJobs((jobs) => jobs.find((j) => j.id === job.id)?.status === 'completed', 60_000, 'job retried by B');
    const done = (await world.admin('GET', `/api/jobs/${job.id}`)).json;
    expect(done).toMatchObject({ status: 'completed', worker_id: 'kill-b', retry_count: 1, lease_expires_at: null });
    expect(done.error_message).toBeNull();
    expect(done.last_error_at).not.toBeNull();
    expect(hits.get('/docs/slow.txt')).toBe(2);

    const health = (await world.admin('GET', '/api/workers/kill-a/health')).json;
    expect(health).toMatchObject({ worker_id: 'kill-a', alive: false, stale_jobs_failed: 1 });
    expect(typeof health.last_heartbeat).toBe('number');
    expect((await world.admin('GET', '/api/workers/kill-b/health')).json).toMatchObject({ alive: true, stale_jobs_failed: 0 });
    // The worker list shows each worker's last heartbeat: one sent while B still held the job says 1 until the next.
    let list: Array<{ worker_id: string; stale: boolean; metadata: Record<string, unknown> }> = [];
    await waitFor(async () => {
      list = (await world.admin('GET', '/api/workers')).json;
      return list.find((w) => w.worker_id === 'kill-b')?.metadata.jobs_in_hand === 0;
    }, 10_000, 'a heartbeat of kill-b after the job', 100);
    expect(list.find((w) => w.worker_id === 'kill-a')?.stale).toBe(true);
    const bStatus = list.find((w) => w.worker_id === 'kill-b')!;
    expect(bStatus.stale).toBe(false);
    expect(bStatus.metadata).toMatchObject({ concurrency: 2, ingestion: true, jobs_in_hand: 0 });
    expect(typeof bStatus.metadata.version).toBe('string');
    expect((await world.admin('GET', '/api/workers/never-seen/health')).json).toEqual({ worker_id: 'never-seen', alive: false, last_heartbeat: null, stale_jobs_failed: 0 });
    await b.stop('SIGTERM');
  }, 120_000);

  it('cancels a running job: the worker drops its result; retry runs it again', async () => {
    holdPaths = new Set(['/docs/cancel-me.txt']);
    const w = await world.worker('cancel-w', { SERVICE_WORKER__CONCURRENCY: '1' });
    const job = (await world.admin('POST', '/api/jobs', { source_id: 'upstream', file_path: 'cancel-me.txt' })).json;
    await waitFor(() => (held.get('/docs/cancel-me.txt')?.length ?? 0) === 1, 30_000, 'worker fetching');
    const c = await world.admin('POST', `/api/jobs/${job.id}/cancel`);
    expect(c.json).toMatchObject({ status: 'cancelled', lease_expires_at: null });
    // The worker notices at its next renewal and is free for other work.
    await waitFor(async () => w.output().stdout.includes('no longer held by this worker'), 15_000, 'worker noticed the cancel');
    for (const r of held.get('/docs/cancel-me.txt') ?? []) r.end('late answer');
    expect((await world.admin('GET', `/api/jobs/${job.id}`)).json.status).toBe('cancelled');
    holdPaths = new Set();
    expect((await world.admin('POST', `/api/jobs/${job.id}/retry`)).json.status).toBe('pending');
    await world.waitForJobs((jobs) => jobs.find((j) => j.id === job.id)?.status === 'completed', 30_000, 'retried job done');
    await w.stop('SIGTERM');
  }, 90_000);
});
