// The PostgreSQL wire listener (docs/pgwire.md): startup, TLS negotiation, SCRAM login as an identity, source selection by database name, cancel routing, and the session's upstream connection.
import net from 'node:net';
import tls from 'node:tls';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Config } from '../../config/index.js';
import type { Logger } from '../../observability/logger.js';
import type { Auditor } from '../../audit/context.js';
import type { PipelineDeps } from '../../pipeline/context.js';
import type { Db } from '../../store/repos/util.js';
import { getIdentityByName, getIdentityByPgUsername } from '../../store/repos/identities.js';
import { looksLikeJwt, validUntilMs, parseScramVerifier, scramPasswordMatches, toAgentIdentity, type AgentIdentity, type KeyRevocationFeed, type ParsedScramVerifier } from '../../identity/index.js';
import { decodeJwt } from 'jose';
import { GatehouseError, isGatehouseError } from '../../errors/registry.js';
import { auditFailure } from '../../pipeline/run.js';
import { StoreUnavailableError } from '../../store/errors.js';
import { UpstreamSqlError, quoteIdent, quoteLiteral, type UpstreamConnection, type UpstreamPools } from '../../connectors/postgres-exec.js';
import {
  AUTH_CLEARTEXT,
  AUTH_OK,
  AUTH_SASL,
  AUTH_SASL_CONTINUE,
  AUTH_SASL_FINAL,
  BodyReader,
  Frontend,
  FrameReader,
  ProtocolViolation,
  authentication,
  backendKeyData,
  errorResponse,
  parameterStatus,
  parseStartup,
  readyForQuery,
  type ErrorFields,
  type Frame,
} from './protocol.js';
import { SCRAM_MECHANISM, ScramFailure, ScramServer, decoyVerifier } from './scram.js';
import { IdentityRefresher, errorFieldsOf, type IdentityState } from './decide.js';
import { encodingKey, isUtf8EncodingName } from '../../governance/sql/functions.js';
import { WireRelay } from './relay.js';
import { startupSettings } from './startup-settings.js';
import { postgresConfigOf } from '../../connectors/postgres.js';
import { uuidv7 } from '../../util/uuidv7.js';
import type { ManagedPrivileges } from '../../privileges/runtime.js';

export interface WireListenerDeps {
  config: Readonly<Config>;
  log: Logger;
  db: Db;
  auditor: Auditor;
  pipeline: PipelineDeps;
  pools: UpstreamPools;
  /** The process's key revocations (its key-session memo): a revoked identity's sessions see it at their next statement. */
  revocations: KeyRevocationFeed | null;
  /** Managed privileges (docs/least-privilege.md): the role a session runs as on a source that uses them. */
  privileges?: Pick<ManagedPrivileges, 'sessionRole' | 'track'> | null;
}

/**
 * Why a startup client_encoding cannot be served, or null. UTF8 is what the gateway reads; SQL_ASCII (libpq's choice in
 * a C locale) means "no conversion", which for a UTF8 server is UTF8 too. Any other encoding would have PostgreSQL read
 * the bytes differently from the gateway: a BIG5, GBK, SJIS or similar character can end in the byte of a backslash.
 */
function clientEncodingProblem(value: string | undefined): string | null {
  if (value === undefined || isUtf8EncodingName(value) || encodingKey(value) === 'sqlascii') return null;
  return `client_encoding ${JSON.stringify(value.slice(0, 64))} is not supported: the gateway speaks UTF8 only (set PGCLIENTENCODING=UTF8)`;
}
const MAX_QUEUED_FRAMES = 256;
const SHUTDOWN_MESSAGE = 'terminating connection: the gateway is shutting down';

type State = 'startup' | 'sasl_initial' | 'sasl_continue' | 'password' | 'connecting' | 'ready' | 'closed';

/** Longest cleartext password read: an agent JWT (MAX_AGENT_JWT_LENGTH); API keys and wire passwords are far shorter. */
const MAX_PASSWORD_BYTES = 8192;

