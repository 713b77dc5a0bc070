// Source sync schedules and runs (docs/ingestion.md "Scheduled sync", decision record 0025): the atomic claim of a due period, manual runs, results, and runs whose holder died.
import { sql } from 'kysely';
import type { JsonObject, SyncRun, SyncSchedule, SyncRunStatus } from '../schema.js';
import { guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'sync run';

/** Runs kept per source; older ones are pruned when a run finishes. */
export const SYNC_RUNS_KEPT = 200;

export function getSchedule(db: Db, sourceId: string): Promise<SyncSchedule | undefined> {
  return db.selectFrom('ingestion_sync_schedules').selectAll().where('source_id', '=', sourceId).executeTakeFirst();
}

/**
 * Creates or changes a source's schedule. A new schedule is due at once; a changed interval brings the next period
 * forward when the new interval ends sooner, and never pushes an already planned period back.
 */
export async function putSchedule(db: Db, sourceId: string, s: { interval_seconds: number; enabled: boolean }): Promise<SyncSchedule> {
  const { rows } = await sql<SyncSchedule>`
    insert into ingestion_sync_schedules as s (source_id, interval_seconds, enabled, next_sync_at)
    values (${sourceId}, ${s.interval_seconds}, ${s.enabled}, now())
    on conflict (source_id) do update set
      interval_seconds = excluded.interval_seconds,
      enabled = excluded.enabled,
      next_sync_at = least(s.next_sync_at, now() + make_interval(secs => excluded.interval_seconds)),
      updated_at = now()
    returning *`.execute(db);
  return rows[0]!;
}

export async function deleteSchedule(db: Db, sourceId: string): Promise<boolean> {
  const r = await db.deleteFrom('ingestion_sync_schedules').where('source_id', '=', sourceId).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/**
 * Claims one due period, in one statement: the schedule's next_sync_at moves to the first period boundary after now
 * (missed periods collapse into this one) and a running run row records the claimed period. Concurrent claimers skip
 * the locked schedule row and then see it no longer due; the unique (source_id, scheduled_for) index makes a second
 * run of a period impossible even so. Not claimed: disabled schedules or sources, and sources with a sync still
 * running (its period starts when that one ends). A claimer that dies leaves a running row whose lease lapses
 * (`abandonExpiredRuns`); the period after it is claimed as usual.
 */
export async function claimDueSync(db: Db, workerId: string, leaseSeconds: number): Promise<SyncRun | null> {
  const { rows } = await sql<SyncRun>`
    with due as (
      select s.source_id, s.next_sync_at, s.interval_seconds
      from ingestion_sync_schedules s
      join data_sources d on d.source_id = s.source_id and d.enabled
      where s.enabled and s.next_sync_at <= now()
        and not exists (select 1 from ingestion_sync_runs r where r.source_id = s.source_id and r.status = 'running')
      order by s.next_sync_at
      limit 1
      for update of s skip locked
    ), advanced as (
      update ingestion_sync_schedules s
      set next_sync_at = due.next_sync_at + make_interval(secs => due.interval_seconds * (floor(extract(epoch from now() - due.next_sync_at) / due.interval_seconds) + 1))
      from due
      where s.source_id = due.source_id
      returning s.source_id, due.next_sync_at as period
    )
    insert into ingestion_sync_runs (source_id, trigger, scheduled_for, worker_id, lease_expires_at)
    select source_id, 'schedule', period, ${workerId}, now() + make_interval(secs => ${leaseSeconds}) from advanced
    returning *`.execute(db);
  return rows[0] ?? null;
}

/** Records a manual sync as running; ConflictError when a sync of the source is already running. */
export function startManualRun(db: Db, sourceId: string, workerId: string | null, leaseSeconds: number): Promise<SyncRun> {
  return guard(RESOURCE, async () => {
    const { rows } = await sql<SyncRun>`
      insert into ingestion_sync_runs (source_id, trigger, worker_id, lease_expires_at)
      values (${sourceId}, 'manual', ${workerId}, now() + make_interval(secs => ${leaseSeconds}))
      returning *`.execute(db);
    return rows[0]!;
  });
}

export function runningRun(db: Db, sourceId: string): Promise<SyncRun | undefined> {
  return db.selectFrom('ingestion_sync_runs').selectAll().where('source_id', '=', sourceId).where('status', '=', 'running').executeTakeFirst();
}

/** Records a run's end (only while it is still running) and prunes the source's oldest runs past SYNC_RUNS_KEPT. */
export async function finishRun(db: Db, run: SyncRun, end: { status: Exclude<SyncRunStatus, 'running'>; result?: JsonObject | null; error?: string | null }): Promise<boolean> {
  const r = await db
    .updateTable('ingestion_sync_runs')
    .set({ status: end.status, finished_at: sql<Date>`now()`, result: end.result ? json(end.result) : null, error_message: end.error ?? null })
    .where('id', '=', run.id)
    .where('status', '=', 'running')
    .executeTakeFirst();
  await sql`delete from ingestion_sync_runs where source_id = ${run.source_id} and status <> 'running' and id < (
      select id from ingestion_sync_runs where source_id = ${run.source_id} order by id desc offset ${SYNC_RUNS_KEPT - 1} limit 1)`.execute(db);
  return Number(r.numUpdatedRows) > 0;
}

/** Fails every running run whose lease lapsed (its holder died or hung): the source can be synced again. */
export async function abandonExpiredRuns(db: Db, sourceId?: string): Promise<number> {
  const r = await sql`update ingestion_sync_runs
    set status = 'failed', finished_at = now(),
        error_message = 'abandoned: ' || coalesce('worker ' || worker_id, 'the admin process') || ' did not finish before its lease expired'
    where status = 'running' and lease_expires_at < now() ${sourceId === undefined ? sql`` : sql`and source_id = ${sourceId}`}`.execute(db);
  return Number(r.numAffectedRows ?? 0n);
}

/** A source's runs, newest first, keyset-paged by id. */
export function listRuns(db: Db, sourceId: string, opts: { limit: number; beforeId?: number }): Promise<SyncRun[]> {
  let q = db.selectFrom('ingestion_sync_runs').selectAll().where('source_id', '=', sourceId);
  if (opts.beforeId !== undefined) q = q.where('id', '<', opts.beforeId);
  return q.orderBy('id', 'desc').limit(opts.limit).execute();
}
