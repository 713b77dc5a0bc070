// The ingestion job state machine (docs/ingestion.md "States"): which statuses each action may start from; the API answers 409 outside these.
import type { IngestionJobStatus } from '../store/schema.js';

/** Operator actions on a job and the statuses each may leave from. */
export const ACTION_FROM: Readonly<Record<JobAction, readonly IngestionJobStatus[]>> = Object.freeze({
  // A running job is cancelled at once in the store; its worker notices at its next lease renewal and stops.
  cancel: ['pending', 'running'],
  // Retry starts a fresh attempt budget; a completed job is re-ingested by a source sync instead.
  retry: ['failed', 'cancelled'],
  // A finished or cancelled job never runs again without a retry, so its priority means nothing until then.
  priority: ['pending', 'running', 'failed', 'cancelled'],
});

export type JobAction = 'cancel' | 'retry' | 'priority';

/** Every edge of the state machine, for the docs and their test: [from, to, by what]. */
export const TRANSITIONS: ReadonlyArray<readonly [IngestionJobStatus, IngestionJobStatus, string]> = Object.freeze([
  ['pending', 'running', 'a worker claims it (priority, then age)'],
  ['pending', 'cancelled', 'cancel'],
  ['running', 'completed', 'every stage done'],
  ['running', 'pending', 'a retryable failure or an expired lease, retries left (after backoff)'],
  ['running', 'failed', 'a permanent failure, the per-job timeout, or no retries left'],
  ['running', 'cancelled', 'cancel (the worker stops at its next renewal)'],
  ['failed', 'pending', 'retry, or a source sync'],
  ['cancelled', 'pending', 'retry, or a source sync'],
  ['completed', 'pending', 'a source sync that sees the asset changed'],
] as const);

export function actionAllowed(action: JobAction, status: IngestionJobStatus): boolean {
  return ACTION_FROM[action].includes(status);
}

/** Retry backoff of docs/ingestion.md: base × 2^(retries so far), capped. */
export function backoffSeconds(retryCount: number, baseSeconds: number, maxSeconds: number): number {
  const exp = Math.min(Math.max(retryCount, 0), 30);
  return Math.min(maxSeconds, baseSeconds * 2 ** exp);
}
