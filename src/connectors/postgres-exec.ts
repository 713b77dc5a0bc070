// Upstream execution on PostgreSQL sources: bounded per-source pools of raw protocol connections (one per wire session), role mapping, reset on release, cancel, and the buffered executor the MCP query tool and approvals reuse.

import net from 'node:net';
import type pg from 'pg';
import { GatehouseError } from '../errors/registry.js';
import type { PiiScanner, PiiMode } from '../governance/pii/index.js';
import type { AgentIdentity } from '../identity/index.js';
import type { RegisteredSource } from '../registry/sources.js';
import type { SecretRefResult } from '../config/secrets.js';
import type { Logger } from '../observability/logger.js';
import { postgresConfigOf, sanitizePgError, type PostgresConfig } from './postgres.js';
import { resolveCredential } from './credentials.js';
import { connectPostgres } from './postgres-connect.js';
import { typedRowRedactor } from '../governance/pii/by-type.js';
import { isUtf8EncodingName } from '../governance/sql/functions.js';
import { DEFAULT_SCHEMA } from '../governance/sql/types.js';
import {
  Backend,
  FrameReader,
  bindMessage,
  cancelRequest,
  describePortal,
  executeMessage,
  parseDataRow,
  parseErrorFields,
  parseMessage,
  parseRowDescription,
  parseRowOrigins,
  queryMessage,
  syncMessage,
  Frontend,
  message,
} from '../gateway/pgwire/protocol.js';

/**
 * The search_path every upstream session starts with (and returns to on RESET), so PostgreSQL resolves unqualified
 * names in the schema the classifier governs them in (PostgreSQL's default "$user", public would look first in a schema
 * named after the role). With masked reads (docs/least-privilege.md "Masked reads") the schema named after the current
 * role comes first: after SET ROLE that is the managed role's masking schema, whose views mirror the governed tables of
 * DEFAULT_SCHEMA under the same names with the redacted columns masked; only schemas the reconciliation owns can have
 * such a name.
 */
const GOVERNED_PATH = DEFAULT_SCHEMA;
const MASKED_READS_PATH = `"$user",${DEFAULT_SCHEMA}`;

/** The startup options of a session: UTF8, standard conforming strings and the path, as PostgreSQL must read statements. */
function sessionOptions(path: string): string {
  return `-c client_encoding=UTF8 -c standard_conforming_strings=on -c search_path=${path}`;
}

/**
 * Text that may hold a COPY statement. Only a top-level COPY … FROM STDIN enters copy-in mode (PL/pgSQL and SQL
 * functions cannot copy from the client), and PostgreSQL ends a session that receives a Query in copy-in mode: a
 * statement that might be one is not given the reset behind it. A false match only costs the reset its round trip.
 */
const MAY_COPY_IN = /copy/i;
/** The session reset of every pooled connection before reuse: transaction state, role, settings, prepared statements, temporary objects. */
const RESET_SQL = 'DISCARD ALL';
const RESET_QUERY = queryMessage(RESET_SQL);

/**
 * What a new session holds of the settings its startup asked for that ParameterStatus does not report (PostgreSQL 15
 * reports neither): a pooler that drops startup parameters (PgBouncer's ignore_startup_parameters) would leave the
 * server's defaults, and the gateway would govern names under one path while PostgreSQL reads them under another.
 */
const SESSION_CHECK_QUERY = "select pg_catalog.current_setting('search_path') as search_path, (select s.setting from pg_catalog.pg_settings s where s.name = 'statement_timeout') as statement_timeout";

/** What a statement or housekeeping step on a connection that closed fails with. */
function upstreamClosed(): GatehouseError {
  return new GatehouseError('upstream_failed', 'The upstream connection closed.');
}

/** An error the upstream answered, with its SQLSTATE and fields already sanitized. */
export class UpstreamSqlError extends Error {
  readonly code = 'upstream_sql_error';
  constructor(readonly fields: Map<string, string>) {
    super(fields.get('M') ?? 'upstream error');
  }
  get sqlstate(): string {
    return this.fields.get('C') ?? 'XX000';
  }
}

export type MessageHandler = (type: number, raw: Buffer, body: Buffer) => void;