interface CancelEntry {
  secret: Buffer;
  cancel(): void;
}

export interface WireListener {
  server: net.Server;
  /** Client connections open now (any state: startup, authenticating, ready). */
  sessions(): number;
  /** Re-reads gateway.pg_tls's certificate and key for new sessions; false without TLS; throws when a file cannot be used (the old one stays). */
  reloadTls(): boolean;
  /**
   * Stops accepting, lets sessions finish their transaction for up to `drainMs` (each ends with 57P01 at its next
   * transaction boundary), then ends the rest with 57P01 (docs/pgwire.md "Shutdown").
   */
  close(drainMs?: number): Promise<void>;
}

export function createWireListener(deps: WireListenerDeps): WireListener {
  const { config } = deps;
  const pgTls = config.gateway.pg_tls;
  const readContext = () => (pgTls.cert_file && pgTls.key_file ? tls.createSecureContext({ cert: readFileSync(pgTls.cert_file), key: readFileSync(pgTls.key_file) }) : null);
  // Replaced by reloadTls(): sessions that start after it negotiate with the new certificate; open ones keep theirs.
  let secureContext = readContext();
  const decoySecret = randomBytes(32);
  const cancels = new Map<number, CancelEntry[]>();
  /** Connections by their TCP socket (a connection that upgraded to TLS speaks through its TLS socket). */
  const connections = new Map<net.Socket, WireConnection>();
  const refresher = new IdentityRefresher(deps.db, deps.revocations);
  const log = deps.log;

  const server = net.createServer({ noDelay: true }, (socket) => {
    const connection = new WireConnection(socket, { deps, secureContext, decoySecret, cancels, refresher, log });
    connections.set(socket, connection);
    socket.on('close', () => connections.delete(socket));
    connection.start();
  });
  server.maxConnections = config.gateway.limits.max_connections;
  return {
    server,
    sessions: () => connections.size,
    reloadTls() {
      if (secureContext === null) return false;
      secureContext = readContext();
      return true;
    },
    async close(drainMs = 0) {
      // server.close's callback runs once every connection has closed: new connections are refused from now on.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const c of connections.values()) c.drain();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([closed.then(() => false), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), drainMs)))]);
      clearTimeout(timer);
      if (timedOut) {
        log.info({ sessions: connections.size, drain_ms: drainMs }, 'wire drain timeout: ending the remaining sessions with 57P01');
        for (const c of connections.values()) c.shutdown();
        // A client that does not read its FATAL (a full socket buffer) is cut off shortly after.
        const cut = setTimeout(() => {
          for (const s of connections.keys()) s.destroy();
        }, 2_000);
        cut.unref();
        await closed;
        clearTimeout(cut);
      }
      refresher.close();
      await deps.pools.close();
    },
  };
}

interface ConnectionContext {
  deps: WireListenerDeps;
  secureContext: tls.SecureContext | null;
  decoySecret: Buffer;
  /** By process id: the upstream backend's, which two sources' servers may share, so each id holds a list. */
  cancels: Map<number, CancelEntry[]>;
  refresher: IdentityRefresher;
  log: Logger;
}

/** One client connection: explicit states from startup to ready; protocol errors are answered 08P01 and close it. */
class WireConnection {
  #state: State = 'startup';
  #socket: net.Socket;
  #reader: FrameReader;
  #queue: Frame[] = [];
  #pumping = false;
  #encrypted = false;
  #params: Record<string, string> = {};
  #user = '';
  #scram: ScramServer | null = null;
  /** The verifier the password is checked against: the identity's, or a decoy for unknown users. */
  #passwordVerifier: ParsedScramVerifier | null = null;
  #identity: AgentIdentity | null = null;
  #verifier: string | null = null;
  /** The enabled identity the startup user names, and its verifier, whatever its credentials (an agent JWT must map to it). */
  #userRow: { id: number; verifier: string | null } | null = null;
  #upstream: UpstreamConnection | null = null;
  #relay: WireRelay | null = null;
  #pid = 0;
  #cancel: CancelEntry | null = null;
  /** Time-ordered like HTTP request ids: a session's statement ids (`<session>:<n>`) sort after those of older sessions. */
  readonly #sessionId = uuidv7();
  /** Statements decided so far: numbers the request ids, so an audit search by session lists them in order. */
  #statements = 0;
  /** Stops watching the session's managed role (sources with managed privileges). */
  #untrack: (() => void) | null = null;
  /** Ends a session signed in with an agent JWT when the token stops being valid (docs/agent-jwt.md). */
  #tokenExpiry: NodeJS.Timeout | null = null;

