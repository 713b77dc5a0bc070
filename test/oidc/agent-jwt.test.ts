// Agent JWTs on every front door (spec §5.4, §5.6) against a real oidc-provider: /proxy, /mcp and psql (password = JWT) allowed with a grant and 403/42501 without; expired, too old, future iat, forged, alg none, HS256-with-public-key, wrong audience, azp of another party and unmapped subjects refused and audited without the token (generated claim combinations too); a wire session ends when its token does; key rotation.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SignJWT, base64url, decodeJwt } from 'jose';
import fc from 'fast-check';
import pg from 'pg';
import { startWorld, type World } from '../support/world.js';
import { createTestDatabase, TEST_PG_HOST, TEST_PG_PORT, type TestDatabase } from '../support/pg.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { TestProvider, newSigningKey } from '../support/oidc-provider.js';
import { AGENT_AUDIENCE, oidcEnv } from './support.js';
import { oidcProviderOf } from '../../src/oidc/index.js';

const HTTP_SOURCE = 'jwt_http';
const PG_SOURCE = 'jwt_pg';
const GRANTED = { client_id: 'agent-granted', client_secret: 'granted-secret-000000000001' };
const UNGRANTED = { client_id: 'agent-ungranted', client_secret: 'ungranted-secret-00000000001' };
const UNMAPPED = { client_id: 'agent-unmapped', client_secret: 'unmapped-secret-000000000001' };
/** Small on purpose, so the token-age and session-end tests wait seconds, not hours. */
const CLOCK_TOLERANCE = 5;
const MAX_TOKEN_AGE = 600;

let provider: TestProvider;
let world: World;
let upstream: TestUpstream;
let database: TestDatabase;
let certDir: string;
let pgPort: number;

beforeAll(async () => {
  provider = await TestProvider.start({ agentClients: [GRANTED, UNGRANTED, UNMAPPED], agentAudience: AGENT_AUDIENCE });
  upstream = await startUpstream({ '/base/items': (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: [1, 2] })) });
  database = await createTestDatabase();
  certDir = mkdtempSync(join(tmpdir(), 'gh-oidc-tls-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-days', '1', '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem')], { stdio: 'ignore' });
  world = await startWorld({
    privateSources: [HTTP_SOURCE, PG_SOURCE],
    env: {
      ...oidcEnv(provider),
      SERVICE_AUTH__OIDC__CLOCK_TOLERANCE_SECONDS: String(CLOCK_TOLERANCE),
      SERVICE_AUTH__OIDC__AGENT_MAX_TOKEN_AGE_SECONDS: String(MAX_TOKEN_AGE),
      SERVICE_GATEWAY__PG_TLS__CERT_FILE: join(certDir, 'cert.pem'), SERVICE_GATEWAY__PG_TLS__KEY_FILE: join(certDir, 'key.pem') },
  });
  await world.httpSource(HTTP_SOURCE, `http://127.0.0.1:${upstream.port}/base/`);
  const pgSource = await world.admin('POST', '/api/data-sources', {
    name: PG_SOURCE,
    source_id: PG_SOURCE,
    source_type: 'postgres',
    connection_config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: database.name, user: 'postgres', ssl_mode: 'disable', pool_max: 4 },
    create_default_roles: true,
  });
  expect(pgSource.status).toBe(201);
  const deadline = Date.now() + 5_000;
  while (!world.svc.running.services.registry.get(PG_SOURCE) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  pgPort = world.svc.running.addresses['gateway.pg_port']!.port;

  const granted = await world.agent('jwt-granted', [
    { source_id: HTTP_SOURCE, role_key: 'reader' },
    { source_id: PG_SOURCE, role_key: 'reader' },
  ]);
  const ungranted = await world.agent('jwt-ungranted');
  await world.agent('jwt-unmapped', [{ source_id: HTTP_SOURCE, role_key: 'reader' }]);
  expect((await world.admin('PUT', `/api/admin-auth/oidc/agents/${granted.id}`, { subject: GRANTED.client_id })).status).toBe(200);
  expect((await world.admin('PUT', `/api/admin-auth/oidc/agents/${ungranted.id}`, { subject: UNGRANTED.client_id })).status).toBe(200);
}, 60_000);

afterAll(async () => {
  await world?.stop();
  await upstream?.close();
  await database?.drop();
  await provider?.stop();
  rmSync(certDir, { recursive: true, force: true });
});

