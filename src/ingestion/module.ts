// The ingestion admin module: jobs, workers, documents and source sync routes on the admin listener (docs/ingestion.md).
import type { AdminModule } from '../admin/module.js';
import { buildJobRoutes } from './job-routes.js';
import { buildWorkerRoutes } from './worker-routes.js';
import { buildSyncRoutes } from './sync-routes.js';
import { buildDocumentRoutes } from './document-routes.js';
import { registerIngestionPages } from './pages.js';

export const ingestionModule: AdminModule = (ctx) => {
  buildJobRoutes(ctx);
  buildWorkerRoutes(ctx);
  buildSyncRoutes(ctx);
  buildDocumentRoutes(ctx);
  registerIngestionPages(ctx);
};
