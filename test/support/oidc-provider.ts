// Test fixture: a real OpenID provider (oidc-provider) on loopback: PKCE, a groups claim, client-credentials JWTs for agents, optional dynamic client registration, key rotation, request counting, and an optional ID-token tamper hook.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import { exportJWK, generateKeyPair, importJWK, SignJWT, decodeJwt, decodeProtectedHeader, type JWK } from 'jose';

export interface TestAccount {
  sub: string;
  email?: string;
  groups?: string[];
}

export interface SigningKey {
  kid: string;
  privateJwk: JWK;
  publicJwk: JWK;
}

export async function newSigningKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  return { kid, privateJwk, publicJwk };
}

export interface TestProviderOptions {
  /** Admin console client. */
  adminClient?: { client_id: string; client_secret: string; redirect_uris: string[] };
  /** Agent clients (client credentials); each token's subject is its client id. */
  agentClients?: Array<{ client_id: string; client_secret: string }>;
  /** Audience (resource indicator) of agent JWTs. */
  agentAudience?: string;
  accounts?: TestAccount[];
  /** Open dynamic client registration (RFC 7591), as MCP clients use it to register themselves. */
  dynamicRegistration?: boolean;
  /** Serve this issuer string in discovery instead of the real one (refusal tests). */
  discoveryOverride?: (doc: Record<string, unknown>) => Record<string, unknown>;
}

export class TestProvider {
  readonly server: Server;
  issuer = '';
  keys: SigningKey[] = [];
  /** Requests per path, e.g. counts['/jwks']. */
  readonly counts: Record<string, number> = {};
  /** Rewrites the claims of ID tokens the token endpoint returns (re-signed with the current key). */
  tamperIdToken: ((claims: Record<string, unknown>) => Record<string, unknown>) | null = null;
  #provider!: Provider;
  readonly #accounts = new Map<string, TestAccount>();

  private constructor(private readonly opts: TestProviderOptions) {
    for (const a of opts.accounts ?? []) this.#accounts.set(a.sub, a);
    this.server = createServer((req, res) => void this.#handle(req, res));
  }

  static async start(opts: TestProviderOptions = {}): Promise<TestProvider> {
    const p = new TestProvider(opts);
    await new Promise<void>((resolve) => p.server.listen(0, '127.0.0.1', resolve));
    p.issuer = `http://127.0.0.1:${(p.server.address() as AddressInfo).port}`;
    p.keys = [await newSigningKey('key-1')];
    p.#build();
    return p;
  }

  addAccount(a: TestAccount): void {
    this.#accounts.set(a.sub, a);
  }

  /** New signing key first (used for new tokens); old keys stay published while `keepOld`. */
  async rotate(kid: string, keepOld = true): Promise<SigningKey> {
    const key = await newSigningKey(kid);
    this.keys = keepOld ? [key, ...this.keys] : [key];
    this.#build();
    return key;
  }

  /** Drops every published key but the current one. */
  dropOldKeys(): void {
    this.keys = [this.keys[0]!];
    this.#build();
  }

  /** Signs arbitrary claims with the current (or a given) key, as the provider would. */
  async sign(claims: Record<string, unknown>, key: SigningKey = this.keys[0]!, alg = 'RS256'): Promise<string> {
    return new SignJWT(claims).setProtectedHeader({ alg, kid: key.kid, typ: 'JWT' }).sign(await importJWK(key.privateJwk, alg));
  }

  /** An agent JWT from the token endpoint (client credentials with the agent audience as resource). */
  async agentToken(clientId: string, clientSecret: string, resource = this.opts.agentAudience!): Promise<string> {
    const res = await fetch(`${this.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope: 'agent' }),
    });
    const body = (await res.json()) as { access_token?: string; error?: string };
    if (!body.access_token) throw new Error(`token endpoint: ${res.status} ${JSON.stringify(body)}`);
    return body.access_token;
  }

  #build(): void {
    const jwks = { keys: this.keys.map((k) => k.privateJwk) } as Configuration['jwks'];
    const clients: Array<NonNullable<Configuration['clients']>[number]> = [];
    if (this.opts.adminClient) {
      clients.push({ ...this.opts.adminClient, grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' });
    }
    for (const a of this.opts.agentClients ?? []) clients.push({ ...a, grant_types: ['client_credentials'], response_types: [], redirect_uris: [] });
    const audience = this.opts.agentAudience;
    const provider = new Provider(this.issuer, {
      clients,
      jwks,
      pkce: { required: () => true },
      conformIdTokenClaims: false,
      scopes: ['openid', 'email', 'profile', 'groups', 'agent'],
      claims: { openid: ['sub'], email: ['email'], groups: ['groups'] },
      findAccount: (_ctx, id) => {
        const account = this.#accounts.get(id) ?? { sub: id };
        return { accountId: id, claims: () => ({ sub: account.sub, ...(account.email ? { email: account.email } : {}), ...(account.groups ? { groups: account.groups } : {}) }) };
      },
      features: {
        devInteractions: { enabled: true },
        clientCredentials: { enabled: true },
        registration: { enabled: this.opts.dynamicRegistration ?? false },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => audience ?? undefined!,
          useGrantedResource: () => true,
          getResourceServerInfo: () => ({ scope: 'agent', audience: audience ?? 'none', accessTokenFormat: 'jwt', accessTokenTTL: 300, jwt: { sign: { alg: 'RS256' } } }),
        },
      },
      ttl: { AccessToken: 300, ClientCredentials: 300, IdToken: 300, AuthorizationCode: 60, Interaction: 600, Session: 600, Grant: 600 },
    });
    provider.use(async (ctx: KoaContextWithOIDC, next) => {
      await next();
      if (ctx.path === '/.well-known/openid-configuration' && this.opts.discoveryOverride && ctx.body) {
        ctx.body = this.opts.discoveryOverride(ctx.body as Record<string, unknown>);
      }
      if (ctx.path === '/token' && this.tamperIdToken && ctx.body && typeof (ctx.body as { id_token?: unknown }).id_token === 'string') {
        const body = ctx.body as { id_token: string };
        const alg = decodeProtectedHeader(body.id_token).alg ?? 'RS256';
        body.id_token = await this.sign(this.tamperIdToken({ ...decodeJwt(body.id_token) }), this.keys[0], alg);
      }
    });
    // A provider bug or misconfiguration is a test failure worth reading, not a bare 500.
    provider.on('server_error', (_ctx: unknown, err: Error) => console.error('oidc-provider server_error:', err));
    this.#provider = provider;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0]!;
    this.counts[path] = (this.counts[path] ?? 0) + 1;
    this.#provider.callback()(req, res);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
