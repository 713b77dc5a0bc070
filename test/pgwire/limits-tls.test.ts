// The wire listener's TLS (SSLRequest upgrade, require_client_tls), framing caps (startup packet and message sizes, 08P01) and the result row bound (54000), with real clients.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import pg from 'pg';
import { startWireWorld, wireAudit, sqlError, type WireWorld } from './fixture.js';

const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
const PROTOCOL_V3 = 196608;

let certDir: string;
let certFile: string;
let keyFile: string;

beforeAll(() => {
  certDir = mkdtempSync(join(tmpdir(), 'gh-pgwire-tls-'));
  certFile = join(certDir, 'cert.pem');
  keyFile = join(certDir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-days', '1', '-keyout', keyFile, '-out', certFile], { stdio: 'ignore' });
});
afterAll(() => rmSync(certDir, { recursive: true, force: true }));


/** A startup packet (protocol 3.0) with the given parameters. */
function startupPacket(params: Record<string, string>): Buffer {
  const body = Buffer.concat([...Object.entries(params).map(([k, v]) => Buffer.from(`${k}\0${v}\0`)), Buffer.from([0])]);
  const head = Buffer.alloc(8);
  head.writeInt32BE(8 + body.length, 0);
  head.writeInt32BE(PROTOCOL_V3, 4);
  return Buffer.concat([head, body]);
}

/** Writes bytes on a raw socket and collects the answer until the server closes it, `enough` says so, or `waitMs` passes. */
function rawExchange(port: number, bytes: Buffer, waitMs = 3_000, enough?: (data: Buffer) => boolean): Promise<{ data: Buffer; closed: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ data: Buffer.concat(chunks), closed });
    };
    const timer = setTimeout(() => done(false), waitMs);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (enough?.(Buffer.concat(chunks))) done(false);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => done(true));
  });
}

/** The fields of the first backend message when it is an ErrorResponse, else null. */
function errorFields(data: Buffer): Record<string, string> | null {
  if (data.length < 5 || data[0] !== 0x45) return null;
  const end = 1 + data.readInt32BE(1);
  const fields: Record<string, string> = {};
  for (const part of data.subarray(5, end).toString('utf8').split('\0')) if (part) fields[part[0]!] = part.slice(1);
  return fields;
}

