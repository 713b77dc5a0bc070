// The ingestion runner of a worker: claims jobs with leases (priority, then age), runs up to worker.concurrency at once, renews leases with progress, times out, retries with backoff (docs/ingestion.md "Runner").
import type { Logger } from '../observability/logger.js';
import type { Db } from '../store/repos/util.js';
import { claimJob, completeJob, failJob, releaseJob, renewLease, type Claim, type Outcome, type Progress } from '../store/repos/ingestion-jobs.js';
import type { IngestionJob } from '../store/schema.js';
import { IngestionError } from '../ingestion/errors.js';
import { backoffSeconds } from '../ingestion/states.js';
import type { JobContext } from '../ingestion/process.js';

export type JobHandler = (job: IngestionJob, ctx: JobContext) => Promise<Outcome>;

export interface RunnerOptions {
  db: Db;
  workerId: string;
  concurrency: number;
  leaseSeconds: number;
  /** How often a running job renews its lease and writes progress. */
  renewMs: number;
  pollMs: number;
  timeoutMs: number;
  maxRetries: number;
  backoffBaseSeconds: number;
  backoffMaxSeconds: number;
  handler: JobHandler;
  log: Logger;
}

/** Why a job's work was stopped from outside: its claim is gone (cancelled, taken over), the runner stops, or the time is up. */
class Stop extends Error {
  constructor(readonly why: 'lost' | 'shutdown' | 'timeout') {
    super(why);
  }
}

export class IngestionRunner {
  readonly #o: RunnerOptions;
  readonly #running = new Map<number, { done: Promise<void>; abort: AbortController }>();
  #timer: NodeJS.Timeout | null = null;
  #filling = false;
  #stopped = false;

  constructor(opts: RunnerOptions) {
    this.#o = opts;
  }

  /** Jobs this worker holds right now (reported in its heartbeat). */
  get jobsInHand(): number {
    return this.#running.size;
  }

  start(): void {
    this.#schedule(0);
  }

  /** Wakes the claim loop now (a job finished, or a test wants it). */
  wake(): void {
    this.#schedule(0);
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#fill(), ms);
  }

  async #fill(): Promise<void> {
    if (this.#filling || this.#stopped) return;
    this.#filling = true;
    try {
      while (!this.#stopped && this.#running.size < this.#o.concurrency) {
        let claim: Claim | null;
        try {
          claim = await claimJob(this.#o.db, this.#o.workerId, this.#o.leaseSeconds);
        } catch (err) {
          this.#o.log.warn({ err }, 'ingestion claim failed; retrying after the poll interval');
          break;
        }
        if (!claim) break;
        this.#begin(claim);
      }
    } finally {
      this.#filling = false;
      this.#schedule(this.#o.pollMs);
    }
  }

  #begin(claim: Claim): void {
    const abort = new AbortController();
    const done = this.#run(claim, abort)
      .catch((err: unknown) => this.#o.log.error({ err, job_id: claim.job.id }, 'ingestion job bookkeeping failed'))
      .finally(() => {
        this.#running.delete(claim.job.id);
        this.#schedule(0);
      });
    this.#running.set(claim.job.id, { done, abort });
  }

  async #run({ job, token }: Claim, abort: AbortController): Promise<void> {
    const { db, leaseSeconds, log } = this.#o;
    let pending: Progress = {};
    let renewing: Promise<void> = Promise.resolve();
    const renew = () => {
      const p = pending;
      pending = {};
      renewing = renewing.then(async () => {
        if (abort.signal.aborted) return;
        try {
          if (!(await renewLease(db, job.id, token, leaseSeconds, p))) abort.abort(new Stop('lost'));
        } catch (err) {
          // A store hiccup is not a lost lease: the next renewal tries again, the lease still has time.
          log.warn({ err, job_id: job.id }, 'lease renewal failed');
        }
      });
      return renewing;
    };
    const renewTimer = setInterval(renew, this.#o.renewMs);
    const timeout = setTimeout(() => abort.abort(new Stop('timeout')), this.#o.timeoutMs);
    const ctx: JobContext = {
      signal: abort.signal,
      progress: (p) => {
        const stageChanged = p.stage !== undefined && p.stage !== pending.stage;
        pending = { ...pending, ...p };
        if (stageChanged) void renew();
      },
    };
    let outcome: Outcome | null = null;
    let failure: unknown = null;
    try {
      outcome = await raceAbort(this.#o.handler(job, ctx), abort.signal);
    } catch (err) {
      failure = err;
    } finally {
      clearInterval(renewTimer);
      clearTimeout(timeout);
      await renewing;
    }
    const reason = abort.signal.reason as unknown;
    if (reason instanceof Stop && reason.why === 'lost') {
      log.info({ job_id: job.id }, 'ingestion job no longer held by this worker (cancelled or taken over); its result is dropped');
      return;
    }
    if (reason instanceof Stop && reason.why === 'shutdown') {
      // Handed back at once; if even that fails, the lease lapses and the sweep requeues the job.
      await releaseJob(db, job.id, token).catch((err: unknown) => log.warn({ err, job_id: job.id }, 'could not hand the job back'));
      return;
    }
    if (outcome && !abort.signal.aborted) {
      if (await completeJob(db, job.id, token, outcome)) log.info({ job_id: job.id, attempt: job.retry_count + 1 }, 'ingestion job completed');
      else log.info({ job_id: job.id }, 'ingestion job finished after losing its claim; result dropped');
      return;
    }
    const error = reason instanceof Stop && reason.why === 'timeout' ? new IngestionError('timed_out') : failure;
    const ie = error instanceof IngestionError ? error : new IngestionError('internal', undefined, { cause: error });
    if (!(error instanceof IngestionError)) log.error({ err: error, job_id: job.id }, 'ingestion job failed unexpectedly');
    const status = await failJob(db, job.id, token, {
      message: ie.message,
      retryable: ie.retryable,
      maxRetries: this.#o.maxRetries,
      backoffSeconds: backoffSeconds(job.retry_count, this.#o.backoffBaseSeconds, this.#o.backoffMaxSeconds),
    });
    log.info({ job_id: job.id, code: ie.code, status }, 'ingestion job attempt failed');
  }

  /** Stops claiming and hands running jobs back to the queue (another worker resumes them from the start). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    for (const { abort } of this.#running.values()) abort.abort(new Stop('shutdown'));
    await Promise.allSettled([...this.#running.values()].map((r) => r.done));
  }
}

/** Settles with the promise, or rejects as soon as the signal aborts (a stage that ignores its signal cannot hold the job). */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e as Error);
      },
    );
  });
}
