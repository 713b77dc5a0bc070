// Opens the control store: PostgreSQL through a bounded pg.Pool, or embedded PGlite, behind one Kysely handle.
import { mkdir, open, readFile, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ConnectionOptions } from 'node:tls';
import pg from 'pg';
import { Kysely, PGliteDialect, PostgresDialect, sql } from 'kysely';
import type { PostgresPool, PostgresPoolClient } from 'kysely';
import { PGlite } from '@electric-sql/pglite';
import type { Database } from './schema.js';
import { StoreUnavailableError, translateConnectionError } from './errors.js';
import { withDeadline } from '../util/deadline.js';
import { poolCopyIn, type CopyIn } from './copy.js';
import { pidAlive } from '../util/pid.js';

export type SslMode = 'disable' | 'prefer' | 'require' | 'verify-ca' | 'verify-full';

/** pino-compatible subset. */
export interface StoreLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface ControlStoreOptions {
  /** PostgreSQL URL; null/absent selects the embedded PGlite store under embeddedDir. */
  url?: string | null;
  embeddedDir: string;
  poolMax: number;
  connectTimeoutMs: number;
  statementTimeoutMs?: number;
  /**
   * `transaction`: the URL is a pooler in transaction mode (PgBouncer): no session setting is sent at connect
   * (statement_timeout is then the role's or database's, checked once and warned about when none is in force).
   */
  pooler?: 'none' | 'transaction';
  ssl?: { mode: SslMode; caFile?: string | null };
  logger?: StoreLogger;
  /**
   * A PostgreSQL server that cannot be reached at open (refused, timed out, unresolvable, starting up) does not fail
   * the open: the store is returned and every query fails with StoreUnavailableError until the server answers. For
   * a service that must start during an outage and report not ready; `gatehouse migrate` keeps failing fast.
   * A bad URL, a refused TLS verification, a wrong password or a missing database still fail at once.
   */
  deferUnavailable?: boolean;
}

/** Failures at open that an outage explains and time may cure (deferUnavailable); anything else is configuration. */
const TRANSIENT_AT_OPEN: ReadonlySet<string> = new Set(['refused', 'timeout', 'terminated', 'starting', 'too_many_connections', 'unreachable', 'unknown_host', 'connection']);