/**
 * One upstream connection in raw protocol mode: pg's Client does the login (every auth method, TLS), then its
 * socket is taken over so wire sessions relay messages byte for byte without re-encoding rows.
 */
export class UpstreamConnection {
  readonly params = new Map<string, string>();
  transactionStatus = 0x49; // 'I'
  broken = false;
  #reader: FrameReader;
  #handler: MessageHandler | null = null;
  /**
   * The session reset written behind the statement in flight (writeWithReset): `answered` is set when that statement's
   * ReadyForQuery has arrived and the reset's own answer is being read; null when no reset was written.
   */
  #reset: { answered: Promise<boolean> | null } | null = null;
  #chunkEnd: (() => void) | null = null;
  readonly #sanitize: (text: string) => string;

  constructor(
    readonly sourceId: string,
    private readonly socket: net.Socket,
    readonly pid: number,
    readonly secret: number,
    readonly cancelTarget: { host: string; port: number },
    params: Map<string, string>,
    sanitize: (text: string) => string,
    maxMessageBytes: number,
  ) {
    for (const [k, v] of params) this.params.set(k, v);
    this.#sanitize = sanitize;
    this.#reader = new FrameReader({ startupBytes: 0, messageBytes: maxMessageBytes });
    this.#reader.startup = false;
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('close', () => {
      this.broken = true;
      this.#handler?.(0, Buffer.alloc(0), Buffer.alloc(0));
    });
    socket.on('error', () => {
      this.broken = true;
    });
  }

