// The catalog's admin routes (spec §4; docs/catalog.md "API"): the captured tree, scans on demand, scan history, changes and their acknowledgement, annotations, settings, and the two console form endpoints.
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AdminModule } from '../admin/module.js';
import { adminOf, requirePermission } from '../admin/auth/principal.js';
import { audit, notFound } from '../admin/api/shared.js';
import { sourceParams } from '../admin/api/data-sources.js';
import { validationError } from '../http/validation.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import {
  acknowledgeChanges,
  changeExists,
  driftProtectionOf,
  latestSnapshot,
  latestStructure,
  listAnnotations,
  listChanges,
  listSnapshots,
  removeAnnotation,
  requestScan,
  setAnnotation,
  setCatalogSettings,
  type SnapshotSummary,
  type StoredChange,
} from '../store/repos/catalog.js';
import type { Services } from '../runtime/services.js';
import { CATALOG_SCAN_REQUESTED_CHANNEL } from './events.js';
import { catalogEventsFor } from './runtime.js';
import { CLASSIFICATION_PATTERN } from './classify.js';
import { resolveAnnotationPath, treeOf } from './tree.js';
import { namingReport } from './naming-service.js';
import { registerCatalogPages } from './pages.js';
import type { CatalogStructure } from './model.js';

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

function presentSnapshot(s: SnapshotSummary) {
  return {
    id: s.id,
    version: s.version,
    status: s.status,
    trigger: s.trigger,
    worker_id: s.worker_id,
    started_at: iso(s.started_at),
    finished_at: iso(s.finished_at),
    truncated: s.truncated,
    truncated_by: s.truncated_by,
    node_count: s.node_count,
    change_count: s.change_count,
    error: s.error,
  };
}

function presentChange(c: StoredChange) {
  return {
    change_id: c.change_id,
    kind: c.kind,
    object_type: c.object_type,
    path: c.path,
    detail: c.detail,
    protected: c.protected,
    snapshot_id: c.snapshot_id,
    created_at: iso(c.created_at),
    acknowledged_at: iso(c.acknowledged_at),
    acknowledged_by: c.acknowledged_by,
  };
}

const changeIdSchema = z.string().max(64).regex(/^[0-9a-f]*$/, 'must be a change_id (hexadecimal)');
const ackBody = z.strictObject({ change_id: changeIdSchema.nullish() });
const annotateBody = z.strictObject({ path: z.string().min(1).max(1024), classification: z.string().max(128).nullish() });
const settingsBody = z.strictObject({ drift_protection: z.boolean() });
const scanBody = z.strictObject({ wait_seconds: z.number().int().min(0).max(300).default(0) }).prefault({});
const changesQuery = z.strictObject({ status: z.enum(['open', 'acknowledged', 'all']).default('all') });
const treeQuery = z.strictObject({ q: z.string().max(256).optional() });

function actorOf(req: FastifyRequest): string {
  return adminOf(req).username;
}

async function sourceOr404(services: Services, sourceId: string) {
  const source = await getDataSourceBySourceId(services.db, sourceId);
  if (!source) throw notFound('data source');
  return source;
}

/** Acknowledges one change or all; a change_id the source never had is a 422 on `change_id`. */
async function acknowledge(services: Services, req: FastifyRequest, sourceId: string, changeId: string | null) {
  await sourceOr404(services, sourceId);
  if (changeId !== null && !(await changeExists(services.db, sourceId, changeId))) {
    throw validationError([{ loc: ['body', 'change_id'], msg: 'no change with this change_id for the source', type: 'value_error.reference' }]);
  }
  const acknowledged = await acknowledgeChanges(services.db, sourceId, changeId, actorOf(req));
  await audit(services, req, 'catalog.acknowledge', { type: 'data_source', id: sourceId }, undefined, 200, { change_id: changeId ?? '(all)', count: acknowledged.length });
  await catalogEventsFor(services).announce({ source_id: sourceId, reason: 'acknowledged' });
  return { source_id: sourceId, acknowledged };
}