export interface ControlStore {
  db: Kysely<Database>;
  kind: 'postgres' | 'pglite';
  /** Where the store lives, safe to log: host:port/database or the embedded directory. */
  target: string;
  /** Bulk load through `COPY … FROM STDIN`; PostgreSQL only (the embedded store has no pg connection to stream on). */
  copyIn?: CopyIn;
  /** `SELECT 1` within timeoutMs (default: the connect timeout); throws StoreUnavailableError. */
  ping(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const noopLogger: StoreLogger = { info() {}, warn() {}, error() {}, debug() {} };

/**
 * Opens the store and checks that it answers: a bad URL, refused connection, failed TLS
 * verification or wrong password fails here, fast, as StoreUnavailableError.
 */
export async function openControlStore(opts: ControlStoreOptions): Promise<ControlStore> {
  if (!Number.isInteger(opts.poolMax) || opts.poolMax < 1) throw new TypeError('poolMax must be a positive integer');
  if (!Number.isInteger(opts.connectTimeoutMs) || opts.connectTimeoutMs < 1) throw new TypeError('connectTimeoutMs must be a positive integer');
  return opts.url ? openPostgres(opts.url, opts) : openEmbedded(opts);
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/** URL parameters that would override the configured TLS mode inside node-postgres. */
const URL_SSL_PARAMS = ['ssl', 'sslmode', 'sslcert', 'sslkey', 'sslrootcert', 'sslpassword', 'sslcompat', 'uselibpqcompat'];

/** int8 (OID 20) as a JS number, so counters read the same from pg and PGlite (PGlite does this already). */
const INT8_OID = 20;
const poolTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

interface ParsedUrl {
  connectionString: string;
  target: string;
  password: string;
  sslParamsRemoved: string[];
}

function parseUrl(raw: string): ParsedUrl {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // The TypeError of URL carries the input, which may hold the password: never rethrow it.
    throw new StoreUnavailableError('control store unavailable: database.url is not a valid URL', 'invalid_url');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new StoreUnavailableError('control store unavailable: database.url must use postgres:// or postgresql://', 'invalid_url');
  }
  const sslParamsRemoved = URL_SSL_PARAMS.filter((p) => url.searchParams.has(p));
  for (const p of sslParamsRemoved) url.searchParams.delete(p);
  const database = decodeURIComponent(url.pathname.replace(/^\//, '')) || '(default)';
  const host = url.hostname || url.searchParams.get('host') || 'localhost';
  return {
    connectionString: url.toString(),
    target: `${host}:${url.port || '5432'}/${database}`,
    password: decodeURIComponent(url.password),
    sslParamsRemoved,
  };
}

/** TLS options per libpq's sslmode meanings (verify-ca checks the chain, verify-full also the host name). */
function tlsOptions(mode: SslMode, caFile: string | null | undefined): ConnectionOptions | false {
  if (mode === 'disable') return false;
  if (mode === 'prefer' || mode === 'require') return { rejectUnauthorized: false };
  let ca: string | undefined;
  if (caFile) {
    try {
      ca = readFileSync(caFile, 'utf8');
    } catch {
      throw new StoreUnavailableError(`control store unavailable: database.ssl_ca_file ${caFile} cannot be read`, 'tls');
    }
  }
  const options: ConnectionOptions = { rejectUnauthorized: true, ...(ca ? { ca } : {}) };
  if (mode === 'verify-ca') options.checkServerIdentity = () => undefined;
  return options;
}

/** Replaces any trace of the password in a message; a second fence behind message construction. */
function scrub(text: string, password: string): string {
  return password ? text.split(password).join('***') : text;
}

/** The store's pool, which ssl_mode prefer may replace by a plaintext one at the first connection the server answers. */
interface PoolSource {
  current(): pg.Pool;
  connect(): Promise<pg.PoolClient>;
}

/** Pool facade for Kysely that translates connection failures where they happen. */
function translatingPool(pools: PoolSource, target: string, logger: StoreLogger): PostgresPool {
  const wrapped = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const translate = (error: unknown): unknown => translateConnectionError(error, target) ?? error;
  return {
    options: pools.current().options,
    async connect() {
      let client: pg.PoolClient;
      try {
        client = await pools.connect();
      } catch (error) {
        throw translate(error);
      }
      let facade = wrapped.get(client);
      if (!facade) {
        const c = client;
        // A connection that failed (server terminated it, socket lost) is destroyed on release, never reused:
        // the server's FATAL message can fail the query before the socket closes, when the pool would still take it back.
        let broken = false;
        // A client losing its server while checked out emits 'error' on itself; unheard, that stops the process.
        c.on('error', (error) => {
          broken = true;
          const translated = translateConnectionError(error, target);
          logger.warn({ store: target, reason: translated?.reason ?? 'unknown' }, 'control-store connection lost');
        });
        facade = {
          get processID() {
            return (c as unknown as { processID?: number }).processID;
          },
          query: ((...args: unknown[]) => {
            const result = (c.query as (...a: unknown[]) => unknown)(...args);
            return result instanceof Promise
              ? result.catch((error: unknown) => {
                  const translated = translate(error);
                  if (translated instanceof StoreUnavailableError) broken = true;
                  return Promise.reject(translated);
                })
              : result;
          }) as PostgresPoolClient['query'],
          release: (destroy?: boolean) => c.release(destroy === true || broken ? true : undefined),
        };
        wrapped.set(client, facade);
      }
      return facade;
    },
    end: () => pools.current().end(),
  };
}

function createPool(parsed: ParsedUrl, opts: ControlStoreOptions, ssl: ConnectionOptions | false, logger: StoreLogger): pg.Pool {
  const pool = new pg.Pool({
    connectionString: parsed.connectionString,
    max: opts.poolMax,
    connectionTimeoutMillis: opts.connectTimeoutMs,
    idleTimeoutMillis: 30_000,
    application_name: 'gatehouse',
    ssl,
    types: poolTypes,
    // A transaction pooler hands each transaction to any server connection: a startup setting would hold on some and
    // not others, and PgBouncer refuses the connection for it ("unsupported startup parameter").
    ...(opts.statementTimeoutMs && opts.pooler !== 'transaction' ? { statement_timeout: opts.statementTimeoutMs } : {}),
  });
  // A new client listens for errors from the moment the pool has it: the server's FATAL (a shutdown, a postmaster that
  // died) can come in the same read as the ReadyForQuery that completes the connection, after the pool stopped
  // listening for it and before the caller could, and an unheard 'error' stops the process. The caller's own listener
  // (translatingPool, poolCopyIn) still marks the connection broken.
  pool.on('connect', (client) => client.on('error', () => undefined));
  // An idle client losing its server emits on the pool; unhandled, it would crash the process.
  pool.on('error', (error) => {
    const translated = translateConnectionError(error, parsed.target);
    logger.warn({ store: parsed.target, reason: translated?.reason ?? 'unknown' }, 'idle control-store connection failed');
  });
  return pool;
}

async function verifyPool(pool: Pick<pg.Pool, 'connect'>): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('select 1');
  } finally {
    client.release();
  }
}

async function openPostgres(rawUrl: string, opts: ControlStoreOptions): Promise<ControlStore> {
  const logger = opts.logger ?? noopLogger;
  const parsed = parseUrl(rawUrl);
  const mode = opts.ssl?.mode ?? 'prefer';
  if (parsed.sslParamsRemoved.length > 0) {
    logger.warn({ store: parsed.target, ignored: parsed.sslParamsRemoved, ssl_mode: mode }, 'TLS parameters in database.url are ignored; database.ssl_mode applies');
  }
  let pool = createPool(parsed, opts, tlsOptions(mode, opts.ssl?.caFile), logger);
  // libpq's "prefer": TLS when the server offers it, plaintext when it does not (never on a verification failure).
  // Decided by the first connection the server answers, which is later than the open when the server was down then.
  let tlsDecided = mode !== 'prefer';
  const pools: PoolSource = {
    current: () => pool,
    async connect() {
      try {
        const client = await pool.connect();
        tlsDecided = true;
        return client;
      } catch (error) {
        if (tlsDecided || !/does not support SSL/i.test(error instanceof Error ? error.message : '')) throw error;
        tlsDecided = true;
        logger.info({ store: parsed.target }, 'control store does not offer TLS; ssl_mode prefer continues without it');
        const tlsPool = pool;
        pool = createPool(parsed, opts, false, logger);
        void tlsPool.end().catch(() => undefined);
        return pool.connect();
      }
    },
  };
  try {
    await verifyPool(pools);
  } catch (error) {
    const failure = unavailable(error, parsed);
    if (!opts.deferUnavailable || !TRANSIENT_AT_OPEN.has(failure.reason)) {
      await pool.end().catch(() => undefined);
      throw failure;
    }
    logger.warn({ store: parsed.target, reason: failure.reason }, 'control store unreachable at start; starting anyway, not ready until it answers');
  }

  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: translatingPool(pools, parsed.target, logger) }) });
  if (opts.pooler === 'transaction' && opts.statementTimeoutMs) void checkPooledStatementTimeout(db, parsed.target, logger);
  let closed = false;
  logger.info({ store: parsed.target, kind: 'postgres', pool_max: opts.poolMax, ssl_mode: mode }, 'control store opened');
  return {
    db,
    kind: 'postgres',
    target: parsed.target,
    copyIn: poolCopyIn(pools, parsed.target),
    ping: (timeoutMs = opts.connectTimeoutMs) => (closed ? Promise.reject(closedError(parsed.target)) : pingWithin(db, timeoutMs, parsed.target)),
    async close() {
      if (closed) return;
      closed = true;
      await db.destroy();
    },
  };
}

