// ssl_mode means the same on the connection test and on every execution path: each libpq mode against a real server with TLS (a private cluster, certificate made here) and one without (the local server).
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { testPostgres } from '../../src/connectors/postgres.js';
import { PostgresExecutor, UpstreamPools } from '../../src/connectors/postgres-exec.js';
import { createPiiScanner } from '../../src/governance/pii/index.js';
import { createLogger } from '../../src/observability/logger.js';
import type { RegisteredSource } from '../../src/registry/sources.js';
import { startPgServer, type PgServerHandle } from '../support/pg-server.js';
import { TEST_PG_HOST, TEST_PG_PORT } from '../support/pg.js';
import { startWireWorld } from '../pgwire/fixture.js';

/** A CA and a server certificate it signs for `localhost` and 127.0.0.1, readable by the cluster's user. */
function makeCertificates(dir: string): { caFile: string; certFile: string; keyFile: string; otherCaFile: string } {
  const f = (name: string) => join(dir, name);
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '2', '-subj', '/CN=gatehouse test CA']);
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost']);
  writeFileSync(f('san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.crt'), '-days', '2', '-extfile', f('san.ext')]);
  // A CA that signed nothing here: verification against it must fail.
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('other.key'), '-out', f('other.crt'), '-days', '2', '-subj', '/CN=some other CA']);
  if (process.getuid?.() === 0) {
    const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
    chownSync(dir, id('-u'), id('-g'));
    for (const name of ['server.key', 'server.crt', 'ca.crt']) chownSync(f(name), id('-u'), id('-g'));
  }
  chmodSync(f('server.key'), 0o600);
  return { caFile: f('ca.crt'), certFile: f('server.crt'), keyFile: f('server.key'), otherCaFile: f('other.crt') };
}

let tlsServer: PgServerHandle;
let certDir: string;
let certs: ReturnType<typeof makeCertificates>;
const log = createLogger({ level: 'silent', service: 'test', role: 'gateway' });

beforeAll(async () => {
  certDir = mkdtempSync(join(tmpdir(), 'gh-pg-tls-'));
  certs = makeCertificates(certDir);
  tlsServer = await startPgServer({ settings: { ssl: 'on', ssl_cert_file: certs.certFile, ssl_key_file: certs.keyFile } });
}, 60_000);

afterAll(async () => {
  await tlsServer?.remove();
  rmSync(certDir, { recursive: true, force: true });
});

const TLS = () => ({ host: '127.0.0.1', port: tlsServer.port, database: 'postgres', user: 'postgres' });
const PLAIN = { host: TEST_PG_HOST, port: TEST_PG_PORT, database: 'postgres', user: 'postgres' };
const connectionTest = (config: Record<string, unknown>) => testPostgres(config, { resolveSecret: () => ({ ok: false, problem: 'unset' }) as never, timeoutMs: 5_000, checkTarget: async (host) => ({ address: host }) });

/**
 * The execution path: the wire listener's, the MCP query tool's and approval execution's pools, with egress mapping
 * the registered host to the server's address. Answers whether the session is encrypted, as the server sees it.
 */
async function sessionUsesTls(config: Record<string, unknown>, address = '127.0.0.1'): Promise<boolean> {
  const pools = new UpstreamPools({ log, resolveSecretRef: () => ({ ok: false, problem: 'unset' }) as never, checkTarget: async () => ({ address }), maxMessageBytes: 1 << 20, connectTimeoutMs: 5_000 });
  const executor = new PostgresExecutor(pools, createPiiScanner());
  const source = { source_id: 'tls-src', source_type: 'postgres', enabled: true, connection_config: config } as unknown as RegisteredSource;
  try {
    const r = await executor.executeSql({ source, identity: { mapped_pg_role: null }, sql: 'select ssl::text from pg_stat_ssl where pid = pg_backend_pid()', params: [], maxRows: 1 });
    return r.rows[0]![0] === 'true';
  } finally {
    await pools.close();
  }
}

