// The console module: static assets, the theme form and every console page (docs/console.md); registered after authentication so the guard covers it.
import type { AdminModule } from '../module.js';
import { registerAssetRoutes } from './assets.js';
import { registerOverviewPage } from './overview.js';
import { registerThemeRoute } from './theme.js';
import { registerIdentityPages } from './identities.js';
import { registerDataSourcePages } from './data-sources.js';
import { registerApprovalPages } from './approvals.js';
import { registerAdminPages } from './admins.js';
import { registerAuditPages } from './audit.js';

export const consoleModule: AdminModule = (ctx) => {
  registerAssetRoutes(ctx.app);
  ctx.api.describe({ method: 'GET', url: '/console/assets/:name', summary: "The console's static assets (stylesheet, script, vendored htmx and uPlot); no session needed", tags: ['console'], produces: ['text/css', 'text/javascript'] });
  registerThemeRoute(ctx);
  registerOverviewPage(ctx);
  registerIdentityPages(ctx);
  registerDataSourcePages(ctx);
  registerApprovalPages(ctx);
  registerAdminPages(ctx);
  registerAuditPages(ctx);
};