/** Behind a transaction pooler the statement timeout is the server's setting for the role or database: say when there is none. */
async function checkPooledStatementTimeout(db: Kysely<Database>, target: string, logger: StoreLogger): Promise<void> {
  try {
    const { rows } = await sql<{ ms: number }>`select setting::int as ms from pg_settings where name = 'statement_timeout'`.execute(db);
    const ms = rows[0]?.ms ?? 0;
    if (ms === 0) {
      logger.warn({ store: target }, 'database.pooler is transaction and no statement_timeout is in force: set it on the role (ALTER ROLE … SET statement_timeout) so a stuck control-store query cannot hold a pooled connection');
    }
  } catch {
    // The store is not reachable yet; readiness reports that, and this advice can wait for the next start.
  }
}

function unavailable(error: unknown, parsed: ParsedUrl): StoreUnavailableError {
  const translated =
    translateConnectionError(error, parsed.target) ??
    new StoreUnavailableError(`control store unavailable (${parsed.target}): connection failed`, 'connection');
  if (translated.message.includes(parsed.password) && parsed.password) {
    return new StoreUnavailableError(scrub(translated.message, parsed.password), translated.reason);
  }
  return translated;
}

function closedError(target: string): StoreUnavailableError {
  return new StoreUnavailableError(`control store unavailable (${target}): store has been closed`, 'closed');
}