  constructor(socket: net.Socket, private readonly ctx: ConnectionContext) {
    this.#socket = socket;
    const limits = ctx.deps.config.gateway.limits;
    this.#reader = new FrameReader({ startupBytes: limits.pg_startup_packet_bytes, messageBytes: limits.pg_message_bytes, streamCopyData: true });
    this.#encrypted = ctx.deps.config.gateway.pg_tls.trusted_tls_offload;
  }

  start(): void {
    this.#attach(this.#socket);
    this.#socket.setTimeout(this.ctx.deps.config.gateway.timeouts.client_idle_ms, () => this.#fatal({ sqlstate: '08006', message: 'connection idle too long' }));
  }

  #attach(socket: net.Socket): void {
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', () => socket.destroy());
    socket.on('close', () => void this.#cleanup());
  }

  #onData(chunk: Buffer): void {
    this.#reader.push(chunk);
    try {
      for (let f = this.#reader.next(); f !== null; f = this.#reader.next()) {
        if (this.#state === 'startup') {
          if (f.type === Frontend.Terminate) return this.#terminate();
          // Startup packets are handled at once: an SSLRequest must be answered before any further byte is read.
          this.#startup(f);
          if (this.#state !== 'startup') this.#reader.startup = false;
          if ((this.#state as State) === 'closed' || this.#socket.readableFlowing === false) return;
          continue;
        }
        this.#queue.push(f);
      }
    } catch (err) {
      return this.#protocolError(err);
    }
    if (this.#queue.length > MAX_QUEUED_FRAMES) this.#socket.pause();
    void this.#pump();
  }

  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#queue.length > 0 && this.#state !== 'closed') {
        const f = this.#queue.shift()!;
        // Most messages are handled at once; only one still being handled (a statement's decision) is awaited.
        const handling = this.#message(f);
        if (handling) await handling;
        if (this.#queue.length < MAX_QUEUED_FRAMES / 2) this.#socket.resume();
      }
    } catch (err) {
      this.#protocolError(err);
    } finally {
      this.#pumping = false;
    }
  }

  /** The client said goodbye: the connection closes without a word, in any state. */
  #terminate(): void {
    this.#state = 'closed';
    this.#socket.end();
  }

