// MCP authorization (spec §5.4, RFC 9728, MCP "Authorization"): with agent JWTs on, an unauthenticated /mcp answers 401 with WWW-Authenticate naming the protected resource metadata; the MCP SDK's own client OAuth (an OAuthClientProvider on its transport: discovery, dynamic registration, authorization code with PKCE, finishAuth) signs in at the real provider by itself and calls a tool; an unmapped user's token is refused.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { decodeJwt } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  UnauthorizedError,
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
  type OAuthClientProvider,
} from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { startWorld, type World } from '../support/world.js';
import { TestProvider } from '../support/oidc-provider.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { CookieBrowser, oidcEnv, signInAtProvider } from './support.js';
import { freePort } from '../support/ports.js';

const AGENT = { client_id: 'mcp-agent', client_secret: 'mcp-agent-secret-00000000001' };
/** The person who signs the SDK client in at the provider (devInteractions: the login is the subject). */
const MCP_USER = 'mcp-user-1';
const SOURCE = 'mcp_oauth_http';
const CALLBACK = 'http://127.0.0.1:1/mcp-client/callback';
let provider: TestProvider;
let world: World;
let upstream: TestUpstream;
/** The MCP URL, and so the resource agent JWTs are issued for: the SDK accepts a resource only at or above the URL it connects to. */
let mcpUrl: URL;
let audience: string;

beforeAll(async () => {
  const port = await freePort();
  mcpUrl = new URL(`http://127.0.0.1:${port}/mcp`);
  audience = mcpUrl.href;
  provider = await TestProvider.start({ agentClients: [AGENT], agentAudience: audience, dynamicRegistration: true });
  upstream = await startUpstream({ '/base/items': (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: ['a', 'b'] })) });
  world = await startWorld({ privateSources: [SOURCE], env: { ...oidcEnv(provider), SERVICE_AUTH__OIDC__AGENT_AUDIENCE: audience, SERVICE_GATEWAY__HTTP_PORT: String(port) } });
  expect(world.svc.gatewayUrl).toBe(mcpUrl.origin);
  await world.httpSource(SOURCE, `http://127.0.0.1:${upstream.port}/base/`);
  const agent = await world.agent('mcp-jwt-agent');
  expect((await world.admin('PUT', `/api/admin-auth/oidc/agents/${agent.id}`, { subject: AGENT.client_id })).status).toBe(200);
  const person = await world.agent('mcp-oauth-user', [{ source_id: SOURCE, role_key: 'reader' }]);
  expect((await world.admin('PUT', `/api/admin-auth/oidc/agents/${person.id}`, { subject: MCP_USER })).status).toBe(200);
}, 60_000);
afterAll(async () => {
  await world?.stop();
  await upstream?.close();
  await provider?.stop();
});

/** The SDK's storage and redirect hooks, in memory; the "browser" is the test, which follows authorizationUrl. */
class MemoryOAuthClient implements OAuthClientProvider {
  authorizationUrl: URL | null = null;
  #client: OAuthClientInformationMixed | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier = '';
  readonly #state = randomBytes(16).toString('base64url');

  get redirectUrl(): string {
    return CALLBACK;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'Gatehouse MCP SDK test', redirect_uris: [CALLBACK], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'none', scope: 'openid agent' };
  }
  state(): string {
    return this.#state;
  }
  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.#client;
  }
  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.#client = info;
  }
  tokens(): OAuthTokens | undefined {
    return this.#tokens;
  }
  saveTokens(tokens: OAuthTokens): void {
    this.#tokens = tokens;
  }
  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier;
  }
  codeVerifier(): string {
    return this.#verifier;
  }
}

/** Runs the SDK's flow as an MCP host would: connect, get redirected, sign the user in at the provider, finishAuth. */
async function signIn(oauth: MemoryOAuthClient, login: string): Promise<void> {
  const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth });
  const first = new Client({ name: 'gatehouse-oauth-test', version: '1.0.0' });
  await expect(first.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  const url = oauth.authorizationUrl!;
  expect(url.origin).toBe(provider.issuer);
  expect(url.searchParams.get('code_challenge_method')).toBe('S256');
  expect(url.searchParams.get('resource')).toBe(audience);
  const back = await signInAtProvider(new CookieBrowser(), url.href, login, CALLBACK);
  expect(back.searchParams.get('state')).toBe(oauth.state());
  await transport.finishAuth(back.searchParams.get('code')!);
  await transport.close();
}

const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } };

describe('401 → resource metadata → provider → token → tools', () => {
  test('the MCP SDK client discovery follows the 401 to the resource metadata and the provider; a token obtained there lists the tools', async () => {
    const mcpUrl = new URL(`${world.svc.gatewayUrl}/mcp`);
    const res = await fetch(mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(initialize) });
    expect(res.status).toBe(401);
    const params = extractWWWAuthenticateParams(res);
    expect(params.resourceMetadataUrl?.href).toBe(`${world.svc.gatewayUrl}/.well-known/oauth-protected-resource/mcp`);
    const metadata = await discoverOAuthProtectedResourceMetadata(mcpUrl, { resourceMetadataUrl: params.resourceMetadataUrl! });
    expect(metadata).toMatchObject({ resource: audience, authorization_servers: [provider.issuer], bearer_methods_supported: ['header'] });
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
    expect(doc.resource).toBe(audience);
    const res = await fetch(`${world.svc.gatewayUrl}/mcp`, { method: 'POST', headers: { authorization: 'Bearer not-a-key-at-all-00000000000000', 'content-type': 'application/json' }, body: JSON.stringify(initialize) });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"$/);
  });
});

describe('the MCP SDK client signs in by itself', () => {
  test('no token → 401 → resource metadata → provider → dynamic registration → code with PKCE → finishAuth → a governed tool call', async () => {
    const oauth = new MemoryOAuthClient();
    await signIn(oauth, MCP_USER);
    expect(oauth.clientInformation()?.client_id).toBeTruthy();
    const token = oauth.tokens()!.access_token;
    expect(decodeJwt(token)).toMatchObject({ iss: provider.issuer, aud: audience, sub: MCP_USER });
    const client = new Client({ name: 'gatehouse-oauth-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth }));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain('http_request');
    const r = (await client.callTool({ name: 'http_request', arguments: { source_id: SOURCE, method: 'GET', path: '/items' } })) as { isError?: boolean; content: unknown[] };
    expect(r.isError).toBeFalsy();
    expect(JSON.stringify(r.content)).toContain('items');
    await client.close();
  }, 60_000);

  test('a user no identity is mapped to signs in at the provider but the gateway refuses the token', async () => {
    const oauth = new MemoryOAuthClient();
    await signIn(oauth, 'nobody-mapped');
    expect(decodeJwt(oauth.tokens()!.access_token).sub).toBe('nobody-mapped');
    oauth.authorizationUrl = null;
    const client = new Client({ name: 'gatehouse-oauth-test', version: '1.0.0' });
    // The gateway answers 401 again; the SDK starts another authorization instead of connecting.
    await expect(client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: oauth }))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(oauth.authorizationUrl).not.toBeNull();
  }, 60_000);
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