function psql(ww: WireWorld, user: string, password: string, sslmode: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'psql',
      ['-X', '-h', '127.0.0.1', '-p', String(ww.port), '-U', user, '-d', ww.sourceId, ...args],
      { env: { ...process.env, PGPASSWORD: password, PGSSLMODE: sslmode, PGCONNECT_TIMEOUT: '10' }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

function streamOf(c: pg.Client): net.Socket {
  return (c as unknown as { connection: { stream: net.Socket } }).connection.stream;
}

/** Runs a query with a row listener: the rows delivered before the statement ended, and its error if any. */
function rowsThenEnd(c: pg.Client, text: string, values?: unknown[]): Promise<{ rows: unknown[]; error: { code?: string; message: string } | null }> {
  return new Promise((resolve) => {
    const rows: unknown[] = [];
    const q = new pg.Query(text, values);
    q.on('row', (r: unknown) => rows.push(r));
    q.on('error', (error: { code?: string; message: string }) => resolve({ rows, error }));
    q.on('end', () => resolve({ rows, error: null }));
    c.query(q);
  });
}

describe('TLS offered, plain allowed; framing caps; row bound', () => {
  let ww: WireWorld;
  let reader: { id: number; key: string };

  beforeAll(async () => {
    ww = await startWireWorld({
      sourceId: 'tlssrc',
      env: {
        SERVICE_GATEWAY__PG_TLS__CERT_FILE: certFile,
        SERVICE_GATEWAY__PG_TLS__KEY_FILE: keyFile,
        SERVICE_GATEWAY__LIMITS__PG_MESSAGE_BYTES: '1024',
        SERVICE_GATEWAY__LIMITS__RESULT_ROWS: '5',
      },
    });
    reader = await ww.world.agent('tls-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  }, 60_000);
  afterAll(async () => ww?.stop());

  describe('TLS', () => {
    test('psql with sslmode=require logs in over TLS (\\conninfo) and runs a statement', async () => {
      const r = await psql(ww, 'tls-reader', reader.key, 'require', ['-c', '\\conninfo', '-c', 'select name from customers where id = 1']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/SSL connection \(protocol: TLSv1\.[23]/);
      expect(r.stdout).toContain('Ada');
    });

    test('node-postgres with ssl gets the configured certificate and a working session', async () => {
      const c = await ww.client('tls-reader', reader.key, { ssl: { rejectUnauthorized: false } });
      try {
        const stream = streamOf(c);
        expect(stream).toBeInstanceOf(tls.TLSSocket);
        expect((stream as tls.TLSSocket).encrypted).toBe(true);
        expect((stream as tls.TLSSocket).getPeerCertificate().fingerprint256).toBe(new X509Certificate(readFileSync(certFile)).fingerprint256);
        expect((await c.query('select name from customers where id = $1', [2])).rows).toEqual([{ name: 'Bob' }]);
      } finally {
        await c.end();
      }
    });

    test('without require_client_tls a plain login still works', async () => {
      const c = await ww.client('tls-reader', reader.key, { ssl: false });
      try {
        expect(streamOf(c)).not.toBeInstanceOf(tls.TLSSocket);
        expect((await c.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await c.end();
      }
    });

    test('bytes sent after an SSLRequest, before the handshake, are refused (08P01), not treated as encrypted', async () => {
      // A man in the middle could inject a plaintext startup behind the client's SSLRequest (cf. CVE-2021-23214).
      const r = await rawExchange(ww.port, Buffer.concat([SSL_REQUEST, startupPacket({ user: 'tls-reader', database: ww.sourceId })]));
      expect(r.data[0]).not.toBe(0x53); // no 'S'
      expect(errorFields(r.data)).toMatchObject({ S: 'FATAL', C: '08P01' });
      expect(r.closed).toBe(true);
    });
  });

  describe('framing caps', () => {
    test('a startup packet of exactly pg_startup_packet_bytes (10,000) is read; one byte more is 08P01 and the connection closes', async () => {
      const fill = (n: number) => {
        const base = startupPacket({ user: 'nobody-at-all', application_name: '' });
        return startupPacket({ user: 'nobody-at-all', application_name: 'x'.repeat(n - base.length) });
      };
      expect(fill(10_000).length).toBe(10_000);
      const atCap = await rawExchange(ww.port, fill(10_000), 3_000, (d) => d.length >= 9);
      // Authentication request (SASL) for the (unknown, decoy) user: the packet was accepted.
      expect(atCap.data[0]).toBe(0x52);
      expect(atCap.data.readInt32BE(5)).toBe(10);

      const over = await rawExchange(ww.port, fill(10_001));
      expect(errorFields(over.data)).toMatchObject({ S: 'FATAL', C: '08P01' });
      expect(over.closed).toBe(true);
      // The length is judged before the body arrives: a header claiming 1 MB is refused at once.
      const claim = Buffer.alloc(8);
      claim.writeInt32BE(1_000_000, 0);
      claim.writeInt32BE(PROTOCOL_V3, 4);
      const started = Date.now();
      const huge = await rawExchange(ww.port, claim);
      expect(errorFields(huge.data)).toMatchObject({ C: '08P01' });
      expect(huge.closed).toBe(true);
      expect(Date.now() - started).toBeLessThan(2_000);
    });

    test('a message of exactly pg_message_bytes (1024) passes; above it is 08P01, the session closes and the gateway serves others', async () => {
      const bystander = await ww.client('tls-reader', reader.key);
      try {
        // Query message: type byte + length + SQL + NUL.
        const sqlOf = (total: number) => {
          const head = "select '";
          const tail = "' as v";
          return head + 'y'.repeat(total - 1 - 4 - 1 - head.length - tail.length) + tail;
        };
        const c = await ww.client('tls-reader', reader.key);
        const ended = new Promise<void>((resolve) => c.on('end', () => resolve()));
        expect((await c.query(sqlOf(1024))).rows[0].v).toHaveLength(1024 - 6 - 14);
        const err = await sqlError(c.query(sqlOf(1025)));
        expect(err.code).toBe('08P01');
        await ended;

        // The extended protocol: an oversized Bind (a long parameter).
        const e = await ww.client('tls-reader', reader.key);
        const eEnded = new Promise<void>((resolve) => e.on('end', () => resolve()));
        expect((await sqlError(e.query('select $1::text as v', ['z'.repeat(2_000)]))).code).toBe('08P01');
        await eEnded;

        // Sessions ended this way give their upstream connection back (pool_max 10): more than ten in a row, then a new client.
        for (let i = 0; i < 11; i++) {
          const v = await ww.client('tls-reader', reader.key);
          await sqlError(v.query(sqlOf(2_000)));
          await v.end().catch(() => undefined);
        }
        const fresh = await ww.client('tls-reader', reader.key);
        expect((await fresh.query('select 2 as two')).rows).toEqual([{ two: 2 }]);
        await fresh.end();
        expect((await bystander.query('select 3 as three')).rows).toEqual([{ three: 3 }]);
      } finally {
        await bystander.end();
      }
    });
  });

  describe('row bound (gateway.limits.result_rows = 5)', () => {
    test('simple protocol: at most 5 rows, then 54000; the session goes on', async () => {
      const c = await ww.client('tls-reader', reader.key);
      try {
        const r = await rowsThenEnd(c, 'select generate_series(1, 100) as n');
        expect(r.error?.code).toBe('54000');
        expect(r.rows.length).toBeLessThanOrEqual(5);
        expect(r.rows).toEqual([1, 2, 3, 4, 5].map((n) => ({ n })));
        expect((await c.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await c.end();
      }
    });

    test('extended protocol: at most 5 rows, then 54000; exactly 5 rows is no error', async () => {
      const c = await ww.client('tls-reader', reader.key);
      try {
        const r = await rowsThenEnd(c, 'select generate_series(1, $1::int) as n', [100]);
        expect(r.error?.code).toBe('54000');
        expect(r.rows.length).toBeLessThanOrEqual(5);
        const five = await c.query('select generate_series(1, $1::int) as n', [5]);
        expect(five.rows).toHaveLength(5);
        const simpleFive = await c.query('select generate_series(1, 5) as n');
        expect(simpleFive.rows).toHaveLength(5);
      } finally {
        await c.end();
      }
    });

    test('a multi-statement query cut by the bound answers 54000 and nothing more of it; the session goes on', async () => {
      const c = await ww.client('tls-reader', reader.key);
      const errors: Error[] = [];
      c.on('error', (e) => errors.push(e));
      try {
        const r = await rowsThenEnd(c, "select generate_series(1, 100) as n; select 'later' as later_marker");
        expect(r.error?.code).toBe('54000');
        expect(r.rows).toEqual([1, 2, 3, 4, 5].map((n) => ({ n })));
        expect((await c.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
        expect(errors).toEqual([]);
      } finally {
        await c.end();
      }
      const p = await psql(ww, 'tls-reader', reader.key, 'disable', ['-c', "select 1 as a; select generate_series(1, 100) as n; select 'later' as later_marker"]);
      expect(p.stderr).toContain('row limit (5 rows)');
      expect(p.stdout).not.toContain('later');
      // The later statement ran upstream: its entry says it was executed and that its output was withheld.
      const later = (await wireAudit(ww)).filter((e) => e.identity_id === reader.id && String(e.sql_normalized ?? '').includes('later_marker'));
      expect(later.length).toBe(2);
      for (const e of later) {
        expect(e).toMatchObject({ decision: 'allow', status: 200 });
        expect(e.reasons).toEqual(expect.arrayContaining([expect.stringContaining('output withheld')]));
      }
    });

    test('the audit entry of a cut statement says so', async () => {
      const marker = `rowcap_${Date.now()}`;
      const c = await ww.client('tls-reader', reader.key);
      try {
        expect((await sqlError(c.query(`select generate_series(1, 50) as n, '${marker}' as m`))).code).toBe('54000');
      } finally {
        await c.end();
      }
      const entries = (await wireAudit(ww)).filter((e) => e.identity_id === reader.id && e.error_code === 'payload_too_large');
      expect(entries.length).toBeGreaterThanOrEqual(1);
    });
  });
});

describe('require_client_tls', () => {
  let ww: WireWorld;
  let reader: { id: number; key: string };

  beforeAll(async () => {
    ww = await startWireWorld({
      sourceId: 'tlsreq',
      env: {
        SERVICE_GATEWAY__PG_TLS__CERT_FILE: certFile,
        SERVICE_GATEWAY__PG_TLS__KEY_FILE: keyFile,
        SERVICE_GATEWAY__PG_TLS__REQUIRE_CLIENT_TLS: 'true',
      },
    });
    reader = await ww.world.agent('tlsreq-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  }, 60_000);
  let stopped = false;
  afterAll(async () => {
    if (!stopped) await ww?.stop();
  });

  test('a plain login is refused with 28000 and a clear message (psql and node-postgres)', async () => {
    const r = await psql(ww, 'tlsreq-reader', reader.key, 'disable', ['-c', 'select 1']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('TLS is required');
    const err = await sqlError(ww.client('tlsreq-reader', reader.key, { ssl: false }));
    expect(err.code).toBe('28000');
    expect(err.message).toContain('TLS is required');
  });

  test('a plain startup is refused before any authentication exchange', async () => {
    const r = await rawExchange(ww.port, startupPacket({ user: 'tlsreq-reader', database: ww.sourceId }));
    expect(errorFields(r.data)).toMatchObject({ S: 'FATAL', C: '28000' });
    expect(r.closed).toBe(true);
  });

  test('a TLS login works (psql sslmode=require, node-postgres ssl)', async () => {
    const r = await psql(ww, 'tlsreq-reader', reader.key, 'require', ['-c', '\\conninfo', '-c', 'select count(*) as n from customers']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/SSL connection/);
    expect(r.stdout).toMatch(/n\s*\n-+\n\s*2/);
    const c = await ww.client('tlsreq-reader', reader.key, { ssl: { rejectUnauthorized: false } });
    try {
      expect(streamOf(c)).toBeInstanceOf(tls.TLSSocket);
      expect((await c.query('select name from customers where id = $1', [1])).rows).toEqual([{ name: 'Ada' }]);
    } finally {
      await c.end();
    }
  });

  test('at shutdown a TLS session is told 57P01 through TLS (runs last: it stops the gateway)', async () => {
    const c = await ww.client('tlsreq-reader', reader.key, { ssl: { rejectUnauthorized: false } });
    // An idle session: the FATAL arrives unsolicited and node-postgres reports it as the client's error.
    const told = new Promise<{ code?: string; message: string }>((resolve) => c.once('error', resolve));
    stopped = true;
    const stopping = ww.stop();
    const err = await told;
    expect(err.code).toBe('57P01');
    expect(err.message).toContain('shutting down');
    await stopping;
  });
});

describe('cleartext password over TLS (gateway.pg_tls.cleartext_password)', () => {
  let ww: WireWorld;
  let reader: { id: number; key: string };

  beforeAll(async () => {
    ww = await startWireWorld({
      sourceId: 'tlsclear',
      env: {
        SERVICE_GATEWAY__PG_TLS__CERT_FILE: certFile,
        SERVICE_GATEWAY__PG_TLS__KEY_FILE: keyFile,
        SERVICE_GATEWAY__PG_TLS__CLEARTEXT_PASSWORD: 'true',
      },
    });
    reader = await ww.world.agent('clear-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  }, 60_000);
  afterAll(async () => ww?.stop());

  /** The authentication request code of the server's first message after the startup packet (3 cleartext, 10 SASL). */
  async function authRequest(overTls: boolean): Promise<number> {
    const socket = net.connect(ww.port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let stream: net.Socket = socket;
    if (overTls) {
      socket.write(SSL_REQUEST);
      await new Promise<void>((resolve) => socket.once('data', (b: Buffer) => (expect(b.toString()).toBe('S'), resolve())));
      stream = tls.connect({ socket, rejectUnauthorized: false });
      await new Promise<void>((resolve) => stream.once('secureConnect', () => resolve()));
    }
    stream.write(startupPacket({ user: 'clear-reader', database: ww.sourceId }));
    const first = await new Promise<Buffer>((resolve) => stream.once('data', (b: Buffer) => resolve(b)));
    stream.destroy();
    expect(first[0]).toBe(0x52); // 'R'
    return first.readInt32BE(5);
  }

  test('the server asks for a cleartext password only inside TLS; a plaintext connection still gets SCRAM', async () => {
    expect(await authRequest(true)).toBe(3);
    expect(await authRequest(false)).toBe(10);
  });

  test('psql and node-postgres log in over TLS with the key in cleartext and run statements', async () => {
    const r = await psql(ww, 'clear-reader', reader.key, 'require', ['-c', 'select name from customers where id = 1']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('Ada');
    const c = await ww.client('clear-reader', reader.key, { ssl: { rejectUnauthorized: false } });
    try {
      expect((await c.query('select name from customers where id = $1', [2])).rows).toEqual([{ name: 'Bob' }]);
    } finally {
      await c.end();
    }
  });

  test('a wrong key and an unknown user fail alike with 28P01; a plain login still works through SCRAM', async () => {
    const wrong = await sqlError(ww.client('clear-reader', `${reader.key}x`, { ssl: { rejectUnauthorized: false } }));
    const unknown = await sqlError(ww.client('nobody-here', reader.key, { ssl: { rejectUnauthorized: false } }));
    expect(wrong.code).toBe('28P01');
    expect(unknown.code).toBe('28P01');
    expect(wrong.message).toBe('password authentication failed for user "clear-reader"');
    expect(unknown.message).toBe('password authentication failed for user "nobody-here"');
    const r = await psql(ww, 'clear-reader', reader.key, 'disable', ['-c', 'select count(*) as n from customers']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
});
