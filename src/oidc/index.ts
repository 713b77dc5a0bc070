// The OIDC capability's face: the process's one provider (discovery, JWKS, readiness), built from the running services when auth.oidc is enabled.
import type { Services } from '../runtime/services.js';
import { OidcProvider } from './provider.js';
import { providerEgress } from './fetch.js';

export { OidcProvider, OidcConfigurationError, OidcUnreachableError, JWKS_COOLDOWN_MS } from './provider.js';
export { discoveryProblems, discoveryUrl, type OidcSettings, type ProviderMetadata } from './discovery.js';
export { providerEgress, type ProviderFetch } from './fetch.js';

const providers = new WeakMap<object, OidcProvider>();

/** The process's provider, or null when auth.oidc is disabled or not started here. */
export function oidcProviderOf(services: object): OidcProvider | null {
  return providers.get(services) ?? null;
}

/**
 * Starts the process's provider once (roles that serve the gateway or the admin): discovery with its checks, the
 * `oidc` readiness check, and closing at shutdown. Throws when the start must fail (docs/admin-auth.md).
 */
export async function startOidcProvider(services: Pick<Services, 'config' | 'log' | 'readiness' | 'onClose'>): Promise<OidcProvider | null> {
  const settings = services.config.auth.oidc;
  if (!settings.enabled) return null;
  let provider = providers.get(services);
  if (provider) return provider;
  const log = services.log.child({ component: 'oidc' });
  const egress = providerEgress({
    allowPrivate: settings.allow_private_network,
    connectTimeoutMs: services.config.gateway.timeouts.upstream_connect_ms,
    timeoutMs: 10_000,
    log,
  });
  provider = new OidcProvider({ settings, fetch: egress.fetch, log });
  const started = provider;
  services.onClose(async () => {
    started.close();
    await egress.close();
  });
  services.readiness.register('oidc', () => started.health());
  await provider.start({ production: services.config.environment === 'production' });
  providers.set(services, provider);
  return provider;
}