describe('against a server with TLS', () => {
  test('disable connects in plain', async () => {
    expect(await connectionTest({ ...TLS(), ssl_mode: 'disable' })).toMatchObject({ ok: true });
    expect(await sessionUsesTls({ ...TLS(), ssl_mode: 'disable' })).toBe(false);
  });

  test('prefer (the default) and require encrypt', async () => {
    for (const mode of [undefined, 'prefer', 'require']) {
      const config = { ...TLS(), ...(mode ? { ssl_mode: mode } : {}) };
      expect(await connectionTest(config)).toMatchObject({ ok: true });
      expect(await sessionUsesTls(config)).toBe(true);
    }
  });

  test('verify-ca checks the chain against ssl_ca_file, not the host name', async () => {
    const config = { ...TLS(), host: 'db.example.test', ssl_mode: 'verify-ca', ssl_ca_file: certs.caFile };
    expect(await sessionUsesTls(config)).toBe(true);
    expect(await connectionTest({ ...TLS(), ssl_mode: 'verify-ca', ssl_ca_file: certs.caFile })).toMatchObject({ ok: true });
    // Another CA, or none (the system roots): the self-made chain is not trusted.
    expect(await connectionTest({ ...TLS(), ssl_mode: 'verify-ca', ssl_ca_file: certs.otherCaFile })).toMatchObject({ ok: false, error: 'TLS certificate not trusted' });
    expect(await connectionTest({ ...TLS(), ssl_mode: 'verify-ca' })).toMatchObject({ ok: false, error: 'TLS certificate not trusted' });
    await expect(sessionUsesTls({ ...config, ssl_ca_file: certs.otherCaFile })).rejects.toThrow(/TLS certificate not trusted/);
  });

  test('verify-full also checks that the certificate names the registered host (not the address egress resolved)', async () => {
    const config = { ...TLS(), ssl_mode: 'verify-full', ssl_ca_file: certs.caFile };
    expect(await connectionTest(config)).toMatchObject({ ok: true });
    expect(await sessionUsesTls(config)).toBe(true);
    // Registered as localhost, reached at 127.0.0.1: the certificate names localhost, so it passes.
    expect(await sessionUsesTls({ ...config, host: 'localhost' })).toBe(true);
    // Registered under a name the certificate does not carry, though egress leads to the right address.
    await expect(sessionUsesTls({ ...config, host: 'db.example.test' })).rejects.toThrow(/TLS certificate does not name the host/);
    expect(await connectionTest({ ...config, ssl_ca_file: certs.otherCaFile })).toMatchObject({ ok: false, error: 'TLS certificate not trusted' });
  });

  test('an unreadable or non-PEM ssl_ca_file is named by its setting, never by its path or content', async () => {
    const missing = await connectionTest({ ...TLS(), ssl_mode: 'verify-full', ssl_ca_file: join(certDir, 'absent.pem') });
    expect(missing).toMatchObject({ ok: false, error: 'connection_config.ssl_ca_file cannot be read' });
    const notPem = await connectionTest({ ...TLS(), ssl_mode: 'verify-full', ssl_ca_file: join(certDir, 'san.ext') });
    expect(notPem).toMatchObject({ ok: false, error: 'connection_config.ssl_ca_file holds no PEM certificate' });
    await expect(sessionUsesTls({ ...TLS(), ssl_mode: 'verify-ca', ssl_ca_file: join(certDir, 'absent.pem') })).rejects.toThrow(/ssl_ca_file cannot be read/);
  });
});

describe('against a server without TLS (the local server, ssl off)', () => {
  test('prefer (the default) and disable connect in plain on every path', async () => {
    for (const config of [{ ...PLAIN }, { ...PLAIN, ssl_mode: 'prefer' }, { ...PLAIN, ssl_mode: 'disable' }]) {
      expect(await connectionTest(config)).toMatchObject({ ok: true });
      expect(await sessionUsesTls(config)).toBe(false);
    }
  });

  test('require, verify-ca and verify-full refuse: the server offers no TLS', async () => {
    for (const mode of ['require', 'verify-ca', 'verify-full']) {
      const config = { ...PLAIN, ssl_mode: mode, ssl_ca_file: certs.caFile };
      expect(await connectionTest(config)).toMatchObject({ ok: false, error: 'the server does not offer TLS' });
      await expect(sessionUsesTls(config)).rejects.toThrow(/does not offer TLS/);
    }
  });

  test('psql through the gateway works on a source registered with the defaults', async () => {
    // No ssl_mode: the source takes the default (prefer) against the stock local server.
    const ww = await startWireWorld({ sourceId: 'tls_default', sourceConfig: { ssl_mode: undefined } });
    try {
      const agent = await ww.world.agent('tls-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
      const r = await ww.psql('tls-reader', agent.key, ['-Atc', 'select name from customers order by id']);
      expect(r.stderr).toBe('');
      expect(r.stdout.trim().split('\n')).toEqual(['Ada', 'Bob']);
    } finally {
      await ww.stop();
    }
  }, 60_000);
});
