// TLS on the gateway and admin HTTP listeners through the real CLI: curl and undici as clients, client certificates (mTLS) on the admin listener, and SIGHUP swapping certificates without dropping open connections.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, rm, readFile, writeFile, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes, X509Certificate } from 'node:crypto';
import tls from 'node:tls';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { baseEnv, startCli, type StartedCli } from '../support/cli.js';
import { createTestDatabase, type TestDatabase } from '../support/pg.js';
import { waitFor } from '../support/wait.js';

let dir: string;
let database: TestDatabase;
let service: StartedCli;
let gatewayPort: number;
let adminPort: number;

function openssl(args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A P-256 key and a certificate for `cn` signed by the test CA (or self-signed with `selfSigned`). */
function issue(name: string, cn: string, opts: { server?: boolean; selfSigned?: boolean } = {}): void {
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key`]);
  if (opts.selfSigned) {
    openssl(['req', '-x509', '-new', '-key', `${name}.key`, '-subj', `/CN=${cn}`, '-days', '1', '-out', `${name}.crt`]);
    return;
  }
  openssl(['req', '-new', '-key', `${name}.key`, '-subj', `/CN=${cn}`, '-out', `${name}.csr`]);
  const ext = opts.server ? 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' : 'extendedKeyUsage=clientAuth\n';
  execFileSync('sh', ['-c', `printf '${ext.replace(/\n/g, '\\n')}' > ${name}.ext`], { cwd: dir });
  openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', `${name}.ext`, '-out', `${name}.crt`]);
}

const file = (name: string) => path.join(dir, name);

function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['-sS', '--max-time', '10', ...args], (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

/** One TLS connection kept open: its peer certificate, and HTTP/1.1 requests sent over it one after another. */
async function openConnection(port: number, extra: tls.ConnectionOptions = {}): Promise<{ socket: tls.TLSSocket; cn: string; get(pathname: string): Promise<string> }> {
  const ca = await readFile(file('ca.crt'));
  const socket = tls.connect({ host: '127.0.0.1', port, ca, ...extra });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', () => resolve()).once('error', reject));
  const cn = socket.getPeerX509Certificate()!.subject.replace(/^CN=/, '');
  return {
    socket,
    cn,
    get(pathname) {
      return new Promise((resolve, reject) => {
        let data = '';
        const onData = (d: Buffer) => {
          data += d.toString();
          const head = data.indexOf('\r\n\r\n');
          if (head < 0) return;
          const length = Number(/content-length: (\d+)/i.exec(data.slice(0, head))?.[1] ?? '0');
          if (data.length - head - 4 < length) return;
          socket.off('data', onData);
          resolve(data);
        };
        socket.on('data', onData);
        socket.once('error', reject);
        socket.write(`GET ${pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n`);
      });
    },
  };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'gh-tls-'));
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'ca.key']);
  openssl(['req', '-x509', '-new', '-key', 'ca.key', '-subj', '/CN=gatehouse-test-ca', '-days', '1', '-out', 'ca.crt']);
  issue('gateway-v1', 'gateway-v1', { server: true });
  issue('gateway-v2', 'gateway-v2', { server: true });
  issue('admin', 'admin-listener', { server: true });
  issue('client', 'operator-client');
  issue('rogue', 'rogue-client', { selfSigned: true });
  await copyFile(file('gateway-v1.crt'), file('gateway.crt'));
  await copyFile(file('gateway-v1.key'), file('gateway.key'));
  database = await createTestDatabase();
  const env = baseEnv({
    SERVICE_ENVIRONMENT: 'test',
    SERVICE_GATEWAY__HTTP_PORT: '0',
    SERVICE_GATEWAY__PG_ENABLED: 'false',
    SERVICE_ADMIN__PORT: '0',
    SERVICE_DATABASE__URL: database.url,
    SERVICE_REDIS__URL: 'redis://127.0.0.1:6379',
    SERVICE_REDIS__KEY_PREFIX: `ghtls:${randomBytes(6).toString('hex')}:`,
    SERVICE_AUDIT__SPOOL__DIR: file('spool'),
    SERVICE_GATEWAY__TLS__CERT_FILE: file('gateway.crt'),
    SERVICE_GATEWAY__TLS__KEY_FILE: file('gateway.key'),
    SERVICE_ADMIN__TLS__CERT_FILE: file('admin.crt'),
    SERVICE_ADMIN__TLS__KEY_FILE: file('admin.key'),
    SERVICE_ADMIN__TLS__CLIENT_CA_FILE: file('ca.crt'),
  });
  service = await startCli(['start'], { env, cwd: dir, timeoutMs: 90_000 });
  gatewayPort = Number(service.listeners['gateway.http_port']!.split(':').pop());
  adminPort = Number(service.listeners['admin.port']!.split(':').pop());
}, 120_000);

afterAll(async () => {
  await service?.stop();
  await database?.drop();
  await rm(dir, { recursive: true, force: true });
});

describe('gateway.tls', () => {
  test('curl verifies the certificate against the CA and gets /health; plain HTTP is not served', async () => {
    const ok = await curl(['--cacert', file('ca.crt'), `https://127.0.0.1:${gatewayPort}/health`]);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ status: 'ok' });
    const untrusted = await curl([`https://127.0.0.1:${gatewayPort}/health`]);
    expect(untrusted.code).toBe(60); // CURLE_PEER_FAILED_VERIFICATION: no trust without the CA
    const plain = await curl([`http://127.0.0.1:${gatewayPort}/health`]);
    expect(plain.stdout).not.toContain('"status"');
  });

  test('undici with the CA: the agent-facing endpoints answer over TLS', async () => {
    const dispatcher = new Agent({ connect: { ca: await readFile(file('ca.crt')) } });
    const res = await undiciFetch(`https://127.0.0.1:${gatewayPort}/proxy/nothing/here`, { dispatcher });
    expect(res.status).toBe(401);
    await dispatcher.close();
  });
});

