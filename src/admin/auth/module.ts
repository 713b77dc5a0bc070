// The admin authentication module: cookie and form parsing, the bootstrap owner, the request guard, and the auth, admin-user and API-token routes.
import cookiePlugin from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { AdminModule } from '../module.js';
import { ensureBootstrapOwner } from './bootstrap.js';
import { installAdminGuard } from './guard.js';
import { registerAuthRoutes } from './routes.js';
import { registerAdminUserRoutes } from './admins-api.js';
import { AdminSessions } from './sessions.js';
import { sessionStoreFor } from './session-store.js';
import { LoginThrottle } from './throttle.js';
import { whenMigrated } from '../../runtime/when-migrated.js';
import { registerMappingRoutes } from './oidc/mappings.js';
import { registerOidcLogin } from './oidc/login.js';
import { oidcProviderOf } from '../../oidc/index.js';

export const adminAuthModule: AdminModule = async ({ app, api, services }) => {
  const { config, secrets, db, coord, log } = services;
  const admin = config.admin;
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded')) await app.register(formbody);
  if (!app.hasDecorator('parseCookie')) await app.register(cookiePlugin);

  await whenMigrated(services, 'bootstrap owner', async () => {
    const outcome = await ensureBootstrapOwner(db, secrets.bootstrapPassword());
    if (outcome === 'created_with_default_password') {
      log.warn({ username: 'admin' }, 'bootstrap owner created with the built-in initial password; it must be changed at first sign-in (docs/admin-auth.md)');
    } else if (outcome === 'created_with_configured_password') {
      log.info({ username: 'admin' }, 'bootstrap owner created with admin.bootstrap_password');
    }
  });

  const sessions = new AdminSessions(sessionStoreFor(coord, db), secrets.get('admin.signing_secret_ref'), {
    ttlSeconds: admin.session_ttl_seconds,
    idleSeconds: admin.session_idle_seconds,
  });
  const throttle = new LoginThrottle(coord, admin.login_throttle);
  installAdminGuard(app, { db, sessions, cookieName: admin.cookie.name, publicMetrics: services.config.observability.public_stats_enabled });
  registerAuthRoutes({ app, api, services, sessions, throttle });
  registerAdminUserRoutes({ app, api, services });
  registerMappingRoutes({ app, api, services });
  const provider = oidcProviderOf(services);
  if (config.auth.oidc.enabled && provider !== null) registerOidcLogin({ app, api, services, sessions, provider });
};