  /**
   * Shutdown, first step: a session ends with 57P01 at its next transaction boundary (WireRelay#drain); one still
   * starting or authenticating has no transaction and ends now.
   */
  drain(): void {
    if (this.#state === 'ready') return this.#relay!.drain(SHUTDOWN_MESSAGE);
    this.shutdown();
  }

  /** Ends the connection with 57P01 now, written through TLS when the connection upgraded; an open transaction is rolled back. */
  shutdown(): void {
    if (this.#state === 'closed') return void this.#socket.end();
    if (this.#state === 'ready') return this.#relay!.terminate(SHUTDOWN_MESSAGE);
    this.#fatal({ sqlstate: '57P01', message: SHUTDOWN_MESSAGE });
  }

  #protocolError(err: unknown): void {
    if (err instanceof ProtocolViolation) return this.#fatal({ sqlstate: '08P01', message: err.message });
    // A lost control store (the login's identity lookup) is 57P03 like on every front door (spec §7), not an internal error.
    if (err instanceof StoreUnavailableError) return this.#fatal(errorFieldsOf(err));
    this.ctx.log.error({ err }, 'wire connection failed');
    this.#fatal({ sqlstate: 'XX000', message: 'internal error' });
  }

  #fatal(e: Omit<ErrorFields, 'severity'>): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#socket.end(errorResponse({ ...e, severity: 'FATAL' }));
  }

  #startup(f: Frame): void {
    const packet = parseStartup(f);
    if (packet.kind === 'ssl') {
      if (!this.ctx.secureContext || this.#socket instanceof tls.TLSSocket) return void this.#socket.write('N');
      // Bytes behind the SSLRequest arrived before the handshake, in plaintext: possibly injected by a man in the middle.
      if (this.#reader.buffered > 0) return this.#fatal({ sqlstate: '08P01', message: 'received unencrypted data after SSL request' });
      this.#socket.removeAllListeners('data');
      this.#socket.removeAllListeners('close');
      this.#socket.write('S');
      const secure = new tls.TLSSocket(this.#socket, { isServer: true, secureContext: this.ctx.secureContext });
      this.#socket = secure;
      this.#encrypted = true;
      this.#attach(secure);
      return;
    }
    if (packet.kind === 'gssenc') return void this.#socket.write('N');
    if (packet.kind === 'cancel') {
      const secret = Buffer.alloc(4);
      secret.writeInt32BE(packet.secret, 0);
      for (const entry of this.ctx.cancels.get(packet.pid) ?? []) if (timingSafeEqual(entry.secret, secret)) entry.cancel();
      this.#state = 'closed';
      return void this.#socket.end();
    }
    this.#params = packet.params;
    if (this.ctx.deps.config.gateway.pg_tls.require_client_tls && !this.#encrypted) {
      return this.#fatal({ sqlstate: '28000', message: 'TLS is required: connect with sslmode=require' });
    }
    this.#user = packet.params.user ?? '';
    if (!this.#user) return this.#fatal({ sqlstate: '28000', message: 'no user name in the startup packet' });
    const encodingProblem = clientEncodingProblem(packet.params.client_encoding);
    if (encodingProblem !== null) return this.#fatal({ sqlstate: '22023', message: encodingProblem });
    // Cleartext only inside TLS (the operator's choice, for drivers without SCRAM, or agent JWTs as the password, which
    // SCRAM cannot carry: the server must read the token); a plaintext connection always gets SCRAM.
    const cleartext = this.#encrypted && (this.ctx.deps.config.gateway.pg_tls.cleartext_password || this.#jwtPasswords());
    this.#state = cleartext ? 'password' : 'sasl_initial';
    this.#socket.pause();
    void this.#lookupUser().then(
      () => {
        this.#socket.write(cleartext ? authentication(AUTH_CLEARTEXT) : authentication(AUTH_SASL, Buffer.from(`${SCRAM_MECHANISM}\0\0`)));
        this.#socket.resume();
      },
      (err: unknown) => this.#fatal(errorFieldsOf(err)),
    );
  }

  /** The identity whose wire user name is the startup user: its pg_username, or its name when it has none. */
  async #lookupUser(): Promise<void> {
    const db = this.ctx.deps.db;
    let row = this.#user.length <= 255 ? await getIdentityByPgUsername(db, this.#user) : undefined;
    if (!row && this.#user.length <= 255) {
      const byName = await getIdentityByName(db, this.#user);
      if (byName && byName.pg_username === null) row = byName;
    }
    if (row && row.enabled) this.#userRow = { id: row.id, verifier: row.scram_verifier };
    const parsed = row && row.enabled && row.scram_verifier ? parseScramVerifier(row.scram_verifier) : null;
    if (row && parsed) {
      this.#identity = toAgentIdentity(row);
      this.#verifier = row.scram_verifier;
    }
    this.#passwordVerifier = parsed ?? decoyVerifier(this.ctx.decoySecret, this.#user);
    this.#scram = new ScramServer(this.#passwordVerifier);
  }

  #message(f: Frame): Promise<void> | void {
    if (f.type === Frontend.Terminate) return this.#terminate();
    switch (this.#state) {
      case 'sasl_initial':
      case 'sasl_continue':
        if (f.type !== Frontend.Password) throw new ProtocolViolation('expected a SASL response');
        return this.#sasl(f.body);
      case 'password':
        if (f.type !== Frontend.Password) throw new ProtocolViolation('expected a password message');
        return this.#password(f.body);
      case 'ready':
        return this.#relay!.handle(f);
      default:
        throw new ProtocolViolation('unexpected message');
    }
  }

  #authFailed(): void {
    this.#fatal({ sqlstate: '28P01', message: `password authentication failed for user "${this.#user.slice(0, 63)}"` });
  }

  async #sasl(body: Buffer): Promise<void> {
    try {
      if (this.#state === 'sasl_initial') {
        const r = new BodyReader(body);
        if (r.cstring() !== SCRAM_MECHANISM) throw new ScramFailure('unsupported SASL mechanism');
        const len = r.int32();
        const serverFirst = this.#scram!.first(r.bytes(len).toString('utf8'));
        this.#state = 'sasl_continue';
        this.#socket.write(authentication(AUTH_SASL_CONTINUE, Buffer.from(serverFirst)));
        return;
      }
      const serverFinal = this.#scram!.final(body.toString('utf8'));
      if (!this.#identity) throw new ScramFailure('unknown user');
      this.#socket.write(authentication(AUTH_SASL_FINAL, Buffer.from(serverFinal)));
    } catch (err) {
      if (err instanceof ScramFailure) return this.#authFailed();
      throw err;
    }
    this.#state = 'connecting';
    await this.#connect();
  }

  /** A cleartext PasswordMessage (only ever asked for over TLS), checked against the same verifier SCRAM uses. */
  async #password(body: Buffer): Promise<void> {
    const end = body.indexOf(0);
    if (end < 0 || end !== body.length - 1) throw new ProtocolViolation('malformed password message');
    if (end > MAX_PASSWORD_BYTES) return this.#authFailed();
    this.#state = 'connecting';
    const password = body.toString('utf8', 0, end);
    if (this.#jwtPasswords() && looksLikeJwt(password)) return this.#jwtLogin(password);
    // The decoy verifier makes an unknown user cost the same PBKDF2 work as a wrong password.
    const matches = await scramPasswordMatches(this.#passwordVerifier!, password);
    if (!matches || !this.#identity) return this.#authFailed();
    await this.#connect();
  }

  /** Agents may send a JWT of the configured issuer as the password (spec §5.4): auth.oidc enabled with an agent_audience. */
  #jwtPasswords(): boolean {
    const o = this.ctx.deps.config.auth.oidc;
    return o.enabled && o.agent_audience !== null;
  }

  /**
   * A JWT password: verified like a bearer JWT on /proxy and /mcp, and it must identify the very identity the startup
   * user names. A refused token is 28P01 and one audit entry (without the token).
   */
  async #jwtLogin(token: string): Promise<void> {
    let identity: AgentIdentity;
    try {
      identity = await this.ctx.deps.pipeline.authenticate(`Bearer ${token}`);
      if (this.#userRow === null || identity.id !== this.#userRow.id) throw new GatehouseError('unauthenticated', undefined, { details: { credential: 'jwt', reason: 'subject maps to another identity than the user' } });
    } catch (err) {
      if (!isGatehouseError(err) || err.code !== 'unauthenticated') return this.#fatal(errorFieldsOf(err));
      const audit = this.ctx.deps.auditor.begin({ channel: 'pgwire', request_id: `${this.#sessionId}:0`, client_ip: this.#socket.remoteAddress ?? null, action: 'pgwire.authenticate', source_id: (this.#params.database ?? this.#user).slice(0, 255) });
      await audit.end(auditFailure(err)).catch(() => undefined);
      return this.#authFailed();
    }
    this.#identity = identity;
    this.#verifier = this.#userRow.verifier;
    this.#endAtTokenExpiry(token);
    await this.#connect();
  }

  /**
   * A JWT is a credential with an end, and the session it opened ends with it: at its `exp` (or the end of its maximum
   * age) plus the clock tolerance, FATAL 28000 — class 28, invalid authorization, like PostgreSQL's own refusals of a
   * login that is no longer authorized — whatever the session is doing, as pg_terminate_backend (or the drain
   * timeout) would end it. The
   * token was verified just now, so its claims are read without a second signature check.
   */
  #endAtTokenExpiry(token: string): void {
    const o = this.ctx.deps.config.auth.oidc;
    const endMs = validUntilMs(decodeJwt(token), { clockToleranceSeconds: o.clock_tolerance_seconds, maxTokenAgeSeconds: o.agent_max_token_age_seconds });
    const message = 'terminating connection: the token this session signed in with expired; sign in again with a new token';
    this.#tokenExpiry = setTimeout(() => {
      // A ready session ends after the output it was already owed, as a shutdown's terminate does.
      if (this.#state === 'ready') return this.#relay!.terminate(message, '28000');
      this.#fatal({ sqlstate: '28000', message });
    }, Math.max(0, endMs - Date.now()));
    this.#tokenExpiry.unref();
  }

  async #connect(): Promise<void> {
    const { deps } = this.ctx;
    const sourceId = this.#params.database ?? this.#user;
    const source = deps.pipeline.lookupSource(sourceId);
    if (!source || !source.enabled || source.source_type !== 'postgres') {
      return this.#fatal({
        sqlstate: '3D000',
        message: `database "${sourceId.slice(0, 63)}" does not exist`,
        detail: 'Through the gateway, the databases are the enabled PostgreSQL sources, by source_id; no other database of the server (template1, postgres, ...) is reachable.',
        hint: 'Connect with the source_id of a PostgreSQL source your identity is granted.',
      });
    }
    const identity = this.#identity!;
    // The client's startup settings (its parameters and `options`), refused before any upstream work when one could
    // escape governance; client_encoding was checked at startup (clientEncodingProblem).
    const settings = startupSettings(this.#params, postgresConfigOf(source)?.statement_timeout_ms ?? 0);
    if (!settings.ok) return this.#fatal(settings.error);
    let managedRole: string | null;
    try {
      // A source with managed privileges: the identity's managed role, or a refusal (57P03) while they are not in
      // place — never the configured user instead (docs/least-privilege.md "Fail closed").
      managedRole = (await deps.privileges?.sessionRole(source, identity.id)) ?? null;
      this.#upstream = await deps.pools.acquire(source);
      // Once per session, right after login; the session-escape traps keep it from being left (docs/pgwire.md).
      const role = managedRole ?? identity.mapped_pg_role;
      if (role) await this.#upstream.simple(`SET ROLE ${quoteIdent(role)}`);
      // One statement, so an unknown setting fails the login with PostgreSQL's own error (42704), as it would there.
      // set_config reads a value as PostgreSQL reads a startup option (a list setting such as search_path as a list).
      await this.#upstream.simple(`SELECT ${settings.settings.map(([k, v]) => `pg_catalog.set_config(${quoteLiteral(k)}, ${quoteLiteral(v)}, false)`).join(', ')}`);
    } catch (err) {
      if (this.#upstream) await deps.pools.release(this.#upstream).catch(() => undefined);
      this.#upstream = null;
      // Only deliberate errors and the upstream's own (sanitized) reach the client; anything else is logged and answered XX000.
      if (!isGatehouseError(err) && !(err instanceof UpstreamSqlError)) this.ctx.log.error({ err }, 'wire session setup failed');
      return this.#fatal(errorFieldsOf(err));
    }
    if (this.#state === 'closed') return void (await this.#cleanup());
    if (managedRole !== null && deps.privileges) {
      // Ended when a reconciliation gives the identity another role (a grant removed, a deny policy added) or the
      // source's privileges fail: no session keeps privileges its identity lost.
      this.#untrack = deps.privileges.track(sourceId, identity.id, managedRole, (reason) =>
        this.#fatal({ sqlstate: '57P01', message: `terminating connection: ${reason}; sign in again` }),
      );
    }
    const upstream = this.#upstream;
    const out: Buffer[] = [authentication(AUTH_OK)];
    for (const [k, v] of upstream.params) if (k !== 'session_authorization' && k !== 'is_superuser') out.push(parameterStatus(k, v));
    out.push(parameterStatus('session_authorization', this.#user), parameterStatus('is_superuser', 'off'));
    const secret = this.#registerCancel(upstream.pid);
    out.push(backendKeyData(this.#pid, secret), readyForQuery(upstream.transactionStatus));
    this.#relay = new WireRelay(this.#socket, upstream, {
      decider: { pipeline: deps.pipeline, auditor: deps.auditor, nextRequestId: () => `${this.#sessionId}:${++this.#statements}`, clientIp: this.#socket.remoteAddress ?? null, sourceId },
      pii: deps.pipeline.pii,
      defaultPiiMode: deps.config.pii.default_mode,
      maxRows: deps.config.gateway.limits.result_rows,
      maxRowBytes: deps.config.gateway.limits.pg_message_bytes,
      identity: () => this.#currentIdentity(),
      log: this.ctx.log,
      // A reset (RESET ROLE, DISCARD ALL) is followed at once by the role the session runs as: the managed one when set.
      session: { role: managedRole ?? identity.mapped_pg_role ?? null, settings: settings.settings },
      userName: this.#user,
      currentUser: managedRole ?? identity.mapped_pg_role ?? upstream.params.get('session_authorization') ?? null,
    });
    this.#state = 'ready';
    this.#socket.write(Buffer.concat(out));
  }

  /**
   * The session's BackendKeyData: the process id is the upstream backend's, as pg_backend_pid() and a NOTIFY's sender
   * id report it (a session keeps its one upstream connection for its life); the secret is the gateway's own, so a
   * CancelRequest reaches the upstream only through the gateway, which checks it.
   */
  #registerCancel(pid: number): number {
    this.#pid = pid;
    this.#cancel = { secret: randomBytes(4), cancel: () => this.#relay?.cancel() };
    const entries = this.ctx.cancels.get(pid);
    if (entries) entries.push(this.#cancel);
    else this.ctx.cancels.set(pid, [this.#cancel]);
    return this.#cancel.secret.readInt32BE(0);
  }

  /**
   * The identity re-checked for this statement: still enabled, same key; its grant version is current. A state the
   * refresher holds is checked at once, without a promise (most statements: docs/decisions/0029, "Decided without
   * waiting"); otherwise it is read first.
   */
  #currentIdentity(): AgentIdentity | Promise<AgentIdentity> {
    const id = this.#identity!.id;
    const held = this.ctx.refresher.cached(id);
    if (held !== undefined) return this.#stillValid(held);
    return this.ctx.refresher.current(id).then((now) => this.#stillValid(now));
  }

  #stillValid(now: IdentityState | null): AgentIdentity {
    if (!now || !now.identity.enabled || now.verifier !== this.#verifier) {
      this.#fatal({ sqlstate: '28000', message: 'the identity was disabled or its key changed; sign in again' });
      throw new ProtocolViolation('identity no longer valid');
    }
    return now.identity;
  }

  async #cleanup(): Promise<void> {
    this.#state = 'closed';
    this.#untrack?.();
    this.#untrack = null;
    if (this.#tokenExpiry) clearTimeout(this.#tokenExpiry);
    this.#tokenExpiry = null;
    const entries = this.ctx.cancels.get(this.#pid);
    if (entries) {
      const rest = entries.filter((e) => e !== this.#cancel);
      if (rest.length > 0) this.ctx.cancels.set(this.#pid, rest);
      else this.ctx.cancels.delete(this.#pid);
    }
    this.#pid = 0;
    const upstream = this.#upstream;
    this.#upstream = null;
    if (!upstream) return;
    const relay = this.#relay;
    relay?.abandon();
    // An upstream still answering cannot be reset in a known state: it is closed instead of reused.
    if (relay?.busy) upstream.destroy();
    await this.ctx.deps.pools.release(upstream).catch(() => undefined);
  }
}