/** Sets (or, with an empty classification, removes) an annotation; the path must name an object of the latest snapshot when there is one. */
async function annotate(services: Services, req: FastifyRequest, sourceId: string, rawPath: string, classification: string) {
  await sourceOr404(services, sourceId);
  const latest = await latestStructure(services.db, sourceId);
  const resolved = resolveAnnotationPath(rawPath, (latest?.structure ?? null) as CatalogStructure | null);
  if (!resolved.ok) throw validationError([{ loc: ['body', 'path'], msg: resolved.reason, type: 'value_error' }]);
  const tag = classification.trim();
  if (tag === '') {
    const removed = await removeAnnotation(services.db, sourceId, resolved.path);
    await audit(services, req, 'catalog.annotation.remove', { type: 'data_source', id: sourceId }, undefined, 200, { path: resolved.path, removed });
    await catalogEventsFor(services).announce({ source_id: sourceId, reason: 'annotated' });
    return { source_id: sourceId, path: resolved.path, classification: null };
  }
  if (!CLASSIFICATION_PATTERN.test(tag)) {
    throw validationError([{ loc: ['body', 'classification'], msg: 'must be a tag of lower-case letters, digits, "_" or "-" (at most 128)', type: 'value_error' }]);
  }
  const row = await setAnnotation(services.db, sourceId, resolved.path, tag, actorOf(req));
  await audit(services, req, 'catalog.annotation.set', { type: 'data_source', id: sourceId }, undefined, 200, { path: resolved.path, classification: tag });
  await catalogEventsFor(services).announce({ source_id: sourceId, reason: 'annotated' });
  return { source_id: sourceId, path: row.path, classification: row.classification, updated_by: row.updated_by, updated_at: iso(row.updated_at) };
}

/** Asks the workers for a scan now (docs/catalog.md "When a source is scanned"); answers when it was asked. */
async function requestScanNow(services: Services, req: FastifyRequest, sourceId: string): Promise<Date> {
  await sourceOr404(services, sourceId);
  if (!services.config.catalog.enabled) throw validationError([{ loc: ['path', 'source_id'], msg: 'catalog scanning is disabled (catalog.enabled is false)', type: 'value_error' }]);
  const requestedAt = await requestScan(services.db, sourceId);
  await services.coord.publish(CATALOG_SCAN_REQUESTED_CHANNEL, sourceId).catch(() => undefined);
  await audit(services, req, 'catalog.scan', { type: 'data_source', id: sourceId }, undefined, 202);
  return requestedAt;
}

/** What the console pages do through the same code as the JSON routes. */
export interface CatalogActions {
  acknowledge(req: FastifyRequest, sourceId: string, changeId: string | null): Promise<unknown>;
  annotate(req: FastifyRequest, sourceId: string, path: string, classification: string): Promise<unknown>;
  requestScan(req: FastifyRequest, sourceId: string): Promise<Date>;
}

