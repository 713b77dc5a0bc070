// Wires ingestion into a worker process: its egress dispatcher and scanner, the job runner, the stale sweep and the heartbeat fields (docs/ingestion.md).
import { ingestionRuntimeFor } from '../ingestion/runtime.js';
import type { Services } from '../runtime/services.js';
import { processJob } from '../ingestion/process.js';
import { IngestionRunner } from './ingestion-runner.js';
import { SyncScheduler } from './sync-scheduler.js';
import { staleSweepTask } from './stale-sweep.js';
import type { Worker } from './worker.js';
import { serviceVersion } from '../ingestion/version.js';

/** Adds the stale sweep to every worker and, when ingestion.enabled, the job runner and the scheduled source sync. */
export function attachIngestion(worker: Worker, services: Services): IngestionRunner | null {
  const { config } = services;
  worker.addTask(staleSweepTask(services));
  const version = serviceVersion();
  if (!config.ingestion.enabled) {
    worker.addHeartbeatMetadata(() => ({ version, ingestion: false, jobs_in_hand: 0 }));
    return null;
  }
  const runtime = ingestionRuntimeFor(services);
  const deps = {
    db: services.db,
    runtime,
    resolveSecret: services.resolveSecretRef,
    config: config.ingestion,
    upstreamTimeoutMs: config.gateway.timeouts.upstream_request_ms,
  };
  const leaseSeconds = config.worker.lease_seconds;
  const runner = new IngestionRunner({
    db: services.db,
    workerId: worker.workerId,
    concurrency: config.worker.concurrency,
    leaseSeconds,
    // Renew well inside the lease: a third of it at most, so two missed renewals still leave time.
    renewMs: Math.max(100, Math.min(config.ingestion.heartbeat_interval_seconds * 1000, (leaseSeconds * 1000) / 3)),
    pollMs: config.ingestion.poll_interval_ms,
    timeoutMs: config.ingestion.job_timeout_seconds * 1000,
    maxRetries: config.ingestion.max_retries,
    backoffBaseSeconds: config.ingestion.retry_backoff_seconds,
    backoffMaxSeconds: config.ingestion.retry_backoff_max_seconds,
    handler: (job, ctx) => processJob(job, ctx, deps),
    log: services.log.child({ component: 'ingestion', worker_id: worker.workerId }),
  });
  worker.addHeartbeatMetadata(() => ({ version, ingestion: true, jobs_in_hand: runner.jobsInHand }));
  worker.addService(runner);
  // Scheduled source sync (docs/ingestion.md "Scheduled sync"): only workers that run jobs claim due periods.
  worker.addService(new SyncScheduler(services, worker.workerId));
  return runner;
}