async function auditOf(requestId: string): Promise<Record<string, unknown> | undefined> {
  await world.svc.running.services.audit.flush();
  const c = await world.svc.database!.connect();
  try {
    return (await c.query('select * from audit_entries where request_id = $1', [requestId])).rows[0] as Record<string, unknown> | undefined;
  } finally {
    await c.end();
  }
}

/** A 401 through the proxy, with its audit entry: the reason recorded, the token nowhere in it. */
async function refusedOnProxy(token: string, reason: RegExp): Promise<void> {
  const r = await world.proxy(token, 'GET', `/proxy/${HTTP_SOURCE}/items`);
  expect(r.status).toBe(401);
  expect(r.text).not.toContain(token.slice(-20));
  const entry = await auditOf(r.json.request_id as string);
  expect(entry?.status).toBe(401);
  expect(entry?.reasons).toEqual([expect.stringMatching(reason)]);
  expect(JSON.stringify(entry)).not.toContain(token.split('.')[2]!.slice(0, 20));
}

function psql(user: string, password: string, sql: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'psql',
      ['-X', '-h', '127.0.0.1', '-p', String(pgPort), '-U', user, '-d', PG_SOURCE, '-At', '-c', sql],
      { env: { ...process.env, PGPASSWORD: password, PGSSLMODE: 'require', PGCONNECT_TIMEOUT: '10' }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function mcpClient(token: string): Promise<Client> {
  const client = new Client({ name: 'gatehouse-oidc-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

describe('a JWT from the provider identifies the mapped identity; its grants decide', () => {
  test('/proxy: 200 with a grant, 403 without', async () => {
    const ok = await world.proxy(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret), 'GET', `/proxy/${HTTP_SOURCE}/items`);
    expect(ok.status).toBe(200);
    expect(ok.json).toEqual({ items: [1, 2] });
    const denied = await world.proxy(await provider.agentToken(UNGRANTED.client_id, UNGRANTED.client_secret), 'GET', `/proxy/${HTTP_SOURCE}/items`);
    expect(denied.status).toBe(403);
  });

  test('/mcp: the granted identity calls a tool; the ungranted one is refused by its grants', async () => {
    const granted = await mcpClient(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
    const r = (await granted.callTool({ name: 'http_request', arguments: { source_id: HTTP_SOURCE, method: 'GET', path: '/items' } })) as { isError?: boolean; structuredContent?: unknown; content: unknown[] };
    expect(r.isError).toBeFalsy();
    expect(JSON.stringify(r.content)).toContain('items');
    await granted.close();
    const ungranted = await mcpClient(await provider.agentToken(UNGRANTED.client_id, UNGRANTED.client_secret));
    const refused = (await ungranted.callTool({ name: 'http_request', arguments: { source_id: HTTP_SOURCE, method: 'GET', path: '/items' } })) as { isError?: boolean; content: unknown[] };
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toMatch(/forbidden|not allowed|denied/i);
    await ungranted.close();
  });

  test('/mcp refuses a bad JWT with 401 before any tool', async () => {
    const res = await fetch(`${world.svc.gatewayUrl}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${await forged()}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    expect(res.status).toBe(401);
  });

  test('psql with the JWT as password (TLS): reads with a grant, 42501 without, 28P01 for a bad token', async () => {
    const token = await provider.agentToken(GRANTED.client_id, GRANTED.client_secret);
    const ok = await psql('jwt-granted', token, 'select 1 as one');
    expect(ok.stderr).toBe('');
    expect(ok.stdout.trim()).toBe('1');
    const other = await psql('jwt-ungranted', await provider.agentToken(UNGRANTED.client_id, UNGRANTED.client_secret), 'select 1 as one');
    expect(other.code).not.toBe(0);
    expect(other.stderr).toMatch(/ERROR|FATAL/);
    expect(other.stderr).not.toContain('password authentication failed');
    // The token must identify the user it logs in as.
    const wrongUser = await psql('jwt-ungranted', token, 'select 1');
    expect(wrongUser.stderr).toContain('password authentication failed for user "jwt-ungranted"');
    const bad = await psql('jwt-granted', await forged(), 'select 1');
    expect(bad.stderr).toContain('password authentication failed');
  });
});

/** Waits until the gateway's JWKS cache may fetch again (the cooldown after its last fetch, 5 s). */
async function cooldownOver(): Promise<void> {
  const p = oidcProviderOf(world.svc.running.services)!;
  const deadline = Date.now() + 10_000;
  while (p.jwksCoolingDown && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(p.jwksCoolingDown).toBe(false);
}

async function forged(): Promise<string> {
  const key = await newSigningKey('key-1');
  const claims = decodeJwt(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
  return provider.sign(claims, key);
}

describe('refused JWTs: 401, audited with the reason and without the token', () => {
  test('forged signature (another key under the same kid)', async () => {
    await refusedOnProxy(await forged(), /^jwt signature invalid$/);
  });

  test('expired', async () => {
    const claims = decodeJwt(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
    const now = Math.floor(Date.now() / 1000);
    await refusedOnProxy(await provider.sign({ ...claims, iat: now - 600, exp: now - 300 }), /^jwt expired$/);
  });

  test('alg none', async () => {
    const claims = decodeJwt(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
    const token = `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${base64url.encode(JSON.stringify(claims))}.`;
    await refusedOnProxy(`${token}AA`, /^jwt (algorithm not allowed|malformed|signature invalid)$/);
    const bare = await world.proxy(token, 'GET', `/proxy/${HTTP_SOURCE}/items`);
    expect(bare.status).toBe(401);
  });

  test('HS256 signed with the provider\'s public key as the secret', async () => {
    const claims = decodeJwt(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
    const jwks = (await (await fetch(`${provider.issuer}/jwks`)).json()) as { keys: Array<Record<string, unknown>> };
    const secret = new TextEncoder().encode(JSON.stringify(jwks.keys[0]));
    const token = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'key-1' }).sign(secret);
    await refusedOnProxy(token, /^jwt algorithm not allowed$/);
  });

  test('wrong audience', async () => {
    const claims = decodeJwt(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
    await refusedOnProxy(await provider.sign({ ...claims, aud: 'https://another.example/api' }), /^jwt claim aud invalid$/);
  });

  test('several audiences: refused without a matching azp, accepted with it', async () => {
    const claims = decodeJwt(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
    await refusedOnProxy(await provider.sign({ ...claims, aud: [AGENT_AUDIENCE, 'https://other.example'] }), /^jwt several audiences without a matching azp$/);
    const ok = await world.proxy(await provider.sign({ ...claims, aud: [AGENT_AUDIENCE, 'https://other.example'], azp: AGENT_AUDIENCE }), 'GET', `/proxy/${HTTP_SOURCE}/items`);
    expect(ok.status).toBe(200);
  });

  test('another issuer', async () => {
    const claims = decodeJwt(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
    await refusedOnProxy(await provider.sign({ ...claims, iss: `${provider.issuer}/` }), /^jwt claim iss invalid$/);
  });

  test('an iat in the future beyond the clock tolerance', async () => {
    const now = Math.floor(Date.now() / 1000);
    await refusedOnProxy(await provider.sign({ iss: provider.issuer, sub: GRANTED.client_id, aud: AGENT_AUDIENCE, iat: now + 120, exp: now + 300 }), /^jwt claim iat invalid$/);
  });

  test('no iat, or one older than the maximum token age (whatever its exp says)', async () => {
    const now = Math.floor(Date.now() / 1000);
    await refusedOnProxy(await provider.sign({ iss: provider.issuer, sub: GRANTED.client_id, aud: AGENT_AUDIENCE, exp: now + 300 }), /^jwt claim iat invalid$/);
    await refusedOnProxy(await provider.sign({ iss: provider.issuer, sub: GRANTED.client_id, aud: AGENT_AUDIENCE, iat: now - MAX_TOKEN_AGE - 60, exp: now + 86_400 }), /^jwt expired$/);
  });

  test('a single-audience token whose azp names another party', async () => {
    const claims = decodeJwt(await provider.agentToken(GRANTED.client_id, GRANTED.client_secret));
    await refusedOnProxy(await provider.sign({ ...claims, azp: 'another-client' }), /^jwt azp names another party$/);
  });

  test('a valid token whose subject no identity is mapped to is never provisioned', async () => {
    await refusedOnProxy(await provider.agentToken(UNMAPPED.client_id, UNMAPPED.client_secret), /^jwt subject not mapped to an identity$/);
  });

  test('a disabled identity\'s token is refused at once (revocation reaches the memo)', async () => {
    const agent = await world.agent('jwt-disabled', [{ source_id: HTTP_SOURCE, role_key: 'reader' }]);
    const client = { client_id: 'agent-disabled', client_secret: 'disabled-secret-00000000001' };
    expect((await world.admin('PUT', `/api/admin-auth/oidc/agents/${agent.id}`, { subject: client.client_id })).status).toBe(200);
    const token = await provider.sign({ iss: provider.issuer, sub: client.client_id, aud: AGENT_AUDIENCE, iat: Math.floor(Date.now() / 1000), exp: Math.floor(Date.now() / 1000) + 300 });
    expect((await world.proxy(token, 'GET', `/proxy/${HTTP_SOURCE}/items`)).status).toBe(200);
    expect((await world.admin('PATCH', `/api/identities/${agent.id}`, { enabled: false })).status).toBe(200);
    await refusedOnProxy(token, /^jwt identity disabled$/);
  });
});

/** One generated claim set: times as offsets from now in seconds (undefined: claim absent). */
interface ClaimCase {
  iat: number | undefined;
  nbf: number | undefined;
  exp: number;
  aud: string | string[];
  azp: string | undefined;
}

/** The decision the rules of docs/agent-jwt.md "What is checked" give for a claim set (offsets stay ≥ 30 s from every edge). */
function expectedAccepted(c: ClaimCase): boolean {
  const auds = Array.isArray(c.aud) ? c.aud : [c.aud];
  if (c.iat === undefined || c.iat > CLOCK_TOLERANCE || -c.iat - CLOCK_TOLERANCE > MAX_TOKEN_AGE) return false;
  if (c.nbf !== undefined && c.nbf > CLOCK_TOLERANCE) return false;
  if (c.exp <= -CLOCK_TOLERANCE) return false;
  if (!auds.includes(AGENT_AUDIENCE)) return false;
  if (auds.length > 1 && c.azp !== AGENT_AUDIENCE) return false;
  return c.azp === undefined || c.azp === AGENT_AUDIENCE;
}

describe('generated claim combinations', () => {
  const OTHER = 'https://other.example/api';
  const cases = fc.record({
    iat: fc.constantFrom(undefined, -MAX_TOKEN_AGE - 60, -MAX_TOKEN_AGE + 60, -30, 0, 2, 60, 3_600),
    nbf: fc.constantFrom(undefined, -60, 0, 60),
    exp: fc.constantFrom(-3_600, -60, 60, 300, 30 * 86_400),
    aud: fc.constantFrom<string | string[]>(AGENT_AUDIENCE, OTHER, [AGENT_AUDIENCE, OTHER], [OTHER, AGENT_AUDIENCE], [AGENT_AUDIENCE]),
    azp: fc.constantFrom(undefined, AGENT_AUDIENCE, GRANTED.client_id, OTHER),
  });

  test('a token is accepted exactly when every rule holds; every refusal is a 401', async () => {
    let n = 0;
    const seen = { accepted: 0, refused: 0 };
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const now = Math.floor(Date.now() / 1000);
        const claims: Record<string, unknown> = { iss: provider.issuer, sub: GRANTED.client_id, aud: c.aud, exp: now + c.exp, jti: `gen-${process.pid}-${++n}-${now}` };
        if (c.iat !== undefined) claims.iat = now + c.iat;
        if (c.nbf !== undefined) claims.nbf = now + c.nbf;
        if (c.azp !== undefined) claims.azp = c.azp;
        const r = await world.proxy(await provider.sign(claims), 'GET', `/proxy/${HTTP_SOURCE}/items`);
        const accepted = expectedAccepted(c);
        seen[accepted ? 'accepted' : 'refused']++;
        expect(r.status).toBe(accepted ? 200 : 401);
      }),
      { numRuns: 80 },
    );
    // Both outcomes were exercised (the generator is not stuck on one side).
    expect(seen.accepted).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(0);
  }, 120_000);
});

describe('a token ends with its maximum age and its session with it', () => {
  test('accepted until iat + max age + tolerance, then refused on /proxy (the memo too) and the wire session ends with FATAL 28000', async () => {
    const now = Math.floor(Date.now() / 1000);
    // Valid for about 3 + CLOCK_TOLERANCE more seconds by its age, though its exp is a day away.
    const token = await provider.sign({ iss: provider.issuer, sub: GRANTED.client_id, aud: AGENT_AUDIENCE, iat: now - MAX_TOKEN_AGE + 3, exp: now + 86_400, jti: `aging-${now}` });
    expect((await world.proxy(token, 'GET', `/proxy/${HTTP_SOURCE}/items`)).status).toBe(200);
    const client = new pg.Client({ host: '127.0.0.1', port: pgPort, user: 'jwt-granted', password: token, database: PG_SOURCE, ssl: { rejectUnauthorized: false } });
    const ended = new Promise<Error & { code?: string }>((resolve) => client.on('error', resolve));
    await client.connect();
    expect((await client.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    const err = await Promise.race([ended, new Promise<null>((r) => setTimeout(() => r(null), (3 + CLOCK_TOLERANCE + 10) * 1000))]);
    expect(err?.code).toBe('28000');
    expect(err?.message).toMatch(/token this session signed in with expired/);
    await expect(client.query('select 1')).rejects.toThrow();
    await client.end().catch(() => undefined);
    // The remembered verification ended at the same moment: the next request is refused.
    await refusedOnProxy(token, /^jwt expired$/);
  }, 40_000);

  test('a session whose token has not ended keeps working (the timer is per token, not per statement)', async () => {
    const token = await provider.agentToken(GRANTED.client_id, GRANTED.client_secret);
    const client = new pg.Client({ host: '127.0.0.1', port: pgPort, user: 'jwt-granted', password: token, database: PG_SOURCE, ssl: { rejectUnauthorized: false } });
    await client.connect();
    for (let i = 0; i < 3; i++) expect((await client.query('select $1::int as n', [i])).rows).toEqual([{ n: i }]);
    await client.end();
  });
});

describe('key rotation at the provider', () => {
  test('a new kid is fetched once for many concurrent requests; tokens of the old key still verify while it is published', async () => {
    const oldToken = await provider.sign({ iss: provider.issuer, sub: GRANTED.client_id, aud: AGENT_AUDIENCE, iat: Math.floor(Date.now() / 1000), exp: Math.floor(Date.now() / 1000) + 300, jti: 'old-1' });
    expect((await world.proxy(oldToken, 'GET', `/proxy/${HTTP_SOURCE}/items`)).status).toBe(200);
    await cooldownOver();
    const before = provider.counts['/jwks'] ?? 0;
    await provider.rotate('key-2');
    const fresh = await provider.agentToken(GRANTED.client_id, GRANTED.client_secret);
    expect(JSON.parse(Buffer.from(fresh.split('.')[0]!, 'base64url').toString()).kid).toBe('key-2');
    const answers = await Promise.all(Array.from({ length: 10 }, () => world.proxy(fresh, 'GET', `/proxy/${HTTP_SOURCE}/items`)));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect((provider.counts['/jwks'] ?? 0) - before).toBe(1);
    // Another token of the old key, never seen: the cached key set still holds key-1.
    const oldAgain = await provider.sign({ iss: provider.issuer, sub: GRANTED.client_id, aud: AGENT_AUDIENCE, iat: Math.floor(Date.now() / 1000), exp: Math.floor(Date.now() / 1000) + 300, jti: 'old-2' }, provider.keys[1]);
    expect((await world.proxy(oldAgain, 'GET', `/proxy/${HTTP_SOURCE}/items`)).status).toBe(200);
  });

  test('unknown kids do not cause a fetch storm: one refresh, then the cooldown', async () => {
    const stranger = await newSigningKey('key-unknown');
    await cooldownOver();
    const before = provider.counts['/jwks'] ?? 0;
    const tokens = await Promise.all(
      Array.from({ length: 10 }, (_, i) => provider.sign({ iss: provider.issuer, sub: GRANTED.client_id, aud: AGENT_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 300, jti: `u-${i}` }, stranger)),
    );
    const answers = await Promise.all(tokens.map((t) => world.proxy(t, 'GET', `/proxy/${HTTP_SOURCE}/items`)));
    for (const t of tokens) expect((await world.proxy(t, 'GET', `/proxy/${HTTP_SOURCE}/items`)).status).toBe(401);
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(401));
    // Twenty refusals of unknown kids: exactly one key-set fetch (one in flight, then the cooldown).
    expect((provider.counts['/jwks'] ?? 0) - before).toBe(1);
  });
});
