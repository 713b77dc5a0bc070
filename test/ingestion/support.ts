// Test fixture for ingestion suites: an admin service in-process, real worker processes (`gatehouse start --role worker`), a files root, and waits on job states.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { baseEnv, startCli, type StartedCli } from '../support/cli.js';
import { startWorld, type World } from '../support/world.js';
import { waitFor } from '../support/wait.js';

export interface IngestionWorld extends World {
  /** A files root inside ingestion.files_roots. */
  root: string;
  /** Outside every files root: what an escape would reach. */
  outside: string;
  /** Starts a real worker process with this id (and extra SERVICE_* settings). */
  worker(id: string, env?: Record<string, string>, opts?: { built?: boolean }): Promise<StartedCli>;
  jobs(): Promise<Array<{ id: number; status: string; worker_id: string | null; retry_count: number; error_message: string | null; file_path: string; started_at: Date | null; completed_at: Date | null }>>;
  waitForJobs(predicate: (jobs: Awaited<ReturnType<IngestionWorld['jobs']>>) => boolean, timeoutMs: number, what: string): Promise<void>;
}

/** Fast leases and sweeps so lease expiry and staleness happen within a test. */
export const FAST_WORKER_ENV: Record<string, string> = {
  SERVICE_WORKER__LEASE_SECONDS: '3',
  SERVICE_WORKER__HEARTBEAT_INTERVAL_SECONDS: '1',
  SERVICE_WORKER__STALE_AFTER_SECONDS: '3',
  SERVICE_WORKER__SWEEP_INTERVAL_SECONDS: '1',
  SERVICE_INGESTION__HEARTBEAT_INTERVAL_SECONDS: '1',
  SERVICE_INGESTION__POLL_INTERVAL_MS: '200',
  SERVICE_INGESTION__RETRY_BACKOFF_SECONDS: '1',
};

export async function startIngestionWorld(env: Record<string, string> = {}, opts: { role?: 'admin' | 'all' } = {}): Promise<IngestionWorld> {
  const base = await mkdtemp(path.join(tmpdir(), 'gh-ingest-'));
  const { mkdir } = await import('node:fs/promises');
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  const shared = { SERVICE_INGESTION__FILES_ROOTS: root, ...FAST_WORKER_ENV, ...env };
  // Jobs are run by the worker processes the test starts: role admin, or role all (for the gateway) with its own worker not ingesting.
  const role = opts.role ?? 'admin';
  const world = await startWorld({ role, env: role === 'all' ? { ...shared, SERVICE_INGESTION__ENABLED: 'false' } : shared, privateSources: ['upstream'] });
  const workers: StartedCli[] = [];
  const db = world.svc.running.services.db;
  const jobs: IngestionWorld['jobs'] = async () =>
    (await sql<Awaited<ReturnType<IngestionWorld['jobs']>>[number]>`select id, status, worker_id, retry_count, error_message, file_path, started_at, completed_at from ingestion_jobs order by id`.execute(db)).rows;
  return {
    ...world,
    root,
    outside,
    async worker(id, extra = {}, opts = {}) {
      const w = await startCli(['start', '--role', 'worker'], {
        env: baseEnv({
          ...world.svc.env,
          SERVICE_OBSERVABILITY__LOG_LEVEL: 'info',
          SERVICE_WORKER__ID: id,
          SERVICE_AUDIT__SPOOL__DIR: path.join(base, `spool-${id}`),
          SERVICE_DATABASE__MIGRATE_ON_START: 'false',
          SERVICE_INGESTION__ENABLED: 'true',
          ...extra,
        }),
        cwd: base,
        timeoutMs: 90_000,
        built: opts.built,
      });
      workers.push(w);
      return w;
    },
    jobs,
    async waitForJobs(predicate, timeoutMs, what) {
      await waitFor(async () => predicate(await jobs()), timeoutMs, what, 100);
    },
    async stop() {
      await Promise.allSettled(workers.map((w) => w.stop('SIGKILL')));
      await world.stop();
      await rm(base, { recursive: true, force: true });
    },
  };
}

/** Job ids of the "ingestion job completed" log lines of a worker's output. */
export function completedJobIds(stdout: string): number[] {
  const ids: number[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.includes('"ingestion job completed"')) continue;
    ids.push((JSON.parse(line) as { job_id: number }).job_id);
  }
  return ids;
}