  #onData(chunk: Buffer): void {
    this.#reader.push(chunk);
    try {
      for (let f = this.#reader.next(); f !== null; f = this.#reader.next()) {
        if (f.type === Backend.ParameterStatus) {
          const nul = f.body.indexOf(0);
          this.params.set(f.body.toString('utf8', 0, nul), f.body.toString('utf8', nul + 1, f.body.length - 1));
        } else if (f.type === Backend.ReadyForQuery) this.transactionStatus = f.body[0]!;
        this.#handler?.(f.type, f.raw, f.body);
      }
    } catch {
      this.destroy();
    }
    this.#chunkEnd?.();
  }

  /**
   * Whether PostgreSQL still reads statements on this session the way the gateway governed them: as UTF8, with
   * standard conforming strings. Under BIG5, GBK or SJIS a character can end in the byte of a backslash, and with
   * standard_conforming_strings off `'a\''` ends where the gateway's parser sees `''` continue it: either way
   * PostgreSQL would run SQL the gateway read as part of a string literal.
   */
  get parsesAsGoverned(): boolean {
    return isUtf8EncodingName(this.params.get('client_encoding') ?? '') && this.params.get('standard_conforming_strings') === 'on';
  }

  /**
   * Who receives upstream messages; a type of 0 means the connection closed. `chunkEnd` runs after the messages
   * of each socket read, so a relay can answer its client with one write per read instead of one per message.
   */
  setHandler(handler: MessageHandler | null, chunkEnd: (() => void) | null = null): void {
    this.#handler = handler;
    this.#chunkEnd = chunkEnd;
  }

  write(buf: Buffer): boolean {
    return this.socket.write(buf);
  }

  /**
   * Writes a statement's messages (ending in Sync) and the pool's session reset behind them, in one write: the reset
   * costs no round trip of its own (docs/decisions/0029, "the measuring session in one write"). The statement's
   * handler calls readReset() at its ReadyForQuery; the pool's release then takes the reset's outcome (takeReset)
   * instead of resetting anew.
   */
  writeWithReset(statement: Buffer): boolean {
    this.#reset = { answered: null };
    return this.write(Buffer.concat([statement, RESET_QUERY]));
  }

  /**
   * At the ReadyForQuery of the statement written by writeWithReset: what follows is the reset's answer. Without a
   * reset in flight this only stops the handler.
   */
  readReset(): void {
    const reset = this.#reset;
    if (reset === null || reset.answered !== null) return this.setHandler(null);
    reset.answered = new Promise<boolean>((resolve) => {
      let failed = false;
      this.setHandler((type) => {
        if (type === 0) {
          this.setHandler(null);
          resolve(false);
        } else if (type === Backend.ErrorResponse) failed = true;
        else if (type === Backend.ReadyForQuery) {
          this.setHandler(null);
          resolve(!failed);
        }
      });
    });
  }

  /**
   * The pipelined reset, once: `undefined` when none was written; null when its statement has not reached its
   * ReadyForQuery (the session's state is unknown: not reusable); else whether the reset completed.
   */
  takeReset(): Promise<boolean> | null | undefined {
    const reset = this.#reset;
    this.#reset = null;
    return reset === null ? undefined : reset.answered;
  }

  pause(): void {
    this.socket.pause();
  }

  /**
   * Resolves once the socket's write buffer has room again (at once when it has): a relay streaming a client's data
   * (COPY FROM STDIN) waits on it, so a slow upstream pauses the client instead of the gateway buffering the stream.
   */
  drained(): Promise<void> {
    if (!this.socket.writableNeedDrain || this.socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  resume(): void {
    this.socket.resume();
  }

  destroy(): void {
    this.broken = true;
    this.socket.destroy();
  }

  /** Upstream error fields without the source's host, port, user, database or password. */
  sanitizeFields(fields: Map<string, string>): Map<string, string> {
    const out = new Map<string, string>();
    for (const [k, v] of fields) {
      // File, line and routine point into the server's source; they add nothing for an agent.
      if (k === 'F' || k === 'L' || k === 'R') continue;
      out.set(k, k === 'M' || k === 'D' || k === 'H' || k === 'W' || k === 'q' ? this.#sanitize(v) : v);
    }
    return out;
  }

  /** Runs SQL with the simple protocol for the connector's own housekeeping (SET ROLE, resets); nothing reaches a client. */
  simple(sql: string): Promise<void> {
    // A closed socket reports its close once: a handler set after it would wait forever.
    if (this.broken) return Promise.reject(upstreamClosed());
    return new Promise((resolve, reject) => {
      let error: UpstreamSqlError | null = null;
      this.setHandler((type, _raw, body) => {
        if (type === 0) {
          this.setHandler(null);
          reject(upstreamClosed());
        } else if (type === Backend.ErrorResponse) error = new UpstreamSqlError(this.sanitizeFields(parseErrorFields(body)));
        else if (type === Backend.ReadyForQuery) {
          this.setHandler(null);
          if (error) reject(error);
          else resolve();
        }
      });
      this.write(queryMessage(sql));
    });
  }

  /** Sends a CancelRequest for whatever this connection runs now (a separate short connection, as libpq does). */
  cancel(): void {
    const s = net.connect({ host: this.cancelTarget.host, port: this.cancelTarget.port });
    s.on('error', () => s.destroy());
    s.setTimeout(5_000, () => s.destroy());
    s.on('connect', () => s.end(cancelRequest(this.pid, this.secret)));
  }
}

/**
 * The messages that set the role ahead of a statement in the statement's own write, up to its Sync: BEGIN, SET ROLE,
 * COMMIT. The COMMIT makes the role the session's before the statement starts: in the statement's transaction, a
 * ROLLBACK inside a DO block or a procedure would undo SET ROLE and run the rest of the body as the login role, and
 * PostgreSQL would refuse statements that cannot run in a pipeline (VACUUM, CREATE INDEX CONCURRENTLY). The BEGIN
 * gives the COMMIT a transaction block to end (without one, every execution logs WARNING 25P01 "there is no
 * transaction in progress" on the source). After the COMMIT the statement runs as after a SET ROLE of its own round
 * trip; when SET ROLE fails, the block is aborted and nothing up to the Sync runs.
 */
function roleAhead(role: string): Buffer[] {
  return [BEGIN_AHEAD, ...unnamedRun(`SET ROLE ${quoteIdent(role)}`), COMMIT_AHEAD];
}
/** A statement without parameters as the unnamed statement and portal: Parse, Bind, Execute. */
function unnamedRun(sql: string): Buffer[] {
  return [parseMessage('', sql), bindMessage('', '', []), executeMessage('', 0)];
}
/** roleAhead's constant statements, built once: every execution under a role sends them. */
const BEGIN_AHEAD = Buffer.concat(unnamedRun('BEGIN'));
const COMMIT_AHEAD = Buffer.concat(unnamedRun('COMMIT'));
/** CommandComplete messages of roleAhead's statements (BEGIN, SET, COMMIT), answered before the statement's own. */
const ROLE_AHEAD_COMPLETIONS = 3;

/** A statement on a withSession session; `last` writes the session's reset behind it (PostgresExecutor.withSession). */
export type SessionRun = (sql: string, params?: readonly unknown[], options?: { readonly last?: boolean }) => Promise<SqlResult>;

/** Double-quoted identifier, as quote_ident would produce. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

export function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

export interface UpstreamPoolDeps {
  log: Logger;
  resolveSecretRef(ref: string): SecretRefResult;
  /** The egress address check (spec §4 rule 5); resolves to the address to connect to. */
  checkTarget(sourceId: string, hostname: string): Promise<{ address: string }>;
  maxMessageBytes: number;
  connectTimeoutMs: number;
  /** Connections per source at most, below the source's pool_max (a pool kept beside the sessions', e.g. for measuring writes). */
  maxPerSource?: number;
  /**
   * The statement_timeout the pool's sessions start with, which RESET and DISCARD ALL restore: the source's
   * statement_timeout_ms unless given (the measuring pool's sessions start with the write estimate's bound).
   */
  sessionTimeoutMs?: (config: PostgresConfig) => number;
}

interface Waiter {
  resolve(conn: UpstreamConnection): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
  since: number;
}

/** What /stats shows of one source's pool: its size, and how often and how long sessions waited for a connection. */
export interface SourcePoolStats {
  source_id: string;
  max: number;
  open: number;
  idle: number;
  waiting: number;
  /** Acquisitions that found every connection busy and waited. */
  waits: number;
  /** Waits that ended in 53300 (no connection freed within the wait). */
  wait_timeouts: number;
  wait_ms_total: number;
  wait_ms_max: number;
}

/** One source's pool: at most `pool_max` connections, idle ones reused, waiters served in order. */
class SourcePool {
  readonly idle: UpstreamConnection[] = [];
  readonly waiters: Waiter[] = [];
  size = 0;
  waits = 0;
  waitTimeouts = 0;
  waitMsTotal = 0;
  waitMsMax = 0;
  constructor(readonly fingerprint: string, readonly config: PostgresConfig) {}

  /** The next waiter, its wait counted; undefined when none waits. */
  nextWaiter(): Waiter | undefined {
    const w = this.waiters.shift();
    if (w) {
      clearTimeout(w.timer);
      const ms = Date.now() - w.since;
      this.waitMsTotal += ms;
      this.waitMsMax = Math.max(this.waitMsMax, ms);
    }
    return w;
  }
}

function sanitizer(config: PostgresConfig, password: string | null, address: string): (text: string) => string {
  const secrets = [password, config.host, address, config.user, config.database].filter((s): s is string => typeof s === 'string' && s.length >= 3);
  secrets.sort((a, b) => b.length - a.length);
  const port = String(config.port);
  return (text) => {
    let out = text;
    for (const s of secrets) out = out.split(s).join('[upstream]');
    return out.replace(new RegExp(`(port\\s+|:)${port}\\b`, 'g'), '$1[port]');
  };
}

export class UpstreamPools {
  readonly #pools = new Map<string, SourcePool>();
  /** Each configuration's text, to tell a reconfigured source from the same one. */
  readonly #fingerprints = new WeakMap<PostgresConfig, string>();

  constructor(private readonly deps: UpstreamPoolDeps) {}

  #pool(source: RegisteredSource): SourcePool {
    const config = postgresConfigOf(source);
    if (config === null) throw new GatehouseError('invalid_request', 'The source configuration is invalid.');
    let fingerprint = this.#fingerprints.get(config);
    if (fingerprint === undefined) this.#fingerprints.set(config, (fingerprint = JSON.stringify(config)));
    let pool = this.#pools.get(source.source_id);
    if (pool && pool.fingerprint !== fingerprint) {
      // Reconfigured source: idle connections of the old configuration are dropped, busy ones die on release.
      for (const c of pool.idle.splice(0)) c.destroy();
      pool = undefined;
    }
    if (!pool) {
      pool = new SourcePool(fingerprint, config);
      this.#pools.set(source.source_id, pool);
    }
    return pool;
  }

  /** A connection of the source's pool, waiting up to connect_timeout_ms when all are busy (then 53300). */
  async acquire(source: RegisteredSource): Promise<UpstreamConnection> {
    const pool = this.#pool(source);
    while (pool.idle.length > 0) {
      const c = pool.idle.pop()!;
      if (!c.broken) return c;
      pool.size--;
    }
    if (pool.size < this.#max(pool)) {
      pool.size++;
      try {
        return await this.#connect(source.source_id, pool.config);
      } catch (err) {
        pool.size--;
        throw err;
      }
    }
    const max = this.#max(pool);
    const waitMs = Math.min(pool.config.connect_timeout_ms, this.deps.connectTimeoutMs);
    pool.waits++;
    return new Promise<UpstreamConnection>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        since: Date.now(),
        timer: setTimeout(() => {
          pool.waiters.splice(pool.waiters.indexOf(waiter), 1);
          pool.waitTimeouts++;
          pool.waitMsTotal += waitMs;
          pool.waitMsMax = Math.max(pool.waitMsMax, waitMs);
          const message =
            this.deps.maxPerSource === undefined
              ? `All ${max} upstream connections of source "${source.source_id}" are in use (waited ${waitMs} ms). Raise the source's connection_config.pool_max (now ${max}, at most 100) or open fewer concurrent sessions.`
              : `All ${max} upstream connections of source "${source.source_id}" are in use (waited ${waitMs} ms).`;
          reject(new GatehouseError('unavailable', message, { details: { sqlstate: '53300' } }));
        }, waitMs),
      };
      pool.waiters.push(waiter);
    });
  }

  #max(pool: SourcePool): number {
    return Math.min(pool.config.pool_max, this.deps.maxPerSource ?? Infinity);
  }

  /** Each source pool's size and waits, for /stats. */
  stats(): SourcePoolStats[] {
    return [...this.#pools].map(([sourceId, p]) => ({
      source_id: sourceId,
      max: this.#max(p),
      open: p.size,
      idle: p.idle.length,
      waiting: p.waiters.length,
      waits: p.waits,
      wait_timeouts: p.waitTimeouts,
      wait_ms_total: p.waitMsTotal,
      wait_ms_max: p.waitMsMax,
    }));
  }

  /** Resets the session (open transaction, role, settings, prepared statements, temp objects) before reuse; a connection that cannot be reset is closed. */
  async release(conn: UpstreamConnection): Promise<void> {
    const pool = this.#pools.get(conn.sourceId);
    // Written behind the session's last statement (writeWithReset); the reset below is only needed when it was not, or failed.
    const pipelined = conn.takeReset();
    let reusable = !conn.broken && pool !== undefined && pipelined !== null;
    if (reusable) {
      try {
        const reset = pipelined !== undefined && (await pipelined) && conn.transactionStatus === 0x49;
        // The connection may have closed while the reset's answer was awaited.
        if (conn.broken) throw new Error('closed');
        if (!reset) {
          conn.setHandler(null);
          if (conn.transactionStatus !== 0x49) await conn.simple('ROLLBACK');
          await conn.simple(RESET_SQL);
        }
        // DISCARD ALL restores the startup settings; a connection whose session still reads SQL otherwise is closed.
        reusable = conn.parsesAsGoverned;
      } catch {
        reusable = false;
      }
    }
    if (!pool) return conn.destroy();
    if (!reusable || conn.broken) {
      conn.destroy();
      pool.size--;
      // A freed slot lets a waiter connect anew.
      const w = pool.nextWaiter();
      if (w) {
        pool.size++;
        this.#connect(conn.sourceId, pool.config).then(w.resolve, (err: unknown) => {
          pool.size--;
          w.reject(err);
        });
      }
      return;
    }
    const w = pool.nextWaiter();
    if (w) w.resolve(conn);
    else pool.idle.push(conn);
  }

  async #connect(sourceId: string, config: PostgresConfig): Promise<UpstreamConnection> {
    const cred = resolveCredential(config, { literal: 'password', ref: 'password_ref' }, (ref) => this.deps.resolveSecretRef(ref));
    if (!cred.ok) {
      this.deps.log.error({ source_id: sourceId, problem: cred.problem }, 'source credential reference cannot be resolved');
      throw new GatehouseError('unavailable', 'The source credential is unavailable.');
    }
    const { address } = await this.deps.checkTarget(sourceId, config.host);
    const params = new Map<string, string>();
    const path = config.privileges === 'managed' && config.masked_reads === true ? MASKED_READS_PATH : GOVERNED_PATH;
    const statementTimeoutMs = this.deps.sessionTimeoutMs?.(config) ?? config.statement_timeout_ms;
    type RawConnection = { stream: net.Socket; on(e: string, f: (m: { parameterName: string; parameterValue: string }) => void): void };
    const rawConnection = (client: pg.Client) => (client as unknown as { connection: RawConnection }).connection;
    let client: pg.Client;
    try {
      // The connection test's routine (postgres-connect.ts): ssl_mode means the same on every path.
      client = await connectPostgres({
        config,
        password: cred.value,
        address,
        timeoutMs: Math.min(config.connect_timeout_ms, this.deps.connectTimeoutMs),
        applicationName: 'gatehouse',
        clientOptions: {
          statement_timeout: statementTimeoutMs,
          // Session defaults from the startup packet outrank role and database defaults, and RESET / DISCARD ALL restore
          // them: PostgreSQL keeps reading statements the way the gateway governed them (see parsesAsGoverned).
          options: sessionOptions(path),
        },
        beforeConnect: (c) => {
          params.clear();
          rawConnection(c).on('parameterStatus', (m) => params.set(m.parameterName, m.parameterValue));
        },
      });
    } catch (err) {
      this.deps.log.warn({ source_id: sourceId, problem: sanitizePgError(err) }, 'upstream connection failed');
      throw new GatehouseError('upstream_failed', `The upstream database is unavailable (${sanitizePgError(err)}).`, { cause: err });
    }
    await this.#checkSessionSettings(sourceId, client, path, statementTimeoutMs);
    const connection = rawConnection(client);
    const stream = connection.stream;
    // Take the socket over from pg: its parser stops, ours starts. Nothing is in flight after ReadyForQuery.
    stream.removeAllListeners('data');
    const c = client as unknown as { processID: number; secretKey: number };
    const conn = new UpstreamConnection(sourceId, stream, c.processID, c.secretKey, { host: address, port: config.port }, params, sanitizer(config, cred.value, address), this.deps.maxMessageBytes);
    if (!conn.parsesAsGoverned) {
      // The startup options were overridden somehow: a session that reads SQL differently is never used.
      conn.destroy();
      this.deps.log.error({ source_id: sourceId }, 'upstream session does not read SQL as UTF8 with standard conforming strings; refused');
      throw new GatehouseError('unavailable', 'The source database session could not be set up.');
    }
    return conn;
  }

  /** Refuses a session that does not hold the path and statement timeout its startup asked for (SESSION_CHECK_QUERY); fail closed. */
  async #checkSessionSettings(sourceId: string, client: pg.Client, path: string, statementTimeoutMs: number): Promise<void> {
    let held: { search_path?: unknown; statement_timeout?: unknown } | undefined;
    try {
      held = (await client.query(SESSION_CHECK_QUERY)).rows[0] as typeof held;
    } catch (err) {
      this.deps.log.warn({ source_id: sourceId, problem: sanitizePgError(err) }, 'upstream session settings could not be read');
    }
    if (held?.search_path === path && Number(held.statement_timeout) === statementTimeoutMs) return;
    await client.end().catch(() => undefined);
    this.deps.log.error(
      { source_id: sourceId, search_path: typeof held?.search_path === 'string' ? held.search_path : null, expected_search_path: path },
      'upstream session does not hold the search_path and statement_timeout its startup options set (a pooler dropping startup parameters?); refused',
    );
    throw new GatehouseError('unavailable', 'The source database session could not be set up.');
  }

  async close(): Promise<void> {
    for (const pool of this.#pools.values()) {
      for (const c of pool.idle.splice(0)) c.destroy();
      for (const w of pool.waiters.splice(0)) {
        clearTimeout(w.timer);
        w.reject(new GatehouseError('unavailable', 'The gateway is shutting down.'));
      }
    }
  }
}

