// OIDC test helpers: the SERVICE_AUTH__OIDC__* environment for a service pointed at a test provider.
import type { TestProvider } from '../support/oidc-provider.js';

export const ADMIN_CLIENT = { client_id: 'gatehouse-admin', client_secret: 'admin-client-secret-for-tests-0001' };
export const AGENT_AUDIENCE = 'https://gatehouse.test/agents';

export function oidcEnv(provider: TestProvider, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    SERVICE_AUTH__OIDC__ENABLED: 'true',
    SERVICE_AUTH__OIDC__ISSUER_URL: provider.issuer,
    SERVICE_AUTH__OIDC__ADMIN_CLIENT_ID: ADMIN_CLIENT.client_id,
    SERVICE_AUTH__OIDC__ADMIN_CLIENT_SECRET_REF: 'env:GH_TEST_OIDC_CLIENT_SECRET',
    GH_TEST_OIDC_CLIENT_SECRET: ADMIN_CLIENT.client_secret,
    SERVICE_AUTH__OIDC__ADMIN_REDIRECT_URI: 'http://127.0.0.1:1/auth/oidc/callback',
    SERVICE_AUTH__OIDC__AGENT_AUDIENCE: AGENT_AUDIENCE,
    SERVICE_AUTH__OIDC__SCOPES: 'openid,email,groups',
    SERVICE_AUTH__OIDC__ALLOW_INSECURE_ENDPOINTS: 'true',
    SERVICE_AUTH__OIDC__ALLOW_PRIVATE_NETWORK: 'true',
    ...overrides,
  };
}