describe('admin.tls with a client CA (mTLS)', () => {
  test('a client certificate the CA signed is required', async () => {
    const withCert = await curl(['--cacert', file('ca.crt'), '--cert', file('client.crt'), '--key', file('client.key'), `https://127.0.0.1:${adminPort}/health`]);
    expect(withCert.stderr).toBe('');
    expect(JSON.parse(withCert.stdout)).toMatchObject({ status: 'ok' });
    const without = await curl(['--cacert', file('ca.crt'), `https://127.0.0.1:${adminPort}/health`]);
    expect(without.code).not.toBe(0);
    const rogue = await curl(['--cacert', file('ca.crt'), '--cert', file('rogue.crt'), '--key', file('rogue.key'), `https://127.0.0.1:${adminPort}/health`]);
    expect(rogue.code).not.toBe(0);
  });

  test('undici with a client certificate', async () => {
    const dispatcher = new Agent({ connect: { ca: await readFile(file('ca.crt')), cert: await readFile(file('client.crt')), key: await readFile(file('client.key')) } });
    const res = await undiciFetch(`https://127.0.0.1:${adminPort}/ready`, { dispatcher });
    expect(res.status).toBe(200);
    await dispatcher.close();
  });
});

describe('SIGHUP', () => {
  test('new connections get the new certificate; an open connection keeps working', async () => {
    const before = await openConnection(gatewayPort);
    expect(before.cn).toBe('gateway-v1');
    expect(await before.get('/health')).toMatch(/^HTTP\/1\.1 200/);

    // The files are replaced in place, as cert-manager or certbot do.
    await writeFile(file('gateway.crt'), await readFile(file('gateway-v2.crt')));
    await writeFile(file('gateway.key'), await readFile(file('gateway-v2.key')));
    service.child.kill('SIGHUP');
    await waitFor(() => service.output().stdout.includes('"TLS certificates reloaded"'), 10_000);
    const line = service.output().stdout.split('\n').find((l) => l.includes('"TLS certificates reloaded"'))!;
    expect(JSON.parse(line).reloaded.sort()).toEqual(['admin.tls', 'gateway.tls']);

    const after = await openConnection(gatewayPort);
    expect(after.cn).toBe('gateway-v2');
    expect(new X509Certificate(await readFile(file('gateway-v2.crt'))).subject).toBe('CN=gateway-v2');
    // The connection opened before the reload was not dropped and still serves requests.
    expect(before.socket.destroyed).toBe(false);
    expect(await before.get('/health')).toMatch(/^HTTP\/1\.1 200/);
    before.socket.destroy();
    after.socket.destroy();
  });

  test('a broken file leaves the previous certificate in force and says which key', async () => {
    await writeFile(file('gateway.key'), 'not a key');
    service.child.kill('SIGHUP');
    await waitFor(() => service.output().stdout.includes('some listeners keep their previous certificate'), 10_000);
    const line = service.output().stdout.split('\n').find((l) => l.includes('some listeners keep their previous certificate'))!;
    const record = JSON.parse(line) as { failed: Array<{ key: string; error: string }>; reloaded: string[] };
    expect(record.failed.map((f) => f.key)).toEqual(['gateway.tls']);
    expect(record.failed[0]!.error).toMatch(/^gateway\.tls: the certificate, key or client CA cannot be used/);
    expect(record.reloaded).toEqual(['admin.tls']);
    const still = await openConnection(gatewayPort);
    expect(still.cn).toBe('gateway-v2');
    expect(await still.get('/health')).toMatch(/^HTTP\/1\.1 200/);
    still.socket.destroy();
  });
});
