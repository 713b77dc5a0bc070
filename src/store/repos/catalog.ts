// The source catalog's tables (docs/catalog.md): per-source settings, versioned snapshots, drift changes and annotations.
import { sql } from 'kysely';
import type { JsonObject, JsonValue } from '../schema.js';
import { guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'catalog';

/** How many snapshots of a source keep their structure: the newest (served) and the one before it (the diff's base). */
export const STRUCTURES_KEPT = 2;

export interface SnapshotSummary {
  id: number;
  source_id: string;
  version: number;
  status: 'ok' | 'failed';
  trigger: 'save' | 'schedule' | 'demand';
  worker_id: string;
  started_at: Date;
  finished_at: Date;
  source_updated_at: Date | null;
  truncated: boolean;
  truncated_by: string | null;
  node_count: number;
  change_count: number;
  error: string | null;
}

const SUMMARY_COLUMNS = [
  'id', 'source_id', 'version', 'status', 'trigger', 'worker_id', 'started_at', 'finished_at', 'source_updated_at', 'truncated', 'truncated_by', 'node_count', 'change_count', 'error',
] as const;

export async function getCatalogSource(db: Db, sourceId: string): Promise<{ drift_protection: boolean; scan_requested_at: Date | null } | undefined> {
  return db.selectFrom('catalog_sources').select(['drift_protection', 'scan_requested_at']).where('source_id', '=', sourceId).executeTakeFirst();
}

/** Drift protection is on unless the source's row says otherwise (spec: on by default). */
export async function driftProtectionOf(db: Db, sourceId: string): Promise<boolean> {
  return (await getCatalogSource(db, sourceId))?.drift_protection ?? true;
}

export function setCatalogSettings(db: Db, sourceId: string, settings: { drift_protection: boolean }): Promise<void> {
  return guard(RESOURCE, async () => {
    await db
      .insertInto('catalog_sources')
      .values({ source_id: sourceId, drift_protection: settings.drift_protection })
      .onConflict((oc) => oc.column('source_id').doUpdateSet({ drift_protection: settings.drift_protection, updated_at: sql`now()` }))
      .execute();
  });
}

/** Records an on-demand request; the worker that scans next clears nothing: a request is served by any scan that starts after it. */
export function requestScan(db: Db, sourceId: string): Promise<Date> {
  return guard(RESOURCE, async () => {
    const row = await db
      .insertInto('catalog_sources')
      .values({ source_id: sourceId, scan_requested_at: sql`now()` })
      .onConflict((oc) => oc.column('source_id').doUpdateSet({ scan_requested_at: sql`now()` }))
      .returning('scan_requested_at')
      .executeTakeFirstOrThrow();
    return row.scan_requested_at!;
  });
}

export function listSnapshots(db: Db, sourceId: string, limit = 50): Promise<SnapshotSummary[]> {
  return db.selectFrom('catalog_snapshots').select([...SUMMARY_COLUMNS]).where('source_id', '=', sourceId).orderBy('id', 'desc').limit(limit).execute();
}

/** The newest successful snapshot with its structure, or undefined when none was captured (or its structure was pruned). */
export async function latestStructure(db: Db, sourceId: string): Promise<(SnapshotSummary & { structure: JsonValue }) | undefined> {
  const row = await db
    .selectFrom('catalog_snapshots')
    .select([...SUMMARY_COLUMNS, 'structure'])
    .where('source_id', '=', sourceId)
    .where('status', '=', 'ok')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (row === undefined || row.structure === null) return undefined;
  return row as SnapshotSummary & { structure: JsonValue };
}

export async function latestSnapshot(db: Db, sourceId: string): Promise<SnapshotSummary | undefined> {
  return db.selectFrom('catalog_snapshots').select([...SUMMARY_COLUMNS]).where('source_id', '=', sourceId).orderBy('id', 'desc').limit(1).executeTakeFirst();
}

export interface NewSnapshot {
  source_id: string;
  status: 'ok' | 'failed';
  trigger: 'save' | 'schedule' | 'demand';
  worker_id: string;
  started_at: Date;
  source_updated_at: Date | null;
  truncated: boolean;
  truncated_by: string | null;
  node_count: number;
  change_count: number;
  error: string | null;
  /** Already serialized JSON (large structures are serialized once). */
  structure_json: string | null;
}

/** Inserts the next version of the source's snapshots and drops the structure of the ones past STRUCTURES_KEPT. */
export function insertSnapshot(db: Db, s: NewSnapshot): Promise<{ id: number; version: number }> {
  return guard(RESOURCE, async () => {
    const row = await db
      .insertInto('catalog_snapshots')
      .values({
        source_id: s.source_id,
        version: sql<number>`(select coalesce(max(version), 0) + 1 from catalog_snapshots where source_id = ${s.source_id})`,
        status: s.status,
        trigger: s.trigger,
        worker_id: s.worker_id,
        started_at: s.started_at,
        source_updated_at: s.source_updated_at,
        truncated: s.truncated,
        truncated_by: s.truncated_by,
        node_count: s.node_count,
        change_count: s.change_count,
        error: s.error,
        structure: s.structure_json,
      })
      .returning(['id', 'version'])
      .executeTakeFirstOrThrow();
    if (s.status === 'ok') {
      await db
        .updateTable('catalog_snapshots')
        .set({ structure: null })
        .where('source_id', '=', s.source_id)
        .where('structure', 'is not', null)
        .where('id', 'not in', db.selectFrom('catalog_snapshots').select('id').where('source_id', '=', s.source_id).where('status', '=', 'ok').orderBy('id', 'desc').limit(STRUCTURES_KEPT))
        .execute();
    }
    return row;
  });
}

export interface ChangeRow {
  change_id: string;
  kind: 'added' | 'removed' | 'renamed' | 'changed' | 'type_changed';
  object_type: string;
  path: string;
  detail: JsonObject;
  protected: boolean;
}

/**
 * Records a scan's changes. A change already recorded under the same id (the same column added again after it was
 * dropped) is opened again: it belongs to this snapshot and waits for a new acknowledgement.
 */
export function recordChanges(db: Db, sourceId: string, snapshotId: number, changes: readonly ChangeRow[]): Promise<void> {
  if (changes.length === 0) return Promise.resolve();
  return guard(RESOURCE, async () => {
    const BATCH = 1_000;
    for (let i = 0; i < changes.length; i += BATCH) {
      const rows = changes.slice(i, i + BATCH).map((c) => ({
        source_id: sourceId,
        change_id: c.change_id,
        snapshot_id: snapshotId,
        kind: c.kind,
        object_type: c.object_type,
        path: c.path,
        detail: json(c.detail),
        protected: c.protected,
      }));
      await db
        .insertInto('catalog_changes')
        .values(rows)
        .onConflict((oc) =>
          oc.columns(['source_id', 'change_id']).doUpdateSet({
            snapshot_id: snapshotId,
            protected: sql`excluded.protected`,
            kind: sql`excluded.kind`,
            acknowledged_at: null,
            acknowledged_by: null,
          }),
        )
        .execute();
    }
  });
}

export interface StoredChange extends ChangeRow {
  id: number;
  source_id: string;
  snapshot_id: number;
  created_at: Date;
  acknowledged_at: Date | null;
  acknowledged_by: string | null;
}

export function listChanges(db: Db, sourceId: string, opts: { open?: boolean; limit?: number } = {}): Promise<StoredChange[]> {
  let q = db.selectFrom('catalog_changes').selectAll().where('source_id', '=', sourceId);
  if (opts.open === true) q = q.where('acknowledged_at', 'is', null);
  if (opts.open === false) q = q.where('acknowledged_at', 'is not', null);
  return q.orderBy('id', 'desc').limit(opts.limit ?? 1_000).execute() as Promise<StoredChange[]>;
}

/** Open changes per source (the overview counts them). */
export async function openChangeCounts(db: Db): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('catalog_changes')
    .select(['source_id', sql<number>`count(*)::int`.as('n')])
    .where('acknowledged_at', 'is', null)
    .groupBy('source_id')
    .execute();
  return new Map(rows.map((r) => [r.source_id, Number(r.n)]));
}

