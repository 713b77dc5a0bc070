// One catalog scan of one source: the cross-worker lock, capture with the source's own credentials, the diff against the last snapshot, drift protection, and the stored snapshot (docs/catalog.md).
import { sql } from 'kysely';
import { request } from 'undici';
import type { Dispatcher } from 'undici';
import type { Config } from '../config/index.js';
import { whileHolding, type Coordination, type Lock } from '../coord/index.js';
import type { Logger } from '../observability/logger.js';
import type { SecretResolver } from '../connectors/types.js';
import { resolveCredential } from '../connectors/credentials.js';
import { connectPostgres } from '../connectors/postgres-connect.js';
import { postgresConfigSchema, sanitizePgError } from '../connectors/postgres.js';
import { httpConfigSchema, sanitizeHttpError } from '../connectors/http.js';
import type { Db } from '../store/repos/util.js';
import { driftProtectionOf, insertSnapshot, latestStructure, listAnnotations, recordChanges, setAnnotation, type ChangeRow } from '../store/repos/catalog.js';
import { capturePostgres, type CatalogCaps } from './capture-postgres.js';
import { captureOpenApi } from './capture-openapi.js';
import { carriedAnnotations, diffStructures, type CatalogChange } from './diff.js';
import type { CatalogStructure } from './model.js';
import { parsePath } from './model.js';
import { suggestClassification } from './classify.js';
import { withUnreached } from './baseline.js';
import type { CatalogEvents } from './events.js';

export type ScanTrigger = 'save' | 'schedule' | 'demand';

export type ScanOutcome =
  | { readonly status: 'ok'; readonly snapshot_id: number; readonly version: number; readonly changes: number; readonly truncated_by: string | null; readonly node_count: number }
  | { readonly status: 'failed'; readonly snapshot_id: number; readonly version: number; readonly error: string }
  /** Another worker holds the source's scan lock. */
  | { readonly status: 'busy' }
  /** `catalog.enabled` is false, or the source is disabled, unknown or has nothing to capture. */
  | { readonly status: 'skipped'; readonly reason: string };

/** The scan lock's lease; renewed while the scan runs, so a dead worker frees the source within this. */
export const SCAN_LOCK_TTL_MS = 60_000;
const OPENAPI_MAX_BYTES = 8 * 1024 * 1024;

export interface CatalogScannerDeps {
  readonly db: Db;
  readonly coord: Coordination;
  readonly config: Readonly<Config['catalog']>;
  readonly workerId: string;
  readonly resolveSecret: SecretResolver;
  /** The egress check every upstream connection passes (spec §4 rule 5): where to connect for this source and host. */
  checkTarget(sourceId: string, hostname: string): Promise<{ address: string }>;
  /** The egress-checked dispatcher of an HTTP source (OpenAPI documents are fetched like proxied requests). */
  dispatcherFor(sourceId: string): Dispatcher;
  readonly events: CatalogEvents;
  readonly log: Logger;
}

export const scanLockName = (sourceId: string) => `catalog:scan:${sourceId}`;

function capsOf(c: Readonly<Config['catalog']>): CatalogCaps {
  return { max_nodes: c.max_nodes, max_schemas: c.max_schemas, max_tables: c.max_tables, max_columns_per_table: c.max_columns_per_table };
}

class CaptureError extends Error {}

export class CatalogScanner {
  constructor(private readonly deps: CatalogScannerDeps) {}

  /** Scans one source now unless another worker is (answers `busy`) or scanning is off. */
  async scan(sourceId: string, trigger: ScanTrigger): Promise<ScanOutcome> {
    const { deps } = this;
    if (!deps.config.enabled) return { status: 'skipped', reason: 'catalog.enabled is false' };
    const held = await whileHolding(deps.coord, scanLockName(sourceId), SCAN_LOCK_TTL_MS, async (lock) => {
      deps.events.emit('scan:start', { source_id: sourceId, worker_id: deps.workerId, at: performance.now() });
      try {
        return await this.#scanLocked(sourceId, trigger, lock);
      } finally {
        deps.events.emit('scan:end', { source_id: sourceId, worker_id: deps.workerId, at: performance.now() });
      }
    });
    return held.busy ? { status: 'busy' } : held.value;
  }

