// Worker heartbeats (spec §2 Worker): upsert on beat, list with staleness judged by the database clock.
import { sql } from 'kysely';
import type { JsonObject, Worker } from '../schema.js';
import { guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'worker';

export type WorkerWithStaleness = Worker & { stale: boolean };

/** Records a heartbeat now (database clock), creating the worker row on its first beat. */
export function recordHeartbeat(db: Db, workerId: string, metadata: JsonObject = {}): Promise<Worker> {
  const meta = json(metadata);
  return guard(RESOURCE, () =>
    db
      .insertInto('workers')
      .values({ worker_id: workerId, last_heartbeat: sql<Date>`now()`, metadata: meta })
      .onConflict((oc) => oc.column('worker_id').doUpdateSet({ last_heartbeat: sql<Date>`now()`, metadata: meta, stale_since: null }))
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
}

export function getWorker(db: Db, workerId: string): Promise<Worker | undefined> {
  return db.selectFrom('workers').selectAll().where('worker_id', '=', workerId).executeTakeFirst();
}

/** Every worker, stale when its last heartbeat is older than staleAfterSeconds. */
export function listWorkers(db: Db, staleAfterSeconds: number): Promise<WorkerWithStaleness[]> {
  return db
    .selectFrom('workers')
    .selectAll()
    .select(sql<boolean>`last_heartbeat < now() - make_interval(secs => ${staleAfterSeconds})`.as('stale'))
    .orderBy('worker_id')
    .execute();
}

export async function deleteWorker(db: Db, workerId: string): Promise<boolean> {
  const result = await db.deleteFrom('workers').where('worker_id', '=', workerId).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