/** Marks one change (by change_id) or every open change of the source as seen; answers the change_ids acknowledged. */
export function acknowledgeChanges(db: Db, sourceId: string, changeId: string | null, by: string): Promise<string[]> {
  return guard(RESOURCE, async () => {
    let q = db
      .updateTable('catalog_changes')
      .set({ acknowledged_at: sql`now()`, acknowledged_by: by })
      .where('source_id', '=', sourceId)
      .where('acknowledged_at', 'is', null);
    if (changeId !== null) q = q.where('change_id', '=', changeId);
    const rows = await q.returning('change_id').execute();
    return rows.map((r) => r.change_id);
  });
}

/** Whether a change with this id exists for the source (acknowledged or not). */
export async function changeExists(db: Db, sourceId: string, changeId: string): Promise<boolean> {
  const row = await db.selectFrom('catalog_changes').select('id').where('source_id', '=', sourceId).where('change_id', '=', changeId).executeTakeFirst();
  return row !== undefined;
}

export interface Annotation {
  source_id: string;
  path: string;
  classification: string;
  updated_by: string | null;
  updated_at: Date;
}

export function listAnnotations(db: Db, sourceId?: string): Promise<Annotation[]> {
  let q = db.selectFrom('catalog_annotations').selectAll();
  if (sourceId !== undefined) q = q.where('source_id', '=', sourceId);
  return q.orderBy('source_id').orderBy('path').execute();
}

