// MCP authorization discovery (spec §5.4; RFC 9728; MCP "Authorization"): with agent JWTs on, /mcp's 401 names its protected resource metadata, which names the issuer and agent_audience.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config/index.js';

/** RFC 9728 §3: the well-known path, and its form with the resource's path appended (`/mcp`). */
export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/** Agent JWTs are accepted here: auth.oidc enabled with an agent_audience. */
export function jwtAgentsEnabled(config: Readonly<Config>): boolean {
  return config.auth.oidc.enabled && config.auth.oidc.issuer_url !== null && config.auth.oidc.agent_audience !== null;
}

/** The metadata URL as this request reached the gateway (scheme and host as Fastify derives them, trust_proxy honoured). */
function metadataUrl(req: FastifyRequest): string {
  return `${req.protocol}://${req.host}${PROTECTED_RESOURCE_PATH}/mcp`;
}

/** RFC 6750 §3 with RFC 9728 §5.1's parameter: where an MCP client learns how to obtain a token. */
export function challenge(reply: FastifyReply, req: FastifyRequest): void {
  void reply.header('www-authenticate', `Bearer resource_metadata="${metadataUrl(req)}"`);
}

export function registerProtectedResourceMetadata(app: FastifyInstance, config: Readonly<Config>): void {
  if (!jwtAgentsEnabled(config)) return;
  const oidc = config.auth.oidc;
  const document = {
    resource: oidc.agent_audience,
    authorization_servers: [oidc.issuer_url],
    bearer_methods_supported: ['header'],
    resource_name: 'Gatehouse MCP',
  };
  for (const url of [PROTECTED_RESOURCE_PATH, `${PROTECTED_RESOURCE_PATH}/mcp`]) {
    app.get(url, async (_req, reply) => reply.header('cache-control', 'public, max-age=300').send(document));
  }
}