export interface SqlResult {
  columns: string[];
  rows: (string | null)[][];
  rowCount: number;
  truncated: boolean;
  redactions: number;
  command: string;
}

/** An identity as the executor runs statements for it: without an id, the gateway's own reads (the source's login). */
export type ExecutorIdentity = Pick<AgentIdentity, 'mapped_pg_role'> & { readonly id?: number };

/**
 * The managed role an identity's statements on a source run as (docs/least-privilege.md): null when the source does
 * not use managed privileges; rejects (57P03) while they are not in place — never the configured user instead.
 */
export type SessionRoleResolver = (source: RegisteredSource, identityId: number) => Promise<string | null>;

export interface ExecuteSqlArgs {
  source: RegisteredSource;
  identity: ExecutorIdentity;
  sql: string;
  params: readonly unknown[];
  maxRows: number;
  /** The policy obligations to apply to the result (redact_columns, pii mode). */
  redaction?: {
    redactColumns: readonly string[];
    mode: PiiMode;
    /** Result columns to replace whole whatever their name, from RowDescription's names and origins (redaction by provenance). */
    forceColumns?: (fields: { name: string; tableOid: number; attnum: number }[]) => boolean[];
  };
}

function paramValue(p: unknown): string | Buffer | null {
  if (p === null || p === undefined) return null;
  if (typeof p === 'string') return p;
  if (typeof p === 'object' && typeof (p as { binary?: unknown }).binary === 'string') return Buffer.from((p as { binary: string }).binary, 'base64');
  if (typeof p === 'object') return JSON.stringify(p);
  return String(p as number | boolean | bigint);
}

