// Data sources (spec §2): CRUD keyed by source_id, and the cache generation counter.
import { sql } from 'kysely';
import type { DataSource, JsonObject } from '../schema.js';
import { defined, guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'data source';

export interface NewDataSourceInput {
  source_id: string;
  name: string;
  source_type: string;
  connector_key?: string | null;
  connection_config?: JsonObject;
  cache_strategy?: string;
  enabled?: boolean;
  metadata?: JsonObject;
}

export interface DataSourcePatch {
  name?: string;
  source_type?: string;
  connector_key?: string | null;
  connection_config?: JsonObject;
  cache_strategy?: string;
  enabled?: boolean;
  metadata?: JsonObject;
}

function jsonFields<T extends { connection_config?: JsonObject; metadata?: JsonObject }>(input: T) {
  const { connection_config, metadata, ...rest } = input;
  return {
    ...rest,
    ...(connection_config !== undefined ? { connection_config: json(connection_config) } : {}),
    ...(metadata !== undefined ? { metadata: json(metadata) } : {}),
  };
}

export function createDataSource(db: Db, input: NewDataSourceInput): Promise<DataSource> {
  return guard(RESOURCE, () => db.insertInto('data_sources').values(jsonFields(input)).returningAll().executeTakeFirstOrThrow());
}

export function getDataSourceBySourceId(db: Db, sourceId: string): Promise<DataSource | undefined> {
  return db.selectFrom('data_sources').selectAll().where('source_id', '=', sourceId).executeTakeFirst();
}

export function listDataSources(db: Db, opts: { enabledOnly?: boolean } = {}): Promise<DataSource[]> {
  let query = db.selectFrom('data_sources').selectAll().orderBy('id');
  if (opts.enabledOnly) query = query.where('enabled', '=', true);
  return query.execute();
}

export async function updateDataSource(db: Db, sourceId: string, patch: DataSourcePatch): Promise<DataSource | undefined> {
  const values = jsonFields(defined(patch));
  if (Object.keys(values).length === 0) return getDataSourceBySourceId(db, sourceId);
  return guard(RESOURCE, () =>
    db
      .updateTable('data_sources')
      .set({ ...values, updated_at: sql`now()` })
      .where('source_id', '=', sourceId)
      .returningAll()
      .executeTakeFirst(),
  );
}

/** Advances the source's cache generation (the barrier after a mutation); returns the new value. */
export async function advanceSourceGeneration(db: Db, sourceId: string): Promise<number | undefined> {
  const row = await db
    .updateTable('data_sources')
    .set({ generation: sql<number>`generation + 1` })
    .where('source_id', '=', sourceId)
    .returning('generation')
    .executeTakeFirst();
  return row?.generation;
}

/** True when deleted; its roles, grants, approvals and jobs go with it (FK cascade). */
export async function deleteDataSource(db: Db, sourceId: string): Promise<boolean> {
  const result = await guard(RESOURCE, () => db.deleteFrom('data_sources').where('source_id', '=', sourceId).executeTakeFirst());
  return result.numDeletedRows > 0n;
}
