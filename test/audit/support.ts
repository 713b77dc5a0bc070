// Audit test fixtures: a cuttable TCP proxy in front of the local PostgreSQL, entry and config builders, a recording logger.
import net from 'node:net';
import { Transform } from 'node:stream';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { auditSchema } from '../../src/config/schema.js';
import { poolCopyIn, type CopyIn } from '../../src/store/copy.js';
import type { AuditConfig } from '../../src/audit/writer.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { newAuditId, type AuditEntry } from '../../src/audit/entry.js';
import type { AuditLogger } from '../../src/audit/context.js';
import { waitFor as waitForAny } from '../support/wait.js';

/**
 * A TCP proxy we can cut: `cut()` destroys every open connection and refuses new ones at once
 * (the writer sees PostgreSQL vanish mid-stream), `restore()` lets connections through again.
 * `stallAfter(n)` forwards n more bytes from clients to the server and swallows the rest: the server
 * waits mid-message, as behind a hung network, while the client believes it has sent everything.
 */
export class TcpProxy {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  #blocked = false;
  /** Bytes still forwarded from clients to the server; null while not stalling. */
  #stallBudget: number | null = null;

  private constructor(server: net.Server) {
    this.#server = server;
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const server = net.createServer();
    const proxy = new TcpProxy(server);
    server.on('connection', (client) => proxy.#accept(client, target));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  #accept(client: net.Socket, target: { host: string; port: number }): void {
    if (this.#blocked) {
      client.destroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      this.#sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.#sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    const gate = new Transform({
      transform: (chunk: Buffer, _encoding, done) => {
        if (this.#stallBudget === null) return done(null, chunk);
        const forward = Math.min(this.#stallBudget, chunk.length);
        this.#stallBudget -= forward;
        done(null, chunk.subarray(0, forward));
      },
    });
    client.pipe(gate).pipe(upstream);
    upstream.pipe(client);
  }

  cut(): void {
    this.#blocked = true;
    for (const s of this.#sockets) s.destroy();
  }

  stallAfter(bytes: number): void {
    this.#stallBudget = bytes;
  }

  /** Lets new connections through again, unstalled (a stalled connection has lost bytes for good). */
  restore(): void {
    this.#blocked = false;
    this.#stallBudget = null;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

export function auditConfig(overrides: Record<string, unknown> & { spool?: Record<string, unknown>; retry?: Record<string, unknown> }): AuditConfig {
  return auditSchema.parse({
    ...overrides,
    retry: { initial_backoff_ms: 50, max_backoff_ms: 400, ...overrides.retry },
  });
}

export async function tempSpoolDir(): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gh-audit-spool-'));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

let seq = 0;

/** A complete entry; `ts` defaults to now (ms precision). */
export function makeEntry(over: Partial<AuditEntry> = {}): AuditEntry {
  const ts = over.ts ?? new Date().toISOString();
  seq += 1;
  return {
    id: newAuditId(Date.parse(ts)),
    ts,
    request_id: `req-${seq}`,
    channel: 'http',
    identity_id: 1,
    admin_user_id: null,
    source_id: 'orders',
    operation: 'read',
    method: 'GET',
    path: '/v1/orders',
    sql_fingerprint: null,
    sql_normalized: null,
    tables: [],
    decision: 'allow',
    reasons: [],
    policy_ids: [],
    approval_id: null,
    status: 200,
    upstream_status: 200,
    cache: 'miss',
    redactions: 0,
    bytes_in: 0,
    bytes_out: 123,
    duration_ms: 1.5,
    client_ip: '127.0.0.1',
    action: null,
    target: null,
    changes: null,
    error_code: null,
    ...over,
  };
}

export interface RecordingLogger extends AuditLogger {
  records: { level: 'info' | 'warn' | 'error'; obj: object; msg: string | undefined }[];
}

export function recordingLogger(): RecordingLogger {
  const records: RecordingLogger['records'] = [];
  return {
    records,
    info: (obj, msg) => records.push({ level: 'info', obj, msg }),
    warn: (obj, msg) => records.push({ level: 'warn', obj, msg }),
    error: (obj, msg) => records.push({ level: 'error', obj, msg }),
  };
}

export { sleep } from '../support/wait.js';

/** Polls every 25 ms: the audit conditions may query PostgreSQL. */
export const waitFor = (cond: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> => waitForAny(cond, timeoutMs, what, 25);

/**
 * A Kysely handle through `port` whose pool survives connections dying mid-query: pg emits 'error'
 * on a checked-out client whose socket closes, and without a listener that is an uncaught exception.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function kyselyVia(port: number, database: string, opts: { max?: number; connectTimeoutMs?: number; user?: string } = {}): { db: Kysely<any>; copyIn: CopyIn; close(): Promise<void> } {
  const pool = new pg.Pool({
    host: '127.0.0.1', port, user: opts.user ?? 'postgres', database, max: opts.max ?? 4, connectionTimeoutMillis: opts.connectTimeoutMs ?? 1_000,
  });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
  return { db, copyIn: poolCopyIn(pool, `127.0.0.1:${port}/${database}`), close: () => db.destroy() };
}

/** Stored audit rows whose request id starts with `prefix`: how many, and how many distinct ids among them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function countAuditLike(db: Kysely<any>, prefix: string): Promise<{ total: number; distinct: number }> {
  const { rows } = await sql<{ total: number; distinct: number }>`
    select count(*)::int as total, count(distinct id)::int as distinct from audit_entries where request_id like ${prefix + '%'}`.execute(db);
  return rows[0]!;
}

/**
 * A migrated store for the calling test file: made (withMigratedStore) before the file's tests, with `ready` called on
 * it, and dropped after them. Read what `ready` keeps inside tests and hooks only.
 */
export function migratedStoreForFile(ready: (migrated: MigratedStore) => void, opts: { poolMax?: number } = {}): void {
  let migrated: MigratedStore | undefined;
  beforeAll(async () => {
    migrated = await withMigratedStore(opts);
    ready(migrated);
  });
  afterAll(async () => {
    await migrated?.cleanup();
  });
}
