// MCP authorization discovery (spec §5.4, RFC 9728): with agent JWTs on, an unauthenticated /mcp answers 401 with WWW-Authenticate naming the protected resource metadata, which the MCP SDK's own discovery functions follow to the real provider; a token from that provider then lists the tools.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { discoverAuthorizationServerMetadata, discoverOAuthProtectedResourceMetadata, extractWWWAuthenticateParams } from '@modelcontextprotocol/sdk/client/auth.js';
import { startWorld, type World } from '../support/world.js';
import { TestProvider } from '../support/oidc-provider.js';
import { AGENT_AUDIENCE, oidcEnv } from './support.js';

const AGENT = { client_id: 'mcp-agent', client_secret: 'mcp-agent-secret-00000000001' };
let provider: TestProvider;
let world: World;

beforeAll(async () => {
  provider = await TestProvider.start({ agentClients: [AGENT], agentAudience: AGENT_AUDIENCE });
  world = await startWorld({ env: oidcEnv(provider) });
  const agent = await world.agent('mcp-jwt-agent');
  expect((await world.admin('PUT', `/api/admin-auth/oidc/agents/${agent.id}`, { subject: AGENT.client_id })).status).toBe(200);
}, 60_000);
afterAll(async () => {
  await world?.stop();
  await provider?.stop();
});

const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };

describe('401 → resource metadata → provider → token → tools', () => {
  test('the MCP SDK client discovery follows the 401 to the resource metadata and the provider; a token obtained there lists the tools', async () => {
    const mcpUrl = new URL(`${world.svc.gatewayUrl}/mcp`);
    const res = await fetch(mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(initialize) });
    expect(res.status).toBe(401);
    const params = extractWWWAuthenticateParams(res);
    expect(params.resourceMetadataUrl?.href).toBe(`${world.svc.gatewayUrl}/.well-known/oauth-protected-resource/mcp`);
    const metadata = await discoverOAuthProtectedResourceMetadata(mcpUrl, { resourceMetadataUrl: params.resourceMetadataUrl! });
    expect(metadata).toMatchObject({ resource: AGENT_AUDIENCE, authorization_servers: [provider.issuer], bearer_methods_supported: ['header'] });
    const as = await discoverAuthorizationServerMetadata(metadata.authorization_servers![0]!);
    expect(as?.issuer).toBe(provider.issuer);
    expect(as?.token_endpoint).toBe(`${provider.issuer}/token`);
    // The agent obtains a token for the named resource from the discovered token endpoint, then uses it.
    const token = await provider.agentToken(AGENT.client_id, AGENT.client_secret, metadata.resource);
    const client = new Client({ name: 'gatehouse-oidc-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain('list_sources');
    await client.close();
  });

  test('the bare well-known path serves the same document; a wrong token is 401 with the same challenge', async () => {
    const doc = (await (await fetch(`${world.svc.gatewayUrl}/.well-known/oauth-protected-resource`)).json()) as Record<string, unknown>;
    expect(doc.resource).toBe(AGENT_AUDIENCE);
    const res = await fetch(`${world.svc.gatewayUrl}/mcp`, { method: 'POST', headers: { authorization: 'Bearer not-a-key-at-all-00000000000000', 'content-type': 'application/json' }, body: JSON.stringify(initialize) });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"$/);
  });
});

describe('without OIDC', () => {
  test('no challenge parameter and no metadata document', async () => {
    const plain = await startWorld();
    try {
      const res = await fetch(`${plain.svc.gatewayUrl}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(initialize) });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBeNull();
      expect((await fetch(`${plain.svc.gatewayUrl}/.well-known/oauth-protected-resource`)).status).toBe(404);
    } finally {
      await plain.stop();
    }
  });
});
