// The admin listener's feature modules, registered in this order; each module adds its routes through the shared ApiRegistry.
import type { AdminModule } from './module.js';
import { adminAuthModule } from './auth/module.js';
import { resourcesModule } from './api/resources.js';
import { policyModule } from './policies/routes.js';
import { auditModule } from './api/audit.js';
import { approvalsModule } from '../approvals/routes.js';
import { consoleModule } from './console/module.js';
import { privilegesModule } from '../privileges/routes.js';
import { ingestionModule } from '../ingestion/module.js';
import { alertsModule } from '../alerts/routes.js';
import { metricsModule } from '../observability/routes.js';
import { catalogModule } from '../catalog/routes.js';

/** Order matters: authentication first, so its hooks guard every route registered after it. */
export const adminModules: AdminModule[] = [adminAuthModule, resourcesModule(), policyModule, auditModule, approvalsModule, ingestionModule, alertsModule, catalogModule, privilegesModule, consoleModule, metricsModule];