export const catalogModule: AdminModule = (ctx) => {
  const { app, api, services } = ctx;
  const read = requirePermission('catalog:read');
  const write = requirePermission('catalog:write');
  const tags = ['catalog'];

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/catalog',
    summary: 'The captured structure of a source (latest snapshot) with classifications and suggestions; q filters by path',
    tags,
    preHandler: read,
    params: sourceParams,
    query: treeQuery,
    handler: async ({ params, query }) => {
      await sourceOr404(services, params.source_id);
      const latest = await latestStructure(services.db, params.source_id);
      const last = await latestSnapshot(services.db, params.source_id);
      if (latest === undefined) return { source_id: params.source_id, snapshot: null, last_scan: last ? presentSnapshot(last) : null, tree: null };
      const [annotations, open] = await Promise.all([listAnnotations(services.db, params.source_id), listChanges(services.db, params.source_id, { open: true })]);
      const tree = treeOf(latest.structure as unknown as CatalogStructure, annotations, open, query.q ?? null);
      return { source_id: params.source_id, snapshot: presentSnapshot(latest), last_scan: last ? presentSnapshot(last) : null, tree };
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/:source_id/catalog/scan',
    summary: 'Ask the workers to scan the source now; wait_seconds > 0 waits for the scan to end',
    tags,
    preHandler: write,
    params: sourceParams,
    body: scanBody,
    successStatus: 202,
    handler: async ({ params, body, req, reply }) => {
      const requestedAt = await requestScanNow(services, req, params.source_id);
      const deadline = Date.now() + body.wait_seconds * 1000;
      while (Date.now() < deadline) {
        const last = await latestSnapshot(services.db, params.source_id);
        if (last !== undefined && last.started_at >= requestedAt) return reply.code(200).send({ source_id: params.source_id, requested_at: requestedAt.toISOString(), snapshot: presentSnapshot(last) });
        await new Promise((r) => setTimeout(r, 100));
      }
      return { source_id: params.source_id, requested_at: requestedAt.toISOString(), snapshot: null };
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/catalog/snapshots',
    summary: 'Scan history of a source (newest first), with truncation and failures',
    tags,
    preHandler: read,
    params: sourceParams,
    handler: async ({ params }) => {
      await sourceOr404(services, params.source_id);
      return (await listSnapshots(services.db, params.source_id)).map(presentSnapshot);
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/catalog/changes',
    summary: 'Drift changes of a source (newest first); status open, acknowledged or all',
    tags,
    preHandler: read,
    params: sourceParams,
    query: changesQuery,
    handler: async ({ params, query }) => {
      await sourceOr404(services, params.source_id);
      const open = query.status === 'all' ? undefined : query.status === 'open';
      return (await listChanges(services.db, params.source_id, open === undefined ? {} : { open })).map(presentChange);
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/:source_id/catalog/changes/acknowledge',
    summary: 'Acknowledge one change (change_id) or every open change (no change_id)',
    tags,
    preHandler: write,
    params: sourceParams,
    body: ackBody,
    handler: async ({ params, body, req }) => acknowledge(services, req, params.source_id, body.change_id ? body.change_id : null),
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/catalog/annotations',
    summary: 'Confirmed classifications of a source',
    tags,
    preHandler: read,
    params: sourceParams,
    handler: async ({ params }) => {
      await sourceOr404(services, params.source_id);
      return (await listAnnotations(services.db, params.source_id)).map((a) => ({ path: a.path, classification: a.classification, updated_by: a.updated_by, updated_at: iso(a.updated_at) }));
    },
  });

  api.route(app, {
    method: 'PUT',
    url: '/api/data-sources/:source_id/catalog/annotations',
    summary: 'Classify a path (schema.table.column); an empty or null classification removes it',
    tags,
    preHandler: write,
    params: sourceParams,
    body: annotateBody,
    handler: async ({ params, body, req }) => annotate(services, req, params.source_id, body.path, body.classification ?? ''),
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/catalog/settings',
    summary: 'Per-source catalog settings (drift protection)',
    tags,
    preHandler: read,
    params: sourceParams,
    handler: async ({ params }) => {
      await sourceOr404(services, params.source_id);
      return { source_id: params.source_id, drift_protection: await driftProtectionOf(services.db, params.source_id) };
    },
  });

  api.route(app, {
    method: 'PUT',
    url: '/api/data-sources/:source_id/catalog/settings',
    summary: 'Turn drift protection on or off for a source',
    tags,
    preHandler: write,
    params: sourceParams,
    body: settingsBody,
    handler: async ({ params, body, req }) => {
      await sourceOr404(services, params.source_id);
      await setCatalogSettings(services.db, params.source_id, body);
      await audit(services, req, 'catalog.settings', { type: 'data_source', id: params.source_id }, undefined, 200, { drift_protection: body.drift_protection });
      await catalogEventsFor(services).announce({ source_id: params.source_id, reason: 'settings' });
      return { source_id: params.source_id, drift_protection: body.drift_protection };
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/catalog/naming-report',
    summary: 'Role rules and deny/redact policies whose table or column names resolve ambiguously, not at all, or differently since the last scan',
    tags,
    preHandler: read,
    handler: async () => namingReport(services.db),
  });

  registerCatalogPages(ctx, {
    acknowledge: (req, sourceId, changeId) => acknowledge(services, req, sourceId, changeId),
    annotate: (req, sourceId, path, classification) => annotate(services, req, sourceId, path, classification),
    requestScan: (req, sourceId) => requestScanNow(services, req, sourceId),
  });
};
