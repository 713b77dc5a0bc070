// Admin JSON API for a source's ingested documents (docs/ingestion.md "Documents API"): keyset list and one document by path, with classification and catalog asset link, never the text.
import { z } from 'zod';
import type { AdminModuleContext } from '../admin/module.js';
import { requirePermission } from '../admin/auth/principal.js';
import { notFound } from '../admin/api/shared.js';
import { sourceParams } from '../admin/api/data-sources.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { getDocument, listDocuments } from '../store/repos/documents.js';
import { cursorField, decodeCursor, encodeCursor } from './job-routes.js';
import { documentPageResponse, documentResponse, presentDocument } from './present.js';
import { filePathProblem } from './paths.js';

const DOCUMENTS_PAGE_DEFAULT = 50;
const DOCUMENTS_PAGE_MAX = 500;

const listQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(DOCUMENTS_PAGE_MAX).default(DOCUMENTS_PAGE_DEFAULT),
  cursor: cursorField,
});
const oneQuery = z.strictObject({
  path: z.string().superRefine((p, ctx) => {
    const problem = filePathProblem(p);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
});

export function buildDocumentRoutes(ctx: AdminModuleContext): void {
  const { app, api, services } = ctx;
  const read = requirePermission('jobs:read');

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/documents',
    summary: "A source's ingested documents, oldest first (keyset pages: pass next_cursor back as cursor)",
    tags: ['jobs'],
    preHandler: read,
    params: sourceParams,
    query: listQuery,
    response: documentPageResponse,
    handler: async ({ params, query }) => {
      if (!(await getDataSourceBySourceId(services.db, params.source_id))) throw notFound('data source');
      const rows = await listDocuments(services.db, params.source_id, { limit: query.limit + 1, afterId: query.cursor === undefined ? undefined : decodeCursor(query.cursor)! });
      const items = rows.slice(0, query.limit);
      return { items: items.map(presentDocument), next_cursor: rows.length > query.limit ? encodeCursor(items[items.length - 1]!.id) : null };
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id/document',
    summary: 'One ingested document of a source, by its path',
    tags: ['jobs'],
    preHandler: read,
    params: sourceParams,
    query: oneQuery,
    response: documentResponse,
    handler: async ({ params, query }) => {
      const doc = await getDocument(services.db, params.source_id, query.path);
      if (!doc) throw notFound('document');
      return presentDocument(doc);
    },
  });
}
