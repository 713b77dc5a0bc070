// HTTPS upstreams through the real service: the socket goes to the checked address while TLS keeps the source's host name for SNI and certificate verification.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, startCli, type StartedCli } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { adminToken, bearer } from '../support/admin-client.js';
import { waitFor } from '../support/wait.js';

const PASSWORD = 'https-owner-password-0001';

interface TlsUpstream {
  server: Server;
  port: number;
  /** SNI name and path of every request that reached HTTP. */
  requests: { servername: string | false | null; path: string }[];
}

/** A self-signed certificate for `dnsName` (its own trust anchor). */
function selfSigned(dir: string, name: string, dnsName: string): { cert: string; key: string } {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${dnsName}`, '-addext', `subjectAltName=DNS:${dnsName}`, '-days', '1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
}

async function tlsUpstream(pair: { cert: string; key: string }): Promise<TlsUpstream> {
  const requests: TlsUpstream['requests'] = [];
  const server = createServer(pair, (req, res) => {
    requests.push({ servername: (req.socket as TLSSocket).servername, path: req.url ?? '' });
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ over: 'tls', path: req.url }));
  });
  // "localhost" may resolve to ::1 or 127.0.0.1 first: a dual-stack socket on loopback answers both.
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '::', ipv6Only: false }, () => resolve()));
  return { server, port: (server.address() as AddressInfo).port, requests };
}

describe('HTTPS upstreams', () => {
  let dir: string;
  let database: TestDatabase;
  let started: StartedCli;
  let good: TlsUpstream;
  let wrongName: TlsUpstream;
  let gateway: string;
  let key: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'gh-https-'));
    const localhost = selfSigned(dir, 'localhost', 'localhost');
    const other = selfSigned(dir, 'other', 'not-this-host.test');
    // The service trusts both certificates; only the name decides which one verifies.
    writeFileSync(path.join(dir, 'trust.pem'), localhost.cert + other.cert);
    good = await tlsUpstream(localhost);
    wrongName = await tlsUpstream(other);
    database = await createTestDatabase();
    started = await startCli(['start'], {
      env: baseEnv({
        NODE_EXTRA_CA_CERTS: path.join(dir, 'trust.pem'),
        SERVICE_ENVIRONMENT: 'test',
        SERVICE_GATEWAY__HTTP_PORT: '0',
        SERVICE_GATEWAY__PG_ENABLED: 'false',
        SERVICE_ADMIN__PORT: '0',
        SERVICE_DATABASE__URL: database.url,
        SERVICE_REDIS__URL: 'redis://127.0.0.1:6379',
        SERVICE_REDIS__KEY_PREFIX: `ghtls:${randomBytes(6).toString('hex')}:`,
        SERVICE_ADMIN__BOOTSTRAP_PASSWORD: PASSWORD,
        SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'tls,tlsbad',
        SERVICE_AUDIT__SPOOL__DIR: path.join(dir, 'spool'),
      }),
      cwd: dir,
      timeoutMs: 90_000,
    });
    gateway = `http://${started.listeners['gateway.http_port']}`;
    const adminUrl = `http://${started.listeners['admin.port']}`;
    const token = await adminToken(adminUrl, 'admin', PASSWORD);
    const admin = async (method: string, p: string, body: unknown) => {
      const res = await bearer(adminUrl, token, method, p, body);
      expect(res.status, `${method} ${p}: ${res.text}`).toBeLessThan(300);
      return res.json as Record<string, unknown>;
    };
    for (const [id, port] of [['tls', good.port], ['tlsbad', wrongName.port]] as const) {
      await admin('POST', '/api/data-sources', { name: id, source_id: id, source_type: 'http', connection_config: { base_url: `https://localhost:${port}/api/` }, create_default_roles: true });
    }
    const identity = await admin('POST', '/api/identities', { name: 'tls-agent', generate_key: true });
    key = String(identity.api_key);
    for (const id of ['tls', 'tlsbad']) await admin('POST', `/api/identities/${String(identity.id)}/grants`, { source_id: id, role_key: 'reader' });
  }, 120_000);

  afterAll(async () => {
    await started?.stop('SIGKILL');
    for (const u of [good, wrongName]) await new Promise<void>((resolve) => (u ? u.server.close(() => resolve()) : resolve()));
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = async (sourceId: string, p: string) => {
    const res = await fetch(`${gateway}/proxy/${sourceId}${p}`, { headers: { authorization: `Bearer ${key}` } });
    return { status: res.status, body: await res.text() };
  };

  it('connects to the checked loopback address and verifies the certificate against the source host name, sent as SNI', async () => {
    await waitFor(async () => (await get('tls', '/hello')).status !== 404, 10_000, 'the source registered');
    const res = await get('tls', '/hello');
    expect(res.status, res.body).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ over: 'tls', path: '/api/hello' });
    expect(good.requests.at(-1)).toEqual({ servername: 'localhost', path: '/api/hello' });
  });

  it('refuses an upstream whose certificate names another host: 502, and no request reaches it', async () => {
    await waitFor(async () => (await get('tlsbad', '/hello')).status !== 404, 10_000, 'the source registered');
    const res = await get('tlsbad', '/hello');
    expect(res.status, res.body).toBe(502);
    expect(res.body).not.toContain('not-this-host');
    expect(wrongName.requests).toEqual([]);
  });
});
