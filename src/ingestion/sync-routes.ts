// POST /api/data-sources/{source_id}/sync: enumerate a source's documents and queue what is new, changed or failed (spec §2 Source sync result, docs/ingestion.md "Sync").
import type { AdminModuleContext } from '../admin/module.js';
import { requirePermission } from '../admin/auth/principal.js';
import { audit, notFound } from '../admin/api/shared.js';
import { sourceParams } from '../admin/api/data-sources.js';
import { GatehouseError } from '../errors/registry.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { IngestionError } from './errors.js';
import { syncResultResponse } from './present.js';
import { ingestionRuntimeFor } from './runtime.js';
import { applySync, listHttpAssets, walkFiles, type Asset } from './sync.js';

/** An enumeration failure as the admin API answers it: the reason is the IngestionError's safe text. */
function asHttp(err: unknown): unknown {
  if (!(err instanceof IngestionError)) return err;
  if (err.code === 'egress_denied') return new GatehouseError('egress_denied', err.message);
  if (err.code === 'upstream_failed' || err.code === 'upstream_status' || err.code === 'not_found' || err.code === 'corrupt_document' || err.code === 'document_too_large') {
    return new GatehouseError('upstream_failed', `The source's document index could not be read: ${err.message}`);
  }
  return new GatehouseError('not_actionable', `The source cannot be synced: ${err.message}`);
}

export function buildSyncRoutes(ctx: AdminModuleContext): void {
  const { app, api, services } = ctx;
  const { config } = services;

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/:source_id/sync',
    summary: "Enumerate a source's documents and queue jobs for new, changed and failed ones",
    tags: ['jobs'],
    preHandler: requirePermission('jobs:write'),
    params: sourceParams,
    response: syncResultResponse,
    handler: async ({ params, req }) => {
      const source = await getDataSourceBySourceId(services.db, params.source_id);
      if (!source) throw notFound('data source');
      let assets: Asset[];
      try {
        if (source.source_type === 'files') assets = await walkFiles(source, config.ingestion.files_roots);
        else if (source.source_type === 'http') {
          const { egress } = await ingestionRuntimeFor(services);
          assets = await listHttpAssets(
            source,
            {
              egress,
              resolveSecret: services.resolveSecretRef,
              filesRoots: config.ingestion.files_roots,
              maxBytes: config.ingestion.max_document_bytes,
              timeoutMs: config.gateway.timeouts.upstream_request_ms,
              signal: AbortSignal.timeout(config.gateway.timeouts.upstream_request_ms),
            },
            100_000,
          );
        } else throw new IngestionError('source_unusable', `a ${source.source_type} source holds no documents`);
      } catch (err) {
        throw asHttp(err);
      }
      const result = await applySync(services.db, source, assets);
      await audit(services, req, 'data_source.sync', { type: 'data_source', id: source.source_id }, undefined, 200, { ...result });
      return result;
    },
  });
}