async function pingWithin(db: Kysely<Database>, timeoutMs: number, target: string): Promise<void> {
  try {
    await withDeadline(sql`select 1`.execute(db), timeoutMs, () => {
      throw new StoreUnavailableError(`control store unavailable (${target}): no answer within ${timeoutMs} ms`, 'timeout');
    });
  } catch (error) {
    throw translateConnectionError(error, target) ?? new StoreUnavailableError(`control store unavailable (${target}): ping failed`, 'connection');
  }
}

// ---------------------------------------------------------------------------------------------
// Embedded PGlite

/** Lock files this process holds, to tell our own live lock from a stale one left by a reused pid. */
const heldLocks = new Set<string>();

/**
 * One process per data directory: PGlite has no postmaster to refuse a second writer, and two
 * would corrupt the files. The lock is a pid file next to the directory.
 */
async function acquireDirLock(lockPath: string): Promise<void> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(lockPath, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      heldLocks.add(lockPath);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const pid = Number.parseInt(await readFile(lockPath, 'utf8').catch(() => ''), 10);
    const ours = pid === process.pid && heldLocks.has(lockPath);
    if (ours || (Number.isInteger(pid) && pid !== process.pid && pidAlive(pid))) {
      throw new StoreUnavailableError(`control store unavailable: embedded store ${lockPath} is in use by process ${pid}`, 'locked');
    }
    await rm(lockPath, { force: true });
  }
  throw new StoreUnavailableError(`control store unavailable: cannot lock embedded store ${lockPath}`, 'locked');
}

async function openEmbedded(opts: ControlStoreOptions): Promise<ControlStore> {
  const logger = opts.logger ?? noopLogger;
  const dir = path.resolve(opts.embeddedDir);
  const lockPath = `${dir}.lock`;
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new StoreUnavailableError(`control store unavailable: cannot create ${dir} (${(error as NodeJS.ErrnoException).code ?? 'error'})`, 'io');
  }
  await acquireDirLock(lockPath);
  let pglite: PGlite;
  try {
    pglite = await PGlite.create(dir);
  } catch (error) {
    heldLocks.delete(lockPath);
    await rm(lockPath, { force: true });
    throw new StoreUnavailableError(
      `control store unavailable: embedded store at ${dir} could not start (${error instanceof Error ? error.message : 'unknown error'})`,
      'io',
    );
  }
  // Kysely's PGlite dialect reports supportsMultipleConnections = false, so Kysely serializes every
  // connection use behind one mutex: a transaction holds it from BEGIN to COMMIT, nothing interleaves.
  const db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) });
  let closed = false;
  logger.info({ store: dir, kind: 'pglite' }, 'embedded control store opened');
  return {
    db,
    kind: 'pglite',
    target: dir,
    ping: (timeoutMs = opts.connectTimeoutMs) => (closed ? Promise.reject(closedError(dir)) : pingWithin(db, timeoutMs, dir)),
    async close() {
      if (closed) return;
      closed = true;
      try {
        await db.destroy();
        // destroy() only closes PGlite once Kysely has used it; close it ourselves otherwise.
        if (!pglite.closed) await pglite.close();
      } finally {
        heldLocks.delete(lockPath);
        await rm(lockPath, { force: true });
      }
    },
  };
}