export function setAnnotation(db: Db, sourceId: string, path: string, classification: string, by: string): Promise<Annotation> {
  return guard(RESOURCE, () =>
    db
      .insertInto('catalog_annotations')
      .values({ source_id: sourceId, path, classification, updated_by: by })
      .onConflict((oc) => oc.columns(['source_id', 'path']).doUpdateSet({ classification, updated_by: by, updated_at: sql`now()` }))
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
}

export async function removeAnnotation(db: Db, sourceId: string, path: string): Promise<boolean> {
  const r = await db.deleteFrom('catalog_annotations').where('source_id', '=', sourceId).where('path', '=', path).executeTakeFirst();
  return r.numDeletedRows > 0n;
}

/** Open protected changes of every source (the gateway redacts their columns until acknowledged). */
export function openProtectedChanges(db: Db, sourceId?: string): Promise<Array<{ source_id: string; path: string; change_id: string }>> {
  let q = db.selectFrom('catalog_changes').select(['source_id', 'path', 'change_id']).where('protected', '=', true).where('acknowledged_at', 'is', null);
  if (sourceId !== undefined) q = q.where('source_id', '=', sourceId);
  return q.execute();
}

export interface DueSource {
  source_id: string;
  source_type: string;
  connector_key: string | null;
  enabled: boolean;
  connection_config: JsonObject;
  updated_at: Date;
  scan_requested_at: Date | null;
  last_started_at: Date | null;
  last_source_updated_at: Date | null;
}

/** Every source with what scheduling needs: its last scan's start and the source version it saw, and any on-demand request. */
export function scanStates(db: Db): Promise<DueSource[]> {
  return db
    .selectFrom('data_sources as d')
    .leftJoin('catalog_sources as c', 'c.source_id', 'd.source_id')
    .select([
      'd.source_id', 'd.source_type', 'd.connector_key', 'd.enabled', 'd.connection_config', 'd.updated_at', 'c.scan_requested_at',
      sql<Date | null>`(select max(s.started_at) from catalog_snapshots s where s.source_id = d.source_id)`.as('last_started_at'),
      sql<Date | null>`(select s.source_updated_at from catalog_snapshots s where s.source_id = d.source_id order by s.id desc limit 1)`.as('last_source_updated_at'),
    ])
    .orderBy('d.source_id')
    .execute() as Promise<DueSource[]>;
}

export interface IdentityRow {
  oid: string | null;
  schema: string;
  name: string;
  max_attnum: number | null;
  /** [name, attnum] pairs, only for the relations asked for. */
  columns: Array<[string, number]> | null;
}

/**
 * The identities of one snapshot's relations (oid, highest attnum), read inside the control store so a large structure
 * never crosses to the gateway whole; columns only for the relations named in `withColumns` (`schema\u0001name`).
 */
export async function snapshotIdentities(db: Db, snapshotId: number, withColumns: readonly string[]): Promise<IdentityRow[]> {
  const rows = await sql<IdentityRow>`select r->>'oid' as oid, r->>'schema' as schema, r->>'name' as name,
      (select max((c->>'attnum')::int) from jsonb_array_elements(r->'columns') c) as max_attnum,
      case when (r->>'schema') || chr(1) || (r->>'name') = any(${[...withColumns]}::text[])
        then (select jsonb_agg(jsonb_build_array(c->>'name', (c->>'attnum')::int)) from jsonb_array_elements(r->'columns') c) end as columns
    from catalog_snapshots s cross join lateral jsonb_array_elements(s.structure->'relations') r
    where s.id = ${snapshotId}`.execute(db);
  return rows.rows;
}

/** The id of the newest successful snapshot that still holds its structure (the one served), or undefined. */
export async function servedSnapshotId(db: Db, sourceId: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('catalog_snapshots')
    .select('id')
    .where('source_id', '=', sourceId)
    .where('status', '=', 'ok')
    .orderBy('id', 'desc')
    .limit(1)
    .where('structure', 'is not', null)
    .executeTakeFirst();
  return row === undefined ? undefined : Number(row.id);
}