  async #scanLocked(sourceId: string, trigger: ScanTrigger, _lock: Lock): Promise<ScanOutcome> {
    const { deps } = this;
    const source = await deps.db
      .selectFrom('data_sources')
      .select(['source_id', 'source_type', 'connector_key', 'enabled', 'connection_config', 'updated_at'])
      .where('source_id', '=', sourceId)
      .executeTakeFirst();
    if (source === undefined) return { status: 'skipped', reason: 'unknown source' };
    if (!source.enabled) return { status: 'skipped', reason: 'source disabled' };
    const type = source.connector_key ?? source.source_type;
    if (type !== 'postgres' && !(type === 'http' && typeof source.connection_config.openapi_path === 'string')) {
      return { status: 'skipped', reason: 'nothing to capture for this source type' };
    }
    // The control store's clock, like scan_requested_at: "a request is served by a scan that began after it" compares one clock.
    const startedAt = (await sql<{ now: Date }>`select now() as now`.execute(deps.db)).rows[0]!.now;
    let structure: CatalogStructure;
    try {
      structure = type === 'postgres' ? await this.#capturePostgres(sourceId, source.connection_config) : await this.#captureOpenApi(sourceId, source.connection_config);
    } catch (err) {
      const error = err instanceof CaptureError ? err.message : type === 'postgres' ? sanitizePgError(err) : sanitizeHttpError(err);
      const row = await insertSnapshot(deps.db, {
        source_id: sourceId, status: 'failed', trigger, worker_id: deps.workerId, started_at: startedAt, source_updated_at: source.updated_at,
        truncated: false, truncated_by: null, node_count: 0, change_count: 0, error, structure_json: null,
      });
      deps.log.warn({ source_id: sourceId, error }, 'catalog scan failed');
      await deps.events.announce({ source_id: sourceId, reason: 'scanned', snapshot_id: row.id, version: row.version, status: 'failed', changes: 0 });
      return { status: 'failed', snapshot_id: row.id, version: row.version, error };
    }
    const previous = await latestStructure(deps.db, sourceId);
    const changes = previous === undefined ? [] : diffStructures(sourceId, previous.structure as unknown as CatalogStructure, structure);
    const annotations = changes.length === 0 ? [] : await listAnnotations(deps.db, sourceId);
    const rows = await this.#withProtection(sourceId, structure, changes, annotations);
    // A proven rename keeps its classifications: they follow the relation or column to its new name.
    const carried = carriedAnnotations(annotations, changes);
    // What the cap left unreached is kept from the previous snapshot, so a later scan can still report it removed.
    const structureJson = JSON.stringify(withUnreached((previous?.structure ?? null) as CatalogStructure | null, structure));
    const stored = await deps.db.transaction().execute(async (tx) => {
      const snap = await insertSnapshot(tx, {
        source_id: sourceId, status: 'ok', trigger, worker_id: deps.workerId, started_at: startedAt, source_updated_at: source.updated_at,
        truncated: structure.truncated_by !== null, truncated_by: structure.truncated_by, node_count: structure.node_count, change_count: rows.length, error: null,
        structure_json: structureJson,
      });
      await recordChanges(tx, sourceId, snap.id, rows);
      for (const a of carried) await setAnnotation(tx, sourceId, a.path, a.classification, `catalog scan ${snap.version} (rename)`);
      return snap;
    });
    deps.log.info({ source_id: sourceId, version: stored.version, nodes: structure.node_count, changes: rows.length, truncated_by: structure.truncated_by, trigger }, 'catalog scanned');
    await deps.events.announce({ source_id: sourceId, reason: 'scanned', snapshot_id: stored.id, version: stored.version, status: 'ok', changes: rows.length });
    return { status: 'ok', snapshot_id: stored.id, version: stored.version, changes: rows.length, truncated_by: structure.truncated_by, node_count: structure.node_count };
  }

  /**
   * Drift that protects (docs/catalog.md): a column added to a relation that holds a classified column, or whose own
   * name suggests personal data; every column of a relation that is new or was renamed or moved (its data was never
   * classified under this name, and a copy such as CREATE TABLE … AS SELECT carries data without its provenance); a
   * renamed column. The gateway redacts them until the change is acknowledged.
   */
  async #withProtection(sourceId: string, structure: CatalogStructure, changes: readonly CatalogChange[], annotations: ReadonlyArray<{ path: string }>): Promise<ChangeRow[]> {
    const candidate = (c: CatalogChange) => (c.kind === 'added' || c.kind === 'renamed') && c.object_type !== 'schema' && c.object_type !== 'operation';
    const protect = changes.some(candidate) && (await driftProtectionOf(this.deps.db, sourceId));
    const classifiedTables = new Set<string>();
    if (protect) {
      for (const a of annotations) {
        const segs = parsePath(a.path);
        if (segs !== null && segs.length === 3) classifiedTables.add(`${segs[0]}\u0000${segs[1]}`);
      }
    }
    const typeOf = new Map<string, string>();
    if (protect) for (const r of structure.relations) for (const c of r.columns) typeOf.set(`${r.schema}\u0000${r.name}\u0000${c.name}`, c.type);
    return changes.map((c) => {
      let isProtected = false;
      if (protect && candidate(c)) {
        if (c.object_type !== 'column' || c.kind === 'renamed') isProtected = true;
        else {
          const [schema, table, column] = c.segments as [string, string, string];
          isProtected = classifiedTables.has(`${schema}\u0000${table}`) || suggestClassification(column, typeOf.get(`${schema}\u0000${table}\u0000${column}`) ?? null) !== null;
        }
      }
      return { change_id: c.change_id, kind: c.kind, object_type: c.object_type, path: c.path, detail: { ...c.detail }, protected: isProtected };
    });
  }

  async #capturePostgres(sourceId: string, raw: Record<string, unknown>): Promise<CatalogStructure> {
    const config = postgresConfigSchema.parse(raw);
    const cred = resolveCredential(config, { literal: 'password', ref: 'password_ref' }, this.deps.resolveSecret);
    if (!cred.ok) throw new CaptureError('credential reference could not be resolved');
    const { address } = await this.deps.checkTarget(sourceId, config.host);
    const timeoutMs = this.deps.config.scan_timeout_seconds * 1000;
    const client = await connectPostgres({
      config,
      password: cred.value,
      address,
      timeoutMs: config.connect_timeout_ms,
      applicationName: 'gatehouse-catalog',
      clientOptions: { query_timeout: timeoutMs + 5_000 },
    });
    try {
      return await capturePostgres(client, capsOf(this.deps.config), timeoutMs);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async #captureOpenApi(sourceId: string, raw: Record<string, unknown>): Promise<CatalogStructure> {
    const config = httpConfigSchema.parse(raw);
    const path = config.openapi_path!;
    const base = new URL(config.base_url);
    // The document lives beneath the base URL like any proxied path (spec §4 rule 3).
    const url = new URL(base.href.replace(/\/?$/, '/') + path.replace(/^\/+/, ''));
    const headers: Record<string, string> = { accept: 'application/json' };
    const cred = resolveCredential(config, { literal: 'token', ref: 'token_ref' }, this.deps.resolveSecret);
    if (!cred.ok) throw new CaptureError('credential reference could not be resolved');
    if (cred.value !== null) headers[config.auth_header.toLowerCase()] = config.auth_scheme === '' ? cred.value : `${config.auth_scheme} ${cred.value}`;
    const res = await request(url, { method: 'GET', headers, dispatcher: this.deps.dispatcherFor(sourceId), headersTimeout: config.timeout_ms, bodyTimeout: config.timeout_ms, maxRedirections: 0 } as never);
    if (res.statusCode < 200 || res.statusCode >= 300) {
      await res.body.dump().catch(() => undefined);
      throw new CaptureError(`the OpenAPI document answered HTTP ${res.statusCode}`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > OPENAPI_MAX_BYTES) {
        res.body.destroy();
        throw new CaptureError(`the OpenAPI document is larger than ${OPENAPI_MAX_BYTES} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    let doc: unknown;
    try {
      doc = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      throw new CaptureError('the OpenAPI document is not JSON');
    }
    try {
      return captureOpenApi(doc, capsOf(this.deps.config));
    } catch (err) {
      throw new CaptureError((err as Error).message);
    }
  }
}
