// Opening the PostgreSQL control store: fail-fast errors without the password, TLS modes, pool bound, translation of lost connections.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import pg from 'pg';
import { openControlStore } from '../../src/store/db.js';
import type { ControlStore, ControlStoreOptions } from '../../src/store/db.js';
import { StoreUnavailableError } from '../../src/store/errors.js';
import { createTempDir, createTestDatabase } from '../support/pg.js';
import type { TestDatabase } from '../support/pg.js';
import { freePort } from '../support/ports.js';

const PASSWORD = 'Sup3r-S3cret-Pa55word';

function options(url: string, extra: Partial<ControlStoreOptions> = {}): ControlStoreOptions {
  return { url, embeddedDir: '/unused', poolMax: 2, connectTimeoutMs: 2_000, ssl: { mode: 'disable' }, ...extra };
}

async function openFailure(opts: ControlStoreOptions): Promise<{ error: StoreUnavailableError; ms: number }> {
  const started = performance.now();
  const error = await openControlStore(opts).then(
    async (store) => {
      await store.close();
      throw new Error('expected openControlStore to fail');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreUnavailableError);
  const typed = error as StoreUnavailableError;
  expect(typed.code).toBe('store_unavailable');
  expect(typed.message).not.toContain(PASSWORD);
  expect(typed.stack ?? '').not.toContain(PASSWORD);
  expect(JSON.stringify(typed)).not.toContain(PASSWORD);
  return { error: typed, ms: performance.now() - started };
}

describe('openControlStore (PostgreSQL) failures', () => {
  it('fails fast on a closed port with StoreUnavailableError and no password in the message', async () => {
    const port = await freePort();
    const { error, ms } = await openFailure(options(`postgres://postgres:${PASSWORD}@127.0.0.1:${port}/control`));
    expect(error.reason).toBe('refused');
    expect(error.message).toContain(`127.0.0.1:${port}/control`);
    expect(ms).toBeLessThan(1_500);
  });

  it('times out against a server that accepts and never answers', async () => {
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = silent.address() as net.AddressInfo;
      const { error, ms } = await openFailure(options(`postgres://postgres:${PASSWORD}@127.0.0.1:${port}/x`, { connectTimeoutMs: 300 }));
      expect(error.reason).toBe('timeout');
      expect(ms).toBeLessThan(1_500);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('a server whose FATAL comes in the same read as the ReadyForQuery that completes the connection fails the open, and nothing is left unheard', async () => {
    // What a server that is shutting down can send: the connection completes, and at once it is terminated (57P01).
    const msg = (type: string, body: Buffer) => Buffer.concat([Buffer.from(type), Buffer.from([0, 0, 0, 0].map((_, i) => ((body.length + 4) >>> (24 - 8 * i)) & 0xff)), body]);
    const int32 = (n: number) => Buffer.from([(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]);
    const fatal = Buffer.concat([Buffer.from('SFATAL\0VFATAL\0C57P01\0Mterminating connection due to unexpected postmaster exit\0'), Buffer.from([0])]);
    const burst = Buffer.concat([msg('R', int32(0)), msg('K', Buffer.concat([int32(4242), int32(1)])), msg('Z', Buffer.from('I')), msg('E', fatal)]);
    const sockets: net.Socket[] = [];
    const server = net.createServer((sock) => {
      sockets.push(sock);
      sock.on('error', () => undefined);
      sock.once('data', () => sock.end(burst));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const unheard: unknown[] = [];
    const onUncaught = (error: unknown) => unheard.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      const { port } = server.address() as net.AddressInfo;
      await openFailure(options(`postgres://postgres:${PASSWORD}@127.0.0.1:${port}/control`));
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(unheard).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('reports a missing database as such, without the password', async () => {
    const { error } = await openFailure(options(`postgres://postgres:${PASSWORD}@127.0.0.1:5432/gh_no_such_database_${Date.now()}`));
    expect(error.reason).toBe('unknown_database');
  });

  it('refuses a malformed URL without echoing it', async () => {
    const { error } = await openFailure(options(`postgres://postgres:${PASSWORD}@127.0.0.1:notaport/x`));
    expect(error.reason).toBe('invalid_url');
  });
});

describe('openControlStore (PostgreSQL) on a live database', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('pings, reads int8 as a number, and refuses to ping after close', async () => {
    const store = await openControlStore(options(database.url));
    expect(store.kind).toBe('postgres');
    expect(store.target).toBe(`127.0.0.1:5432/${database.name}`);
    await store.ping();
    const { rows } = await sql<{ n: number }>`select 9007199254740991::int8 as n`.execute(store.db);
    expect(rows[0]!.n).toBe(Number.MAX_SAFE_INTEGER);
    await store.close();
    await expect(store.ping()).rejects.toMatchObject({ code: 'store_unavailable', reason: 'closed' });
    await store.close(); // idempotent
  });

  it('never opens more connections than poolMax', async () => {
    const store = await openControlStore(options(database.url, { poolMax: 2 }));
    try {
      await Promise.all(Array.from({ length: 6 }, () => sql`select pg_sleep(0.1)`.execute(store.db)));
      const { rows } = await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity where datname = ${database.name} and application_name = 'gatehouse'`.execute(store.db);
      expect(rows[0]!.n).toBeGreaterThanOrEqual(1);
      expect(rows[0]!.n).toBeLessThanOrEqual(2);
    } finally {
      await store.close();
    }
  });

  it('a statement error quoting words of connection failures stays a statement error', async () => {
    const store = await openControlStore(options(database.url));
    try {
      for (const word of ['certificate', 'SSL', 'Connection terminated', 'timeout expired']) {
        const err = await sql`select ${word}::int`.execute(store.db).catch((e: unknown) => e);
        expect(err).toMatchObject({ code: '22P02' });
        expect(err).not.toBeInstanceOf(StoreUnavailableError);
      }
    } finally {
      await store.close();
    }
  });

  it('applies the statement timeout', async () => {
    const store = await openControlStore(options(database.url, { statementTimeoutMs: 100 }));
    try {
      await expect(sql`select pg_sleep(2)`.execute(store.db)).rejects.toMatchObject({ code: '57014' });
    } finally {
      await store.close();
    }
  });

  it('translates a connection killed mid-query into StoreUnavailableError, then recovers', async () => {
    const store = await openControlStore(options(database.url));
    try {
      const running = sql`select pg_sleep(5)`.execute(store.db).catch((e: unknown) => e);
      const admin = new pg.Client({ connectionString: database.url });
      await admin.connect();
      try {
        for (let i = 0; i < 50; i++) {
          const { rows } = await admin.query(
            "select pg_terminate_backend(pid) as t from pg_stat_activity where datname = $1 and application_name = 'gatehouse' and query like '%pg_sleep(5)%' and pid <> pg_backend_pid()",
            [database.name],
          );
          if (rows.length > 0) break;
          await new Promise((r) => setTimeout(r, 20));
        }
      } finally {
        await admin.end();
      }
      const error = await running;
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).reason).toBe('terminated');
      await store.ping();
    } finally {
      await store.close();
    }
  });

  it('ssl_mode: prefer falls back to plaintext when the server has no TLS; require refuses; URL sslmode is ignored', async () => {
    const { rows } = await sql<{ ssl: string }>`show ssl`.execute((await useProbe(database.url)).db);
    if (rows[0]!.ssl === 'off') {
      const prefer = await openControlStore(options(database.url, { ssl: { mode: 'prefer' } }));
      await prefer.ping();
      await prefer.close();
      const { error } = await openFailure(options(`${database.url}?sslmode=disable`, { ssl: { mode: 'require' } }));
      expect(error.reason).toBe('tls');
    } else {
      const require = await openControlStore(options(`${database.url}?sslmode=disable`, { ssl: { mode: 'require' } }));
      const { rows: tlsRows } = await sql<{ ssl: boolean }>`select ssl from pg_stat_ssl where pid = pg_backend_pid()`.execute(require.db);
      expect(tlsRows[0]!.ssl).toBe(true);
      await require.close();
    }
  });
});

let probe: ControlStore | undefined;
async function useProbe(url: string): Promise<ControlStore> {
  probe ??= await openControlStore(options(url, { poolMax: 1 }));
  return probe;
}
afterAll(async () => {
  await probe?.close();
});

/**
 * A stand-in server that accepts the SSLRequest, completes a TLS handshake with the given
 * certificate, then refuses the login with 28P01: reaching "auth_failed" proves the certificate
 * was accepted, "tls" that it was rejected.
 */
async function tlsStandIn(key: string, cert: string): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('data', () => {
      socket.write('S');
      const secure = new tls.TLSSocket(socket, { isServer: true, key, cert });
      secure.on('error', () => undefined);
      secure.once('data', () => {
        const fields = Buffer.from('SFATAL\0C28P01\0Mpassword authentication failed\0\0');
        const header = Buffer.alloc(5);
        header.write('E', 0);
        header.writeInt32BE(fields.length + 4, 1);
        secure.end(Buffer.concat([header, fields]));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('openControlStore TLS verification (verify-ca / verify-full)', () => {
  let dir: { dir: string; remove(): Promise<void> };
  const file = (name: string) => path.join(dir.dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir.dir, stdio: 'pipe' });

  beforeAll(async () => {
    dir = await createTempDir('gh-tls-');
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    for (const ca of ['ca', 'other-ca']) {
      openssl('req', '-x509', ...ec, '-keyout', `${ca}.key`, '-out', `${ca}.crt`, '-days', '1', '-subj', `/CN=${ca}`);
    }
    for (const [name, san] of [
      ['right', 'IP:127.0.0.1'],
      ['wrong-host', 'DNS:db.elsewhere.example'],
    ] as const) {
      writeFileSync(file(`${name}.ext`), `subjectAltName=${san}\n`);
      openssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
      openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '1', '-extfile', `${name}.ext`);
    }
  });
  afterAll(async () => {
    await dir?.remove();
  });

  async function attempt(certName: string, mode: 'verify-ca' | 'verify-full' | 'require', caFile: string | null): Promise<string> {
    const server = await tlsStandIn(readFileSync(file(`${certName}.key`), 'utf8'), readFileSync(file(`${certName}.crt`), 'utf8'));
    try {
      const { error } = await openFailure(options(`postgres://postgres:${PASSWORD}@127.0.0.1:${server.port}/control`, { ssl: { mode, caFile } }));
      return error.reason;
    } finally {
      await server.close();
    }
  }

  it('verify-full accepts a certificate from the CA file naming the host, and rejects any other', async () => {
    expect(await attempt('right', 'verify-full', file('ca.crt'))).toBe('auth_failed');
    expect(await attempt('right', 'verify-full', file('other-ca.crt'))).toBe('tls');
    expect(await attempt('right', 'verify-full', null)).toBe('tls');
    expect(await attempt('wrong-host', 'verify-full', file('ca.crt'))).toBe('tls');
  });

  it('verify-ca checks the chain but not the host name; require checks neither', async () => {
    expect(await attempt('wrong-host', 'verify-ca', file('ca.crt'))).toBe('auth_failed');
    expect(await attempt('right', 'verify-ca', file('other-ca.crt'))).toBe('tls');
    expect(await attempt('wrong-host', 'require', null)).toBe('auth_failed');
  });

  it('an unreadable CA file is a clear StoreUnavailableError', async () => {
    const { error } = await openFailure(options(`postgres://postgres:${PASSWORD}@127.0.0.1:1/x`, { ssl: { mode: 'verify-full', caFile: file('missing.crt') } }));
    expect(error.reason).toBe('tls');
    expect(error.message).toContain('ssl_ca_file');
  });
});