/** Buffered execution of one statement (MCP `query`, approved writes): text results, bounded rows, redaction applied. */
export class PostgresExecutor {
  #sessionRole: SessionRoleResolver | null = null;

  constructor(private readonly pools: UpstreamPools, private readonly pii: PiiScanner) {}

  /** Installs the managed-privilege resolver (src/privileges/): statements of an identity then run as its managed role. */
  useSessionRoles(resolver: SessionRoleResolver): void {
    this.#sessionRole = resolver;
  }

  /** The role to SET: the managed one when the source has managed privileges, else the identity's mapped_pg_role. */
  async #roleOf(source: RegisteredSource, identity: ExecutorIdentity): Promise<string | null> {
    if (this.#sessionRole !== null && identity.id !== undefined) {
      const managed = await this.#sessionRole(source, identity.id);
      if (managed !== null) return managed;
    }
    // An empty mapped role is none.
    return identity.mapped_pg_role || null;
  }

  async executeSql(args: ExecuteSqlArgs): Promise<SqlResult> {
    // Resolved before a connection is taken: a source whose privileges are not in place is refused without one.
    const role = await this.#roleOf(args.source, args.identity);
    const conn = await this.pools.acquire(args.source);
    try {
      return await this.#run(conn, args, { role, resetBehind: !MAY_COPY_IN.test(args.sql) });
    } finally {
      await this.pools.release(conn);
    }
  }

  /**
   * Several statements on one connection of the source, under the identity's role, for the gateway's own use (measuring
   * a write's effect): results are not redacted and never reach an agent. The session is reset on release; a run marked
   * `last` carries the reset behind it (no round trip of its own), and the session takes no statement after it. A
   * session whose first statement is its last (a write's estimate) sends the role, the statement and the reset in one
   * write.
   */
  async withSession<T>(source: RegisteredSource, identity: ExecutorIdentity, fn: (run: SessionRun) => Promise<T>): Promise<T> {
    let role = await this.#roleOf(source, identity);
    const conn = await this.pools.acquire(source);
    let ended = false;
    try {
      return await fn(async (sql, params = [], options) => {
        // After the reset the session no longer runs as the identity's role: nothing more may run on it.
        if (ended) throw new Error('the session was already reset');
        ended = options?.last === true;
        // The role goes ahead of the statement only when no other follows: when SET ROLE fails there, the statement is
        // skipped, and a later one (a caller going on after the error) would run without the role. Several statements
        // get it first, on its own, and none runs when it fails.
        if (role !== null && !ended) await conn.simple(`SET ROLE ${quoteIdent(role)}`);
        const withRole = ended ? role : null;
        role = null;
        return this.#run(conn, { source, identity, sql, params, maxRows: 10_000 }, { role: withRole, resetBehind: ended });
      });
    } finally {
      await this.pools.release(conn);
    }
  }

  /**
   * One statement with the extended protocol, in one write with what goes with it:
   * - `role`: `SET ROLE` in a block of its own ahead of the statement, up to the same Sync (roleAhead). When it fails,
   *   PostgreSQL skips the statement (an error skips every message up to Sync): nothing runs without the role.
   * - `resetBehind`: the pool's session reset behind the Sync (writeWithReset).
   */
  #run(conn: UpstreamConnection, args: ExecuteSqlArgs, { role = null, resetBehind = false }: { role?: string | null; resetBehind?: boolean } = {}): Promise<SqlResult> {
    // As in simple(): a connection that already closed never answers.
    if (conn.broken) return Promise.reject(upstreamClosed());
    return new Promise((resolve, reject) => {
      const result: SqlResult = { columns: [], rows: [], rowCount: 0, truncated: false, redactions: 0, command: '' };
      let redactRow: ((values: readonly (string | null)[]) => { values: (string | null)[]; redactions: number }) | null = null;
      let error: Error | null = null;
      // The completions of roleAhead's BEGIN, SET ROLE and COMMIT come first and are not the statement's.
      let roleCompletions = role === null ? 0 : ROLE_AHEAD_COMPLETIONS;
      conn.setHandler((type, _raw, body) => {
        switch (type) {
          case 0:
            conn.setHandler(null);
            reject(upstreamClosed());
            return;
          case Backend.RowDescription: {
            const desc = parseRowDescription(body);
            result.columns = desc.names;
            if (args.redaction) {
              const { mode, redactColumns } = args.redaction;
              const forceColumns = args.redaction.forceColumns?.(parseRowOrigins(body));
              // The same typed forms as the wire (governance/pii/by-type.ts): an inet or a number is NULL, JSON stays JSON.
              redactRow = typedRowRedactor(desc.typeOids, this.pii.rowRedactor(result.columns, { mode, redactColumns, ...(forceColumns ? { forceColumns } : {}) }), (doc) =>
                this.pii.scanJson(doc, { mode, redactColumns }),
              );
            }
            return;
          }
          case Backend.DataRow: {
            if (result.rows.length >= args.maxRows) return;
            let values = parseDataRow(body).map((v) => (v === null ? null : v.toString('utf8')));
            if (redactRow) {
              const r = redactRow(values);
              values = r.values;
              result.redactions += r.redactions;
            }
            result.rows.push(values);
            return;
          }
          case Backend.PortalSuspended:
            result.truncated = true;
            return;
          case Backend.CopyInResponse:
            // COPY FROM STDIN has no data to read from a buffered request (MCP query, an approved statement): it is
            // failed at once instead of waiting for data forever. During COPY IN the Sync already sent is ignored, so
            // the upstream needs one more after the CopyFail to answer ReadyForQuery (docs/pgwire.md "COPY").
            conn.write(Buffer.concat([message(Frontend.CopyFail, Buffer.from('COPY FROM STDIN needs a client data stream: use the wire listener\0')), syncMessage()]));
            // A reset written behind the statement reaches PostgreSQL in copy-in mode instead: it ends the connection
            // (protocol synchronization lost), which the release then closes, never reuses. executeSql writes none
            // behind a text that may hold a COPY (MAY_COPY_IN), so this happens only to a withSession statement.
            return;
          case Backend.CommandComplete:
            if (roleCompletions > 0) roleCompletions--;
            else result.command = body.toString('utf8', 0, body.length - 1);
            return;
          case Backend.ErrorResponse:
            error ??= new UpstreamSqlError(conn.sanitizeFields(parseErrorFields(body)));
            return;
          case Backend.ReadyForQuery:
            // What follows is the reset's answer when one was written behind (readReset stops the handler otherwise).
            if (resetBehind) conn.readReset();
            else conn.setHandler(null);
            if (error) reject(error);
            else {
              result.rowCount = result.rows.length;
              resolve(result);
            }
            return;
          default:
            return;
        }
      });
      const statement = Buffer.concat([
        ...(role === null ? [] : roleAhead(role)),
        parseMessage('', args.sql),
        bindMessage('', '', args.params.map(paramValue)),
        describePortal(''),
        executeMessage('', args.maxRows + 1 > 0x7fffffff ? 0 : args.maxRows),
        syncMessage(),
      ]);
      if (resetBehind) conn.writeWithReset(statement);
      else conn.write(statement);
    });
  }
}
