// The ready-state of a wire session: governs each statement, relays allowed messages to the session's upstream connection and its answers back, streaming rows through redaction and the row bound.
import type net from 'node:net';
import type { AgentIdentity } from '../../identity/index.js';
import type { PiiMode, PiiScanner } from '../../governance/pii/index.js';
import type { GovernedRequest } from '../../pipeline/context.js';
import { isWriteOperation } from '../../pipeline/context.js';
import { recordWriteIntent } from '../../pipeline/run.js';
import { guardedParse } from '../../governance/sql/parser.js';
import { typedRowRedactor, type JsonRedactor } from '../../governance/pii/by-type.js';
import type { SqlClassifier } from '../../governance/sql/index.js';
import type { UpstreamConnection } from '../../connectors/postgres-exec.js';
import {
  Backend,
  COPY_DATA_PART,
  Frontend,
  ProtocolViolation,
  dataRow,
  describePortal,
  errorResponse,
  fieldsMessage,
  joinMessages,
  message,
  parseBind,
  parseDataRow,
  parseDescribeOrClose,
  parseErrorFields,
  parseExecute,
  parseParse,
  parseQuery,
  parseRowDescription,
  parseRowOrigins,
  parameterStatus,
  queryMessage,
  type ErrorFields,
  type Frame,
} from './protocol.js';
import { REFUSAL_PARSE, REFUSAL_QUERY, TxStatus } from './transaction.js';
import { splitName } from '../../governance/sql/names.js';
import { REAPPLY_EXTENDED_COMPLETIONS, reapplyExtended, reapplyQuery, reapplySql, resetEffect, type GovernedSessionState } from './session-reset.js';
import { FUNCTION_CALL_RESPONSE, functionCallResponse, functionLookupSql, governedSql, parseFunctionCall, parseFunctionCallResponse, type CalledFunction } from './function-call.js';
import { auditColumns, changesStructure, errorMayQuoteRedacted, provenanceRedaction, withheldErrorFields, withheldNoticeFields } from '../../pipeline/columns.js';
import type { StatementColumns } from '../../governance/sql/provenance.js';
import { CopyOutStream, TEXT_LIKE_OIDS, binaryRefusal, copyOutTarget, describeMessages, relationColumns, type CopyColumns, type CopyOutStatement, type CopyStep } from './copy-plan.js';
import { SessionSearchPath } from './search-path.js';
import { parsePathText, pathResolution, type PathEffect, type PathResolution, type SearchPath } from '../../governance/sql/search-path.js';
import { DecisionMemo, RECORDED_AT_ONCE, WIRE_EXECUTE_STAGES, WIRE_PARSE_STAGES, decideStatement, endRecorded, recheckColumns, type StatementDecision, type WireDecider } from './decide.js';


/**
 * A point in the client's output behind which nothing leaves until the audit entries of the statements ended before
 * it are recorded: under strict durability a statement's CommandComplete (and the ReadyForQuery after it) waits for its
 * entry, as the HTTP proxy's answer does; under buffered durability the wait is a microtask.
 */
class AuditBarrier {
  settled = false;
  recorded = true;
}

const MAX_CACHED_PLANS = 64;
/** Output queued behind an unsettled barrier below this size is written in one piece when it settles. */
const HOLD_COALESCE_BYTES = 64 * 1024;
/** Output queued behind an unsettled barrier above this size pauses the upstream until it settles. */
const HOLD_PAUSE_BYTES = 1024 * 1024;
/** Messages that tell the client a statement succeeded: an entry that could not be recorded turns them into 57P03. */
const SUCCESS_TYPES = new Set<number>([Backend.CommandComplete, Backend.EmptyQueryResponse, Backend.PortalSuspended]);
const AUDIT_UNAVAILABLE = errorResponse({ sqlstate: '57P03', message: 'The audit log cannot record this request.' });

interface RowPlan {
  /** Per column: 'keep' relays as is; 'scan' goes through the redactor; 'refuse' is a redacted column requested in binary. */
  redact: ((values: readonly (string | null)[]) => { values: (string | null)[]; redactions: number }) | null;
  textColumns: boolean[];
  refuseBinary: string | null;
  /** Result columns replaced because of what feeds them rather than their name (for the audit entry). */
  byProvenance: string[];
}

/** A statement's decision: at once when it was made without waiting, else a promise of it. */
type Decided = StatementDecision | Promise<StatementDecision>;

/** One statement between its decision and its end: its audit entry and what the upstream returned. */
interface StatementRun {
  req: GovernedRequest;
  plan: RowPlan | null;
  portal: Portal | null;
  rows: number;
  redactions: number;
  bytesOut: number;
  limitHit: boolean;
  ended: boolean;
  /** A COPY … TO STDOUT: its stream, redacted and bounded as it passes. */
  copy?: CopyOutStream;
  /** DISCARD ALL: the protocol names it drops when PostgreSQL completes it (those still meaning what they meant then). */
  dropsNames?: { statements: Map<string, string>; portals: Map<string, Portal> };
}

interface Portal {
  sql: string;
  params: unknown[];
  described: boolean;
  /** The upstream's RowDescription of the portal, kept to plan redaction of its rows. */
  description?: Buffer;
  /** The search_paths the session may have been under at Bind: PostgreSQL plans the portal's names then. */
  paths: readonly SearchPath[];
}

/** Statement kinds that may reset part of the governed session state (session-reset.ts). */
const RESET_KINDS: ReadonlySet<string> = new Set(['reset', 'set', 'discard']);
/** Completion messages of the extended re-apply form. */
const COMPLETION_TYPES = new Set<number>([Backend.ParseComplete, Backend.BindComplete, Backend.CommandComplete, Backend.CloseComplete]);

/** Statement kinds whose SQL creates or drops a protocol-level name (relay #forgetSqlNames). */
const SQL_NAMING_KINDS: ReadonlySet<string> = new Set(['prepare', 'deallocate', 'declare_cursor', 'close_cursor']);

/** Forgets one name, or every name when the statement names none (`DEALLOCATE ALL`, `CLOSE ALL`). */
function forget(names: Map<string, unknown>, name: unknown): void {
  if (typeof name === 'string' && name !== '') names.delete(name);
  else names.clear();
}

type Pending =
  /**
   * `localError`: the gateway refused the query; the upstream runs REFUSAL_QUERY instead and its error is answered by
   * this one. `cut`: the gateway answered one of the query's statements with an error, so the client expects nothing
   * more of it but ReadyForQuery.
   */
  | { kind: 'query'; runs: StatementRun[]; index: number; localError: Buffer | null; cut?: boolean }
  /** `undo`: what restores the gateway's statement or portal names when the upstream refuses or skips this message. */
  | { kind: 'simple1'; expect: number; undo?: () => void }
  | { kind: 'describeS'; stage: 0 | 1 }
  | { kind: 'describeP'; portal: Portal | null; internal: boolean }
  | { kind: 'execute'; run: StatementRun }
  /** REFUSAL_PARSE sent in place of a refused extended-protocol message: its upstream error is answered by `error`. */
  | { kind: 'refusal'; error: Buffer }
  | { kind: 'sync' }
  /** REFUSAL_QUERY sent by the gateway itself to abort the upstream transaction block: its error is not relayed. */
  | { kind: 'abort' }
  /** A query of the gateway's own on the session's connection: its answer goes to `done`, never to the client. */
  | { kind: 'internal'; answer: InternalAnswer; done: (a: InternalAnswer) => void }
  /**
   * The governed session state re-applied after a session reset (session-reset.ts), never shown to the client. `remaining`:
   * the completion messages still owed by the extended form, or null for the simple form (answered up to ReadyForQuery).
   */
  | { kind: 'reapply'; remaining: number | null; error: ErrorFields | null; path: PathEffect | null }
  /** A FunctionCall relayed upstream: one FunctionCallResponse or ErrorResponse, then ReadyForQuery. */
  | { kind: 'fcall'; run: StatementRun; fn: CalledFunction; resultFormat: number };

interface InternalAnswer {
  description: Buffer | null;
  rows: (string | null)[][];
  error: ErrorFields | null;
}

/** CopyData and CopyDone have the same type bytes in both directions. */
const COPY_DATA = 0x64; // 'd'
const COPY_DONE = 0x63; // 'c'

/** Messages the server sends at any time: they reach the client even while the gateway's own query is answered. */
const ASYNCHRONOUS_TYPES = new Set<number>([0, Backend.ParameterStatus, Backend.NoticeResponse, Backend.NotificationResponse]);
/** Functions whose OID the session already resolved: OIDs of existing functions never change meaning. */
const MAX_CACHED_FUNCTIONS = 256;

export interface RelayDeps {
  decider: WireDecider;
  pii: PiiScanner;
  defaultPiiMode: PiiMode;
  maxRows: number;
  /** The bound of one COPY row (the same as one message's, gateway.limits.pg_message_bytes). */
  maxRowBytes: number;
  /** The identity checked for this statement: at once when its state is held, else once read. */
  identity(): AgentIdentity | Promise<AgentIdentity>;
  log: { warn(o: object, m?: string): void };
  /** What the gateway set on the upstream session after login: re-applied after a session reset. */
  session: GovernedSessionState;
  /** The client's wire user name: what ParameterStatus session_authorization says, never the upstream's login user. */
  userName: string;
  /** current_user of the upstream session (the mapped role, else its login user): what `$user` in search_path names. */
  currentUser: string | null;
}

export class WireRelay {
  readonly #pending: Pending[] = [];
  readonly #statements = new Map<string, string>();
  readonly #portals = new Map<string, Portal>();
  readonly #functions = new Map<number, CalledFunction>();
  /** Row plans by (pii mode, redacted columns, RowDescription): stateless, so a session reuses them. */
  readonly #plans = new Map<string, RowPlan>();
  /** Row plans of statements with a column analysis, per analysis (cached per statement text and source structure). */
  readonly #analysisPlans = new WeakMap<readonly StatementColumns[], Map<string, RowPlan>>();
  #lastPlan: { mode: PiiMode; redactColumns: readonly string[]; analysis: readonly StatementColumns[] | undefined; named: boolean; description: Buffer; plan: RowPlan } | null = null;
  /** A statement that may change the source's structure ended: the cached structure is dropped again once its transaction ends. */
  #structureChanged = false;
  #batch: Buffer[] = [];
  /** An extended-protocol message was refused: what follows is ignored up to Sync, as PostgreSQL ignores it after an error. */
  #failed = false;
  /** The upstream sent a FATAL error: its close ends the session with that error, not the gateway's 08006. */
  #upstreamFatal = false;
  #ending = false;
  /** The gateway answered an error the upstream did not see since the last ReadyForQuery (see #settleTransaction). */
  #gatewayError = false;
  /**
   * A cursor over redacted columns was declared and its transaction has not ended: a WITH HOLD cursor runs its query
   * when the transaction commits (COMMIT, END, the Sync or end of an implicit transaction), and that error belongs to
   * no statement that reads the columns. Until the session is idle again every upstream error keeps its SQLSTATE only.
   */
  #cursorMayQuote = false;
  #closed = false;
  /** The transaction status of the last ReadyForQuery the client was sent. */
  #clientTx: number;
  /** Client messages being handled now (a decision may be awaited before anything is sent upstream). */
  #handling = 0;
  /** Set by drain(): the FATAL the session ends with at its next transaction boundary. */
  #drainError: Buffer | null = null;
  /** Client output not yet written: messages, and barriers holding what follows them. */
  #out: (Buffer | AuditBarrier)[] = [];
  #outBytes = 0;
  #unsettled = 0;
  /** Recording of entries ended since the last message queued: the next message gets a barrier on them. */
  #unrecorded: Promise<boolean>[] = [];
  #clientBlocked = false;
  #upstreamPaused = false;
  /** Decisions of prepared statements, reused by Parse and Execute while their inputs are unchanged. */
  readonly memo: DecisionMemo;
  /** The session's search_path as the upstream holds it, and the paths a statement decided now may run under. */
  readonly #path: SessionSearchPath;
  /** The client's startup search_path, re-applied after a reset (null: none, the session starts in public). */
  readonly #startupPath: SearchPath | null;

  constructor(private readonly client: net.Socket, private readonly upstream: UpstreamConnection, private readonly deps: RelayDeps) {
    this.memo = new DecisionMemo(deps.decider.pipeline);
    const startup = deps.session.settings.find(([k]) => k.toLowerCase() === 'search_path');
    this.#startupPath = startup === undefined ? null : parsePathText(startup[1]);
    this.#path = new SessionSearchPath(this.#startupPath ?? undefined);
    this.#clientTx = upstream.transactionStatus;
    upstream.setHandler(
      (type, raw, body) => this.#onUpstream(type, raw, body),
      () => this.#flush(false),
    );
    client.on('drain', () => {
      this.#clientBlocked = false;
      this.#flow();
    });
  }

  /** True while the upstream still owes answers (the connection cannot be reset and reused yet). */
  get busy(): boolean {
    return this.#pending.length > 0;
  }

  cancel(): void {
    if (this.#pending.length > 0) this.upstream.cancel();
  }

  /**
   * Shutdown, first step (docs/pgwire.md "Shutdown"): the session ends with `message` (57P01) at its next transaction
   * boundary — now when it is idle outside a transaction block, otherwise after the ReadyForQuery that reports it idle
   * again. What the client pipelined behind that boundary is not run.
   */
  drain(message: string): void {
    if (this.#closed || this.#drainError !== null) return;
    this.#drainError = errorResponse({ severity: 'FATAL', sqlstate: '57P01', message });
    this.#endIfDrainedIdle();
  }

  /** Ends the session now with a FATAL (57P01 at the shutdown's drain timeout, 28000 when its JWT expired); the upstream connection is closed, which rolls back an open transaction. */
  terminate(message: string, sqlstate = '57P01'): void {
    if (this.#closed) return;
    this.#endSession(message, sqlstate);
  }

  #endIfDrainedIdle(): void {
    if (this.#drainError === null || this.#closed || this.#ending) return;
    if (this.#handling > 0 || this.#pending.length > 0 || this.#batch.length > 0 || this.#failed || this.#clientTx !== TxStatus.Idle) return;
    this.#send(this.#drainError);
    this.#endAfterOutput();
  }

  /**
   * Ends the client's session with a FATAL error after what it was already owed; the upstream connection is closed,
   * never reused. What waits on a barrier is dropped: the session ends with the error instead.
   */
  #endSession(message: string, sqlstate = '08P01'): void {
    if (!this.#closed) this.#flush(true);
    if (!this.#closed) this.client.write(errorResponse({ severity: 'FATAL', sqlstate, message }));
    this.abandon();
    this.upstream.destroy();
    this.client.end();
  }

  /** Ends the audit entries of statements that never finished (the client went away). */
  abandon(): void {
    this.#closed = true;
    for (const p of this.#pending) {
      const runs = p.kind === 'query' ? p.runs : p.kind === 'execute' ? [p.run] : [];
      for (const r of runs) if (!r.ended) this.#end(r, { status: 499, decision: 'error', error_code: 'client_closed' });
      if (p.kind === 'fcall' && !p.run.ended) this.#end(p.run, { status: 499, decision: 'error', error_code: 'client_closed' });
    }
    this.upstream.setHandler(null);
  }

  /** Queues a message for the client; it is written at the end of the upstream read (one write per read, not per message). */
  #send(buf: Buffer): void {
    if (this.#closed) return;
    if (this.#unrecorded.length > 0) this.#barrier();
    this.#out.push(buf);
    this.#outBytes += buf.length;
  }

  #track(recorded: Promise<boolean>): void {
    // An entry recorded at once needs no barrier: the output behind it would be released unchanged.
    if (!this.#closed && recorded !== RECORDED_AT_ONCE) this.#unrecorded.push(recorded);
  }

  #barrier(): void {
    const waits = this.#unrecorded;
    this.#unrecorded = [];
    const barrier = new AuditBarrier();
    this.#out.push(barrier);
    this.#unsettled++;
    const all = waits.length === 1 ? waits[0]! : Promise.all(waits).then((r) => r.every(Boolean));
    void all.then((recorded) => {
      barrier.settled = true;
      barrier.recorded = recorded;
      this.#unsettled--;
      this.#flush(true);
    });
  }

  /**
   * Writes the queued output up to the first unsettled barrier. At the end of an upstream read (`settling` false) a
   * small output waiting on a barrier is left for the barrier's own flush, so a statement's answer is one write.
   */
  #flush(settling: boolean): void {
    if (this.#closed) return;
    if (!settling && this.#unsettled > 0 && this.#outBytes < HOLD_COALESCE_BYTES) return this.#flow();
    const out = this.#out;
    const parts: Buffer[] = [];
    let bytes = 0;
    let i = 0;
    for (; i < out.length; i++) {
      const item = out[i]!;
      if (item instanceof AuditBarrier) {
        if (!item.settled) break;
        const next = out[i + 1];
        if (!item.recorded && next instanceof Buffer && SUCCESS_TYPES.has(next[0]!)) {
          // Strict durability: without its entry the statement does not report success (the HTTP proxy answers 503).
          this.#outBytes += AUDIT_UNAVAILABLE.length - next.length;
          out[i + 1] = AUDIT_UNAVAILABLE;
        }
        continue;
      }
      parts.push(item);
      bytes += item.length;
    }
    if (i === out.length) this.#out = [];
    else if (i > 0) this.#out = out.slice(i);
    this.#outBytes -= bytes;
    if (parts.length > 0 && !this.client.write(joinMessages(parts, bytes))) this.#clientBlocked = true;
    if (this.#ending && this.#out.length === 0) {
      this.abandon();
      this.client.end();
      return;
    }
    this.#flow();
  }

  /**
   * The upstream closed after its own FATAL error: what the client is owed (the FATAL included) is written once its
   * audit barriers settle, then the client's connection ends, as PostgreSQL's would.
   */
  #endAfterOutput(): void {
    this.#ending = true;
    this.upstream.setHandler(null);
    this.#flush(true);
  }

  /** Backpressure: the upstream socket pauses while the client cannot take more or too much waits on a barrier. */
  #flow(): void {
    const pause = this.#clientBlocked || (this.#unsettled > 0 && this.#outBytes > HOLD_PAUSE_BYTES);
    if (pause === this.#upstreamPaused) return;
    this.#upstreamPaused = pause;
    if (pause) this.upstream.pause();
    else this.upstream.resume();
  }

  // ---- client side ----

  /**
   * Handles one client message; answers a promise only while the message is still being handled (a statement being
   * decided, a COPY waiting for the upstream to drain): Bind, Describe, Close, Sync and Flush are handled at once, with
   * no promise per message (docs/decisions/0029).
   */
  handle(frame: Frame): Promise<void> | undefined {
    this.#handling++;
    let done: Promise<void> | void = undefined;
    try {
      done = this.#handle(frame);
    } finally {
      if (!done) this.#handled();
    }
    return done ? done.finally(() => this.#handled()) : undefined;
  }

  #handled(): void {
    this.#handling--;
    if (this.#drainError !== null) this.#endIfDrainedIdle();
  }

  #handle(frame: Frame): Promise<void> | void {
    if (this.#pending.length === 0 && this.#batch.length === 0) this.#path.settle();
    if (this.#failed && frame.type !== Frontend.Sync) return;
    switch (frame.type) {
      case Frontend.Query:
        // Written straight upstream, a Query would overtake the batch still held for its Sync, and its answer would be
        // matched to (and governed as) the batch's statements; after a Flush the upstream may be skipping to that Sync.
        if (this.#extendedOpen()) return this.#endSession('Query inside an unfinished extended-protocol batch (send Sync first)');
        return this.#query(parseQuery(frame.body));
      case Frontend.Parse:
        return this.#parse(frame);
      case Frontend.Bind:
        return this.#bind(frame);
      case Frontend.Describe: {
        const d = parseDescribeOrClose(frame.body);
        if (d.target === 'P') {
          const portal = this.#portals.get(d.name) ?? null;
          if (portal) portal.described = true;
          this.#pending.push({ kind: 'describeP', portal, internal: false });
        } else this.#pending.push({ kind: 'describeS', stage: 0 });
        this.#batch.push(frame.raw);
        return;
      }
      case Frontend.Execute:
        return this.#execute(frame);
      case Frontend.Close: {
        const c = parseDescribeOrClose(frame.body);
        const undo = c.target === 'S' ? this.#rename(this.#statements, c.name, undefined) : this.#rename(this.#portals, c.name, undefined);
        this.#pending.push({ kind: 'simple1', expect: Backend.CloseComplete, undo });
        this.#batch.push(frame.raw);
        return;
      }
      case Frontend.Sync: {
        this.#failed = false;
        this.#pending.push({ kind: 'sync' });
        this.#batch.push(frame.raw);
        this.#flushBatch();
        return;
      }
      case Frontend.Flush:
        this.#batch.push(frame.raw);
        this.#flushBatch();
        return;
      case Frontend.CopyData:
      case COPY_DATA_PART:
      case Frontend.CopyDone:
      case Frontend.CopyFail:
        // Only meaningful inside a COPY FROM STDIN the statement decision allowed; the upstream refuses them otherwise.
        // Back-pressure: while the upstream socket's buffer is full the listener reads no further client message (its
        // queue is bounded, then the client socket pauses), so a slow upstream slows the client, not the gateway's memory.
        if (!this.upstream.write(frame.raw)) return this.upstream.drained();
        return;
      case Frontend.FunctionCall:
        return this.#functionCall(frame);
      default:
        throw new ProtocolViolation(`unexpected message type ${frame.type}`);
    }
  }

  #flushBatch(): void {
    if (this.#batch.length === 0) return;
    let bytes = 0;
    for (const m of this.#batch) bytes += m.length;
    this.upstream.write(joinMessages(this.#batch, bytes));
    this.#batch = [];
  }

  /**
   * Extended protocol: an error, then every message up to Sync is ignored (as a server would). The upstream fails in
   * the refused message's place (transaction.ts), so an open transaction is aborted on both sides and its batch's
   * implicit transaction rolls back; if an earlier message of the batch already failed upstream, that error is the
   * one answered and this one is skipped, as PostgreSQL would skip the refused message.
   */
  #refuseExtended(error: ErrorFields): void {
    this.#failed = true;
    this.#pending.push({ kind: 'refusal', error: errorResponse(error) });
    this.#batch.push(REFUSAL_PARSE);
  }

  #run(req: GovernedRequest, portal: Portal | null): StatementRun {
    return { req, plan: null, portal, rows: 0, redactions: 0, bytesOut: 0, limitHit: false, ended: false };
  }

  /**
   * Decides one statement under every search_path the session may be under when it runs (search-path.ts): `paths`
   * for a portal (planned at its Bind), else what the session's path may be now. SQL `EXECUTE` of a statement
   * PREPAREd under another path is refused: PostgreSQL would analyse it again under this one.
   */
  #decide(sql: string, params: readonly unknown[], stages: typeof WIRE_EXECUTE_STAGES, memo: DecisionMemo | null, paths?: readonly SearchPath[]): Decided {
    const identity = this.deps.identity();
    if (identity instanceof Promise) return identity.then((i) => this.#decideAs(i, sql, params, stages, memo, paths));
    return this.#decideAs(identity, sql, params, stages, memo, paths);
  }

  /**
   * #decide once the identity is known. Every step answers at once when it can (the identity and the memo's inputs
   * held in memory), so a statement decided from the memo takes no promise (docs/decisions/0029, "Decided without
   * waiting"); the first step that must wait makes the rest wait with it.
   */
  #decideAs(identity: AgentIdentity, sql: string, params: readonly unknown[], stages: typeof WIRE_EXECUTE_STAGES, memo: DecisionMemo | null, paths?: readonly SearchPath[]): Decided {
    const resolution = pathResolution(paths ?? this.#path.possible(), this.deps.currentUser);
    const decision = decideStatement(this.deps.decider, identity, sql, params, stages, memo, resolution);
    if (decision instanceof Promise) return decision.then((d) => this.#pathChecked(d, resolution));
    return this.#pathChecked(decision, resolution);
  }

  #pathChecked(decision: StatementDecision, resolution: PathResolution | null): StatementDecision {
    if (decision.kind !== 'allow') return decision;
    for (const e of effectsOf(decision.req)) {
      if (e.kind !== 'execute' || this.#path.executable(e.name, resolution?.key ?? '')) continue;
      const error = { sqlstate: '42501', message: `prepared statement "${e.name}" was prepared under another search_path (or may have been); PREPARE it again under this one` };
      decision.req.audit.addReason('search_path: prepared under another search_path');
      const recorded = endRecorded(this.deps.decider, decision.req.audit, { status: 403, decision: 'deny', error_code: 'forbidden' });
      return { kind: 'refused', req: decision.req, error, recorded };
    }
    return decision;
  }

  async #query(sql: string): Promise<void> {
    const texts = splitStatements(sql, this.deps.decider.pipeline.sql);
    if (texts.length === 0) {
      // Empty or comment-only: nothing to govern, the upstream answers EmptyQueryResponse.
      this.#pending.push({ kind: 'query', runs: [], index: 0, localError: null });
      this.upstream.write(queryMessage(sql));
      return;
    }
    // Decide every statement first: if any is refused or queued, none runs (docs/pgwire.md).
    const decisions: StatementDecision[] = [];
    // Simple-protocol texts carry their literals, so they seldom repeat: no memo.
    for (const text of texts) {
      const d = await this.#decide(text, [], WIRE_EXECUTE_STAGES, null);
      decisions.push(d);
      // The statements behind it are decided under what it may set (if none is refused, all of them are sent).
      if (d.kind === 'allow') this.#path.decided(effectsOf(d.req));
    }
    const refusal = decisions.find((d) => d.kind !== 'allow');
    if (refusal) {
      for (const d of decisions) {
        if (d.kind !== 'allow') {
          this.#track(d.recorded);
          continue;
        }
        d.req.audit.addReason('pgwire: not executed, another statement of the same query was refused');
        this.#track(endRecorded(this.deps.decider, d.req.audit, { status: 409, decision: 'error', error_code: 'not_executed' }));
      }
      // The upstream fails in the query's place (transaction.ts), in order behind earlier pipelined queries; its error
      // is answered by the refusal.
      this.#pending.push({ kind: 'query', runs: [], index: 0, localError: errorResponse((refusal as { error: ErrorFields }).error) });
      this.upstream.write(REFUSAL_QUERY);
      return;
    }
    const copyAt = decisions.findIndex((d) => d.kind === 'allow' && d.req.sql?.statements.some((st) => st.kind === 'copy'));
    const copy = copyAt < 0 ? null : copyOutTarget(texts[copyAt]!);
    if (copy !== null && copy.kind !== 'none') {
      if (texts.length === 1 && copy.kind === 'copy') return this.#copyOut(sql, decisions[0]!.req, copy.statement);
      const error = copy.kind === 'refuse' ? copy.error : { sqlstate: '0A000', message: 'COPY … TO STDOUT must be sent as a query of its own through the gateway' };
      for (const d of decisions) this.#endRefused(d.req, `copy: ${error.message}`, 'copy_refused');
      return this.#answerLocally(error);
    }
    // A role reset re-applied after the whole string would leave the statements behind it (and a SAVEPOINT a later
    // ROLLBACK TO could return to) under the upstream's login role: it must end the string (docs/pgwire.md).
    const misplaced = decisions.findIndex((d, i) => i < decisions.length - 1 && d.req.sql?.traps.includes('session_reset'));
    if (misplaced >= 0) {
      const error = { sqlstate: '42501', message: 'a session reset (DISCARD ALL, RESET ALL, RESET ROLE …) must be the last statement of its query string through the gateway' };
      for (const d of decisions) this.#endRefused(d.req, `session_reset: ${error.message}`, 'forbidden', 403);
      return this.#answerLocally(error);
    }
    const runs = decisions.map((d) => this.#run(d.req, null));
    // Each write's intent is durable before the query goes upstream (docs/audit.md "Write intents"); a refusal throws here, before anything is sent.
    if (runs.some((r) => isWriteOperation(r.req.operation))) runs[0]!.req.audit.admit();
    // Together, so the intents of one query share one sync.
    await Promise.all(runs.filter((r) => isWriteOperation(r.req.operation)).map((r) => recordWriteIntent(r.req)));
    for (const [i, d] of decisions.entries()) this.#forgetSqlNames(d.req, texts[i]!);
    this.#pending.push({ kind: 'query', runs, index: 0, localError: null });
    this.upstream.write(queryMessage(sql));
    const reapply = this.#resetReapply(runs[runs.length - 1]!, texts[texts.length - 1]!);
    if (reapply !== null) {
      // A Query of its own, written before anything else the client sends: it runs before the client's next statement.
      this.#pending.push({ kind: 'reapply', remaining: null, error: null, path: reapply.path });
      this.upstream.write(reapplyQuery(reapply.sql));
    }
  }

  /**
   * After a statement that resets part of the governed session state (session-reset.ts): forgets the protocol names
   * DISCARD ALL drops, and returns the statement that re-applies what it undid, or null.
   */
  #resetReapply(run: StatementRun, sql: string): { sql: string; path: PathEffect | null } | null {
    if (!run.req.sql?.statements.some((st) => RESET_KINDS.has(st.kind))) return null;
    const effect = resetEffect(sql);
    if (effect === null) return null;
    // Forgotten when PostgreSQL completes the reset (a reset it rejects, or skips in a failed batch, drops nothing).
    if (effect.dropsNames) run.dropsNames = { statements: new Map(this.#statements), portals: new Map(this.#portals) };
    const reapply = reapplySql(this.deps.session, effect);
    if (reapply === null) return null;
    // The client's startup search_path comes back with it: the statements behind it may run under either path.
    const path: PathEffect | null =
      this.#startupPath !== null && (effect.settings === 'all' || effect.settings.includes('search_path')) ? { kind: 'set', path: this.#startupPath, local: false } : null;
    if (path !== null) this.#path.decided([path]);
    return { sql: reapply, path };
  }

  async #parse(frame: Frame): Promise<void> {
    const { name, sql } = parseParse(frame.body);
    if (splitStatements(sql, this.deps.decider.pipeline.sql).length > 1) {
      this.#refuseExtended({ sqlstate: '42601', message: 'cannot insert multiple commands into a prepared statement' });
      return;
    }
    const decision = sql.trim() === '' ? null : await this.#decide(sql, [], WIRE_PARSE_STAGES, this.memo);
    if (decision && decision.kind !== 'allow') {
      this.#track(decision.recorded);
      this.#refuseExtended(decision.error);
      return;
    }
    this.#pending.push({ kind: 'simple1', expect: Backend.ParseComplete, undo: this.#rename(this.#statements, name, sql) });
    this.#batch.push(frame.raw);
  }

  /**
   * SQL acts on the protocol's names: PREPARE and DEALLOCATE on statements, DECLARE and CLOSE on portals. After
   * `DEALLOCATE s1; PREPARE s1 AS <write>`, a Bind of s1 would be governed (and audited) as what the gateway saw
   * Parsed under s1 while PostgreSQL ran the write. The names such a statement touches are forgotten (all of them for
   * DEALLOCATE ALL and CLOSE ALL) before it is sent, so a Bind or Execute of one is refused (26000, 34000) until the
   * client Parses or Binds it again; what SQL prepared or declared is run by EXECUTE or FETCH, governed on their own.
   */
  #forgetSqlNames(req: GovernedRequest, sql: string): void {
    if (!req.sql?.statements.some((st) => SQL_NAMING_KINDS.has(st.kind))) return;
    const parsed = guardedParse(sql);
    if (!parsed.ok) {
      this.#statements.clear();
      this.#portals.clear();
      return;
    }
    type Named = { name?: unknown; portalname?: unknown };
    for (const { stmt } of (parsed.tree as { stmts?: { stmt?: Record<string, Named> }[] }).stmts ?? []) {
      const statement = stmt?.PrepareStmt ?? stmt?.DeallocateStmt;
      if (statement !== undefined) forget(this.#statements, statement.name);
      const portal = stmt?.DeclareCursorStmt ?? stmt?.ClosePortalStmt;
      if (portal !== undefined) forget(this.#portals, portal.portalname);
    }
  }

  /**
   * Gives a statement or portal name its new meaning at once (a pipelined Bind or Execute needs it before the upstream
   * answers) and returns what restores the old one. PostgreSQL may refuse the message (42P05: the name is in use) or
   * skip it (an earlier message of the pipeline failed); the name must then keep meaning what the upstream holds, or
   * the next Execute would be governed as one statement while the upstream runs another.
   */
  #rename<V>(names: Map<string, V>, name: string, value: V | undefined): () => void {
    const previous = names.get(name);
    if (value === undefined) names.delete(name);
    else names.set(name, value);
    return () => (previous === undefined ? names.delete(name) : names.set(name, previous));
  }

  #bind(frame: Frame): void {
    const bind = parseBind(frame.body);
    const sql = this.#statements.get(bind.statement);
    if (sql === undefined) {
      this.#refuseExtended({ sqlstate: '26000', message: `prepared statement "${bind.statement}" does not exist` });
      return;
    }
    const undo = this.#rename(this.#portals, bind.portal, { sql, params: bind.params, described: false, paths: this.#path.possible() });
    this.#pending.push({ kind: 'simple1', expect: Backend.BindComplete, undo });
    this.#batch.push(frame.raw);
  }

  /** An Execute: handled at once when its decision is (from the memo), otherwise once decided. */
  #execute(frame: Frame): Promise<void> | void {
    const { portal: name } = parseExecute(frame.body);
    const portal = this.#portals.get(name);
    if (!portal) {
      this.#refuseExtended({ sqlstate: '34000', message: `portal "${name}" does not exist` });
      return;
    }
    if (portal.sql.trim() === '') {
      this.#pending.push({ kind: 'execute', run: { ...this.#run({} as GovernedRequest, portal), ended: true } });
      this.#batch.push(frame.raw);
      return;
    }
    const decision = this.#decide(portal.sql, portal.params, WIRE_EXECUTE_STAGES, this.memo, unionPaths(portal.paths, this.#path.possible()));
    if (decision instanceof Promise) return decision.then((d) => this.#executeDecided(frame, name, portal, d));
    return this.#executeDecided(frame, name, portal, decision);
  }

  #executeDecided(frame: Frame, name: string, portal: Portal, decision: StatementDecision): Promise<void> | void {
    if (decision.kind !== 'allow') {
      this.#track(decision.recorded);
      this.#refuseExtended(decision.error);
      return;
    }
    this.#path.decided(effectsOf(decision.req));
    if (decision.req.sql?.statements.some((st) => st.kind === 'copy') && copyOutTarget(portal.sql).kind !== 'none') {
      // Its columns are learnt with a round trip of the gateway's own, which needs a Sync: the simple protocol has one.
      const message = 'COPY … TO STDOUT is governed through the simple query protocol only; send it as a Query';
      this.#endRefused(decision.req, `copy: ${message}`, 'copy_refused');
      return this.#refuseExtended({ sqlstate: '0A000', message });
    }
    const run = this.#run(decision.req, portal);
    // A write's intent is recorded before it is sent (docs/audit.md "Write intents").
    if (isWriteOperation(run.req.operation)) return recordWriteIntent(run.req).then(() => this.#sendExecute(frame, name, portal, run));
    this.#sendExecute(frame, name, portal, run);
  }

  #sendExecute(frame: Frame, name: string, portal: Portal, run: StatementRun): void {
    this.#forgetSqlNames(run.req, portal.sql);
    if (!portal.described && this.#needsPlan(run)) {
      // The rows need column names for redaction: ask for the portal's description without relaying it.
      this.#pending.push({ kind: 'describeP', portal, internal: true });
      this.#batch.push(describePortal(name));
      portal.described = true;
    }
    this.#pending.push({ kind: 'execute', run });
    this.#batch.push(frame.raw);
    const reapply = this.#resetReapply(run, portal.sql);
    if (reapply !== null) {
      // Right behind the Execute, inside the client's batch: skipped with it when it fails, before anything after it.
      this.#pending.push({ kind: 'reapply', remaining: REAPPLY_EXTENDED_COMPLETIONS, error: null, path: reapply.path });
      this.#batch.push(reapplyExtended(reapply.sql));
    }
  }

  /**
   * FunctionCall is a cycle of its own, as in PostgreSQL: one FunctionCallResponse or ErrorResponse, then
   * ReadyForQuery, no Sync. The OID is named through the upstream's pg_proc and the call governed as the SELECT of that
   * function (docs/pgwire.md "Function calls"): refused, it is answered here; allowed, the message itself goes upstream.
   */
  async #functionCall(frame: Frame): Promise<void> {
    const call = parseFunctionCall(frame.body);
    if (this.#extendedOpen()) {
      // The upstream may be skipping to a Sync the client has not sent: nothing sent now would be answered in order.
      return this.#endSession('FunctionCall inside an unfinished extended-protocol batch (send Sync first)');
    }
    let fn = this.#functions.get(call.oid);
    if (!fn) {
      const a = await this.#internal(queryMessage(functionLookupSql(call.oid)));
      if (a.error) return this.#answerLocally(a.error);
      const row = a.rows[0];
      if (!row) return this.#answerLocally({ sqlstate: '42883', message: `function with OID ${call.oid} does not exist` });
      fn = { schema: row[0] ?? '', name: row[1] ?? '', returnType: Number(row[2]) };
      if (this.#functions.size >= MAX_CACHED_FUNCTIONS) this.#functions.clear();
      this.#functions.set(call.oid, fn);
    }
    const decision = await this.#decide(governedSql(fn, call.args.length), call.args, WIRE_EXECUTE_STAGES, null);
    if (decision.kind !== 'allow') {
      this.#track(decision.recorded);
      return this.#answerLocally(decision.error);
    }
    const run = this.#run(decision.req, null);
    if (isWriteOperation(run.req.operation)) await recordWriteIntent(run.req);
    this.#pending.push({ kind: 'fcall', run, fn, resultFormat: call.resultFormat });
    this.upstream.write(frame.raw);
  }

  /** True while extended-protocol messages wait for their Sync (in the batch or already upstream). */
  #extendedOpen(): boolean {
    if (this.#batch.length > 0) return true;
    const last = this.#pending[this.#pending.length - 1];
    return last !== undefined && (last.kind === 'simple1' || last.kind === 'describeS' || last.kind === 'describeP' || last.kind === 'execute' || last.kind === 'refusal' || (last.kind === 'reapply' && last.remaining !== null));
  }

  /** An error answered by the gateway as a cycle of its own: the upstream fails in its place (transaction.ts), so a transaction block is aborted as PostgreSQL's own error would abort it. */
  #answerLocally(error: ErrorFields): void {
    this.#pending.push({ kind: 'query', runs: [], index: 0, localError: errorResponse(error) });
    this.upstream.write(REFUSAL_QUERY);
  }

  /** Runs a query of the gateway's own on the session's connection, in order behind what the client already sent. */
  #internal(msg: Buffer): Promise<InternalAnswer> {
    return new Promise((done) => {
      this.#pending.push({ kind: 'internal', answer: { description: null, rows: [], error: null }, done });
      this.upstream.write(msg);
    });
  }

  #onInternal(h: Pending & { kind: 'internal' }, type: number, body: Buffer): void {
    const a = h.answer;
    if (type === Backend.RowDescription) a.description = Buffer.from(body);
    else if (type === Backend.DataRow) a.rows.push(parseDataRow(body).map((v) => (v === null ? null : v.toString('utf8'))));
    else if (type === Backend.ErrorResponse) {
      const f = this.upstream.sanitizeFields(parseErrorFields(body));
      a.error ??= { sqlstate: f.get('C') ?? 'XX000', message: f.get('M') ?? 'upstream error', ...(f.has('D') ? { detail: f.get('D')! } : {}), ...(f.has('H') ? { hint: f.get('H')! } : {}) };
    } else if (type === Backend.ReadyForQuery) {
      this.#pending.shift();
      h.done(a);
    }
  }

  /**
   * The re-apply's answer. The simple form runs as a Query of its own: 25P02 means the client's string left its
   * transaction block failed, so the reset itself did not take effect or is undone with the block (the reset ended the
   * string, so no savepoint follows it). Any other error, or one of the extended form (which runs only when the reset
   * itself succeeded), leaves the session outside its governed state: it ends, and closing the connection rolls back
   * whatever is open.
   */
  #onReapply(h: Pending & { kind: 'reapply' }, type: number, body: Buffer): void {
    if (type === 0) return this.#endSession('the upstream connection was lost', '08006');
    if (type === Backend.ErrorResponse) {
      const f = this.upstream.sanitizeFields(parseErrorFields(body));
      h.error ??= { sqlstate: f.get('C') ?? 'XX000', message: f.get('M') ?? 'upstream error' };
      if (h.remaining === null) return;
    } else if (h.remaining !== null) {
      if (type === Backend.CommandComplete && h.path !== null && h.error === null) this.#path.completed([h.path], 'SELECT', '');
      if (COMPLETION_TYPES.has(type) && --h.remaining === 0) this.#pending.shift();
      return;
    } else if (type === Backend.CommandComplete && h.path !== null) {
      this.#path.completed([h.path], 'SELECT', '');
      return;
    } else if (type !== Backend.ReadyForQuery) return;
    if (h.remaining === null) this.#pending.shift();
    if (h.error !== null && (h.remaining !== null || h.error.sqlstate !== '25P02')) {
      this.deps.log.warn({ sqlstate: h.error.sqlstate }, 'wire session state could not be re-applied after a session reset');
      this.#endSession(`the session's governed state could not be restored after a session reset: ${h.error.message}`, h.error.sqlstate);
    }
  }

  /** ParameterStatus as the client may see it: the session's authorization is the wire user's, as at login, never the upstream's. */
  #clientParameterStatus(raw: Buffer, body: Buffer): Buffer {
    const nul = body.indexOf(0);
    const name = body.toString('utf8', 0, nul);
    if (name === 'session_authorization') return parameterStatus(name, this.deps.userName);
    if (name === 'is_superuser') return parameterStatus(name, 'off');
    return raw;
  }

  #onFunctionResult(h: Pending & { kind: 'fcall' }, body: Buffer): void {
    const run = h.run;
    let value = parseFunctionCallResponse(body);
    if (value !== null && this.#needsPlan(run) && (h.resultFormat === 0 || TEXT_LIKE_OIDS.has(h.fn.returnType))) {
      const o = run.req.policyDecision!.obligations;
      const text = value.toString('utf8');
      const mode = o.pii_mode ?? this.deps.defaultPiiMode;
      const redact = typedRowRedactor([h.fn.returnType], this.deps.pii.rowRedactor([h.fn.name], { mode, redactColumns: o.redact_columns }), this.#jsonRedactor(mode, o.redact_columns));
      const r = redact([text]);
      if (r.redactions > 0) {
        run.redactions += r.redactions;
        value = utf8OrNull(r.values[0]);
      }
    }
    const out = functionCallResponse(value);
    run.bytesOut += out.length;
    this.#end(run, { status: 200, decision: 'allow', error_code: null });
    this.#send(out);
  }

  #jsonRedactor(mode: PiiMode, redactColumns: readonly string[]): JsonRedactor {
    return (document) => this.deps.pii.scanJson(document, { mode, redactColumns });
  }

  /** Ends the entry of an allowed statement the gateway then refused before it ran. */
  #endRefused(req: GovernedRequest, reason: string, code: string, status = 400): void {
    req.audit.addReason(reason);
    this.#track(endRecorded(this.deps.decider, req.audit, { status, decision: 'deny', error_code: code }));
  }

  /**
   * COPY … TO STDOUT (docs/pgwire.md "COPY"): the columns it moves are learnt on the session's connection first; the
   * column rules apply to them as to a SELECT of them; binary output is refused when a column would have to be
   * replaced; then the statement runs and its CopyData passes through the redactor.
   */
  async #copyOut(sql: string, req: GovernedRequest, s: CopyOutStatement): Promise<void> {
    if (this.#extendedOpen()) {
      const error = { sqlstate: '0A000', message: 'COPY inside an unfinished extended-protocol batch is not supported through the gateway (send Sync first)' };
      this.#endRefused(req, `copy: ${error.message}`, 'copy_refused');
      return this.#answerLocally(error);
    }
    const a = await this.#internal(describeMessages(s));
    if (a.error) {
      req.audit.addReason(`upstream sqlstate ${a.error.sqlstate}`);
      this.#track(endRecorded(this.deps.decider, req.audit, { status: 400, decision: 'allow', error_code: 'upstream_sql_error' }));
      return this.#answerLocally(a.error);
    }
    let columns: CopyColumns;
    if (s.relation) columns = relationColumns(s, a.rows);
    else if (a.description) {
      const d = parseRowDescription(a.description);
      columns = { fields: parseRowOrigins(a.description), names: d.names, typeOids: d.typeOids, tableColumns: null };
    } else columns = { fields: [], names: [], typeOids: [], tableColumns: null };
    if (columns.tableColumns) {
      const denied = recheckColumns(this.deps.decider, req, columns.tableColumns);
      if (denied !== null) {
        const column = splitName(denied).at(-1)!;
        this.#endRefused(req, `policy: column ${denied} denied`, 'forbidden', 403);
        return this.#answerLocally({ sqlstate: '42501', message: `A policy denies column "${column}", which COPY would read.` });
      }
    }
    const o = req.policyDecision!.obligations;
    let redaction = null;
    if (this.#needsPlan({ req } as StatementRun)) {
      // Redaction by provenance, as for a result: what feeds each column decides, not its name (pipeline/columns.ts).
      const forceColumns = provenanceRedaction(req, columns.fields);
      if (req.columnAnalysis !== undefined) auditColumns(req, columns.names.filter((_, i) => forceColumns[i]));
      const mode = o.pii_mode ?? this.deps.defaultPiiMode;
      redaction = { mode, redactColumns: o.redact_columns, forceColumns, redactJson: this.#jsonRedactor(mode, o.redact_columns) };
    }
    const options = { format: s.format, columns, pii: this.deps.pii, redaction, maxRowBytes: this.deps.maxRowBytes, maxRows: this.deps.maxRows };
    const refused = binaryRefusal(options);
    if (refused !== null) {
      this.#endRefused(req, `redaction: column ${refused} requested in binary format`, 'binary_redacted_column');
      return this.#answerLocally({ sqlstate: '0A000', message: `column "${refused}" is redacted by policy and cannot be copied in binary format`, hint: 'Use COPY in text or CSV format.' });
    }
    const run = this.#run(req, null);
    run.copy = new CopyOutStream(options);
    this.#pending.push({ kind: 'query', runs: [run], index: 0, localError: null });
    this.upstream.write(queryMessage(sql));
  }

  /** CopyOutResponse, CopyData and CopyDone of the upstream: through the run's COPY stream when it has one. */
  #onCopyOut(type: number, raw: Buffer, body: Buffer): void {
    if (this.#cutQuery()) return;
    const run = this.#currentRun();
    const copy = run?.copy;
    if (!run || !copy || run.ended) return this.#send(raw);
    const step: CopyStep = type === Backend.CopyOutResponse ? copy.start(body) : type === COPY_DATA ? copy.data(body) : copy.done();
    if (!step.ok) {
      // The client is told at once (an ErrorResponse ends a COPY OUT); the rest of the stream is withheld.
      (this.#head() as Pending & { kind: 'query' }).cut = true;
      this.#gatewayError = true;
      run.redactions = copy.redactions;
      run.req.audit.addReason(step.reason);
      this.#end(run, { status: step.code === 'payload_too_large' ? 413 : 502, decision: 'allow', error_code: step.code });
      return this.#send(errorResponse(step.error));
    }
    const out = type === COPY_DATA && step.out !== null && step.out !== body ? message(COPY_DATA, step.out) : type === COPY_DATA && step.out === null ? null : raw;
    if (out === null) return;
    run.bytesOut += out.length;
    this.#send(out);
  }

  #needsPlan(run: StatementRun): boolean {
    const o = run.req.policyDecision?.obligations;
    return (o?.redact_columns.length ?? 0) > 0 || (o?.pii_mode ?? this.deps.defaultPiiMode) !== 'off';
  }

  #planFor(run: StatementRun, body: Buffer): RowPlan | null {
    if (!this.#needsPlan(run)) return null;
    const o = run.req.policyDecision!.obligations;
    const mode = o.pii_mode ?? this.deps.defaultPiiMode;
    const analysis = run.req.columnAnalysis?.statements;
    const named = (run.req.tables?.length ?? 0) > 0;
    // A prepared statement answers the same description on every execution: the last plan is checked by its bytes
    // before a key string is built from them.
    const last = this.#lastPlan;
    if (last && last.mode === mode && last.analysis === analysis && last.named === named && sameColumns(last.redactColumns, o.redact_columns) && last.description.equals(body)) {
      this.#notePlan(run, last.plan);
      return last.plan;
    }
    let plans = this.#plans;
    if (analysis !== undefined) {
      plans = this.#analysisPlans.get(analysis) ?? new Map<string, RowPlan>();
      this.#analysisPlans.set(analysis, plans);
    }
    const key = `${mode}\u0000${named ? 1 : 0}\u0000${o.redact_columns.join('\u0001')}\u0000${body.toString('latin1')}`;
    let plan = plans.get(key);
    if (!plan) {
      plan = this.#compilePlan(run, body, mode, o.redact_columns);
      if (plans.size >= MAX_CACHED_PLANS) plans.clear();
      plans.set(key, plan);
    }
    this.#lastPlan = { mode, redactColumns: o.redact_columns, analysis, named, description: Buffer.from(body), plan };
    this.#notePlan(run, plan);
    return plan;
  }

  /** The audit entry names the resolved columns and what was redacted by provenance. */
  #notePlan(run: StatementRun, plan: RowPlan): void {
    if (run.req.columnAnalysis !== undefined) auditColumns(run.req, plan.byProvenance);
  }

  #compilePlan(run: StatementRun, body: Buffer, mode: PiiMode, redactColumns: readonly string[]): RowPlan {
    const desc = parseRowDescription(body);
    // Redaction by provenance: what feeds each column decides, not its name (pipeline/columns.ts).
    const forceColumns = provenanceRedaction(run.req, parseRowOrigins(body));
    // Each redacted value is written as its column's type allows (governance/pii/by-type.ts).
    const redact = typedRowRedactor(desc.typeOids, this.deps.pii.rowRedactor(desc.names, { mode, redactColumns, forceColumns }), this.#jsonRedactor(mode, redactColumns));
    const byName = this.deps.pii.rowRedactor(desc.names, { mode: 'off', redactColumns });
    // A probe row without personal data shows which columns are replaced whatever their value.
    const probe = desc.names.map(() => '\u0001');
    const replaced = redact(probe).values.map((v, i) => v !== probe[i]);
    const replacedByName = byName(probe).values.map((v, i) => v !== probe[i]);
    let refuseBinary: string | null = null;
    const textColumns = desc.formats.map((f, i) => {
      if (f === 0) return true;
      if (replaced[i]) refuseBinary ??= desc.names[i]!;
      return TEXT_LIKE_OIDS.has(desc.typeOids[i]!);
    });
    const byProvenance = desc.names.filter((_, i) => forceColumns[i] && !replacedByName[i]);
    return { redact, textColumns, refuseBinary, byProvenance };
  }

  // ---- upstream side ----

  #head(): Pending | undefined {
    return this.#pending[0];
  }

  #currentRun(): StatementRun | null {
    const h = this.#head();
    if (h?.kind === 'query') return h.runs[h.index] ?? null;
    if (h?.kind === 'execute') return h.run;
    return null;
  }

  #end(run: StatementRun, fields: Parameters<typeof endRecorded>[2]): void {
    if (run.ended) return;
    run.ended = true;
    this.#afterStructureChange(run);
    this.#track(endRecorded(this.deps.decider, run.req.audit, { redactions: run.redactions, bytes_out: run.bytesOut, ...fields }));
  }

  #onUpstream(type: number, raw: Buffer, body: Buffer): void {
    if (type === Backend.ErrorResponse) this.#path.failed();
    else if (type === Backend.ReadyForQuery) this.#path.ready(body[0]!);
    const head = this.#pending[0];
    if (head?.kind === 'internal' && !ASYNCHRONOUS_TYPES.has(type)) return this.#onInternal(head, type, body);
    if (head?.kind === 'reapply' && !ASYNCHRONOUS_TYPES.has(type)) return this.#onReapply(head, type, body);
    switch (type) {
      case 0:
        if (this.#upstreamFatal) return this.#endAfterOutput();
        return this.#endSession('the upstream connection was lost', '08006');
      case Backend.ParameterStatus:
        // Statements that change client_encoding or standard_conforming_strings are refused (traps encoding_change,
        // string_syntax_change); a function calling set_config itself is caught here, and the session ends before the
        // client can send another statement (only statements it had already pipelined behind the call could run).
        if (!this.upstream.parsesAsGoverned) {
          return this.#endSession('the session left UTF8 or standard_conforming_strings; the gateway reads statements only that way');
        }
        return this.#send(this.#clientParameterStatus(raw, body));
      case Backend.NotificationResponse:
        return this.#send(raw);
      case Backend.NoticeResponse:
        return this.#send(fieldsMessage(Backend.NoticeResponse, this.#clientNoticeFields(body)));
      case Backend.ErrorResponse:
        return this.#onError(body);
      case Backend.ReadyForQuery:
        return this.#onReady(raw);
      case Backend.RowDescription:
        return this.#onRowDescription(raw, body);
      case Backend.NoData: {
        const h = this.#pending.shift();
        if (h?.kind === 'describeS' || (h?.kind === 'describeP' && !h.internal)) this.#send(raw);
        return;
      }
      case Backend.ParameterDescription:
        if (this.#head()?.kind === 'describeS') (this.#head() as { stage: number }).stage = 1;
        return this.#send(raw);
      case Backend.DataRow:
        return this.#onDataRow(raw, body);
      case Backend.CommandComplete:
      case Backend.EmptyQueryResponse:
      case Backend.PortalSuspended:
        return this.#onComplete(raw);
      case FUNCTION_CALL_RESPONSE:
        if (head?.kind === 'fcall') return this.#onFunctionResult(head, body);
        return this.#send(raw);
      case Backend.CopyOutResponse:
      case COPY_DATA:
      case COPY_DONE:
        return this.#onCopyOut(type, raw, body);
      case Backend.ParseComplete:
      case Backend.BindComplete:
      case Backend.CloseComplete:
        if (this.#head()?.kind === 'simple1') this.#pending.shift();
        return this.#send(raw);
      default:
        // COPY responses and data, anything else: relayed in order.
        return this.#send(raw);
    }
  }

  /** The upstream error as the client may see it: sanitized, and without its text when it may quote a redacted value. */
  #clientErrorFields(body: Buffer): Map<string, string> {
    const fields = this.upstream.sanitizeFields(parseErrorFields(body));
    if (this.#cursorMayQuote) return withheldErrorFields(fields);
    const run = this.#currentRun();
    return run?.req.audit && errorMayQuoteRedacted(run.req) ? withheldErrorFields(fields) : fields;
  }

  /** A notice as the client may see it: PostgreSQL quotes input values in some (to_tsquery's "doesn't contain lexemes"). */
  #clientNoticeFields(body: Buffer): Map<string, string> {
    const fields = this.upstream.sanitizeFields(parseErrorFields(body));
    if (this.#cursorMayQuote) return withheldNoticeFields(fields);
    const run = this.#currentRun();
    return run?.req.audit && errorMayQuoteRedacted(run.req) ? withheldNoticeFields(fields) : fields;
  }

  #onError(body: Buffer): void {
    let msg = fieldsMessage(Backend.ErrorResponse, this.#clientErrorFields(body));
    const fields = parseErrorFields(body);
    const sqlstate = fields.get('C') ?? 'XX000';
    const severity = fields.get('V') ?? fields.get('S');
    // A FATAL (57P01 when an administrator terminated the backend, 57P02, 57P03 ...) is PostgreSQL's own last word on
    // the session: it reaches the client as sent, and the gateway adds nothing of its own when the upstream then closes.
    const fatal = severity === 'FATAL' || severity === 'PANIC';
    if (fatal) this.#upstreamFatal = true;
    const h = this.#head();
    if (h?.kind === 'abort' && !fatal) return;
    if (fatal) {
      // Sent as it is, whatever the gateway meant to answer in its place.
    } else if (h?.kind === 'query' && h.localError) {
      // The upstream failed in a refused query's place: the client is told why the gateway refused it.
      msg = h.localError;
      h.localError = null;
    } else if (h?.kind === 'refusal') msg = h.error;
    if (h?.kind === 'query') {
      const run = h.runs[h.index];
      if (run) {
        run.req.audit.addReason(`upstream sqlstate ${sqlstate}`);
        this.#end(run, { status: 400, decision: 'allow', error_code: 'upstream_sql_error' });
      }
      for (const r of h.runs.slice(h.index + 1)) this.#end(r, { status: 409, decision: 'allow', error_code: 'not_executed' });
      h.index = h.runs.length;
      if (h.cut) return;
    } else if (h?.kind === 'fcall') {
      h.run.req.audit.addReason(`upstream sqlstate ${sqlstate}`);
      this.#end(h.run, { status: 400, decision: 'allow', error_code: 'upstream_sql_error' });
    } else {
      // Extended protocol: the upstream skips to Sync; everything before the Sync is answered by this error. The failed
      // message and the skipped ones did not happen upstream: their renames are undone, latest first.
      const undos: (() => void)[] = [];
      while (this.#pending.length > 0 && this.#head()!.kind !== 'sync') {
        const p = this.#pending.shift()!;
        if (p.kind === 'simple1' && p.undo) undos.push(p.undo);
        if (p.kind === 'execute') {
          p.run.req.audit?.addReason(`upstream sqlstate ${sqlstate}`);
          if (p.run.req.audit) this.#end(p.run, { status: 400, decision: 'allow', error_code: 'upstream_sql_error' });
        }
      }
      for (let i = undos.length - 1; i >= 0; i--) undos[i]!();
    }
    this.#send(msg);
  }

  /**
   * DDL through the gateway drops the source's cached structure when it is decided and again when it ends; inside a
   * transaction other connections see it only after COMMIT, so it is dropped at every ReadyForQuery until the session
   * is idle again.
   */
  #afterStructureChange(run: StatementRun): void {
    const req = run.req;
    if (!req.sql || !changesStructure(req)) return;
    this.#structureChanged = true;
    this.deps.decider.pipeline.structures.invalidate(this.deps.decider.sourceId);
  }

  #onReady(raw: Buffer): void {
    if (raw[5] === TxStatus.Idle) this.#cursorMayQuote = false;
    if (this.#structureChanged) {
      this.deps.decider.pipeline.structures.invalidate(this.deps.decider.sourceId);
      if (raw[5] === TxStatus.Idle) this.#structureChanged = false;
    }
    const h = this.#pending.shift();
    if (h?.kind === 'query') for (const r of h.runs) this.#end(r, { status: 409, decision: 'allow', error_code: 'not_executed' });
    if (h?.kind === 'fcall') this.#end(h.run, { status: 502, decision: 'allow', error_code: 'upstream_sql_error' });
    // The next ReadyForQuery after an error the gateway produced itself ends the cycle (query or Sync) it belongs to.
    const gatewayError = this.#gatewayError;
    this.#gatewayError = false;
    if (gatewayError && raw[5] === TxStatus.InBlock) return this.#settleTransaction();
    this.#clientTx = raw[5]!;
    this.#send(raw);
    if (this.#drainError !== null) this.#endIfDrainedIdle();
  }

  /**
   * The gateway answered an error the upstream never saw (row limit, binary redacted column) inside a transaction
   * block the upstream still holds open: the block is aborted upstream before the client is told it is ready, so the
   * client's COMMIT cannot commit it (PostgreSQL would have aborted it on that error). If the client already pipelined
   * more behind it, those ran upstream in a healthy block that must not be committed: the session ends instead, which
   * rolls the block back.
   */
  #settleTransaction(): void {
    if (this.#pending.length > 0 || this.#batch.length > 0) {
      return this.#endSession('the transaction was aborted by a gateway error while further statements were already pipelined; it was rolled back', '25P02');
    }
    this.#pending.push({ kind: 'abort' });
    this.upstream.write(REFUSAL_QUERY);
  }



  #onRowDescription(raw: Buffer, body: Buffer): void {
    const h = this.#head();
    if (h?.kind === 'query') {
      const run = h.runs[h.index];
      if (run) run.plan = this.#planFor(run, body);
      if (!h.cut) this.#send(raw);
      return;
    }
    if (h?.kind === 'describeS') {
      this.#pending.shift();
      return this.#send(raw);
    }
    if (h?.kind === 'describeP') {
      this.#pending.shift();
      // The plan is made from it at the portal's first row, under the decision of the statement that runs it.
      if (h.portal) h.portal.description = Buffer.from(body);
      if (!h.internal) this.#send(raw);
      return;
    }
    this.#send(raw);
  }

  #onDataRow(raw: Buffer, body: Buffer): void {
    if (this.#cutQuery()) return;
    const run = this.#currentRun();
    if (!run || !run.req.audit) return this.#send(raw);
    if (run.portal && run.plan === null) {
      if (run.portal.description) run.plan = this.#planFor(run, run.portal.description);
    }
    run.rows++;
    if (run.rows > this.deps.maxRows) {
      run.limitHit = true;
      return;
    }
    const plan = run.plan;
    if (plan?.refuseBinary) return;
    let out = raw;
    if (plan?.redact) {
      const values = parseDataRow(body);
      const texts: (string | null)[] = new Array(values.length);
      for (let i = 0; i < values.length; i++) {
        const v = values[i]!;
        texts[i] = v === null || !plan.textColumns[i] ? null : v.toString('utf8');
      }
      const r = plan.redact(texts);
      if (r.redactions > 0) {
        run.redactions += r.redactions;
        out = dataRow(values.map((v, i) => (plan.textColumns[i] && r.values[i] !== texts[i] ? utf8OrNull(r.values[i]) : v)));
      }
    }
    run.bytesOut += out.length;
    this.#send(out);
  }

  /** True while the rest of a query's output is withheld because the gateway already answered it with an error. */
  #cutQuery(): boolean {
    const h = this.#head();
    return h?.kind === 'query' && h.cut === true;
  }

  #onComplete(raw: Buffer): void {
    const h = this.#head();
    let run: StatementRun | null = null;
    if (h?.kind === 'query') {
      run = h.runs[h.index] ?? null;
      h.index++;
    } else if (h?.kind === 'execute') {
      this.#pending.shift();
      run = h.run;
    }
    // A gateway error ends the client's view of a simple query, as an error would in PostgreSQL: later statements of the
    // same string still ran upstream (their entries say so), but their output is withheld to keep the protocol in step.
    const cut = h?.kind === 'query' && h.cut === true;
    if (cut && run?.req.audit && !run.ended) run.req.audit.addReason('pgwire: output withheld, an earlier statement of the same query ended with a gateway error');
    if (run?.copy) run.redactions = run.copy.redactions;
    // PostgreSQL completed it: what it did to the session's path holds (whatever the gateway tells the client next).
    if (run?.req.sql) this.#path.completed(effectsOf(run.req), commandTag(raw), pathKey(run.req));
    if (run?.dropsNames) {
      for (const [k, v] of run.dropsNames.statements) if (this.#statements.get(k) === v) this.#statements.delete(k);
      for (const [k, v] of run.dropsNames.portals) if (this.#portals.get(k) === v) this.#portals.delete(k);
    }
    if (run && run.req.audit && !run.ended) {
      if ((run.plan?.refuseBinary || run.limitHit) && h?.kind === 'query') h.cut = true;
      if (run.plan?.refuseBinary || run.limitHit) this.#gatewayError = true;
      if (run.plan?.refuseBinary) {
        run.req.audit.addReason(`redaction: column ${run.plan.refuseBinary} requested in binary format`);
        this.#end(run, { status: 400, decision: 'deny', error_code: 'binary_redacted_column' });
        if (cut) return;
        return this.#send(
          errorResponse({
            sqlstate: '0A000',
            message: `column "${run.plan.refuseBinary}" is redacted by policy and cannot be returned in binary format`,
            hint: 'Request text result format for this column.',
          }),
        );
      }
      if (run.limitHit) {
        run.req.audit.addReason(`result rows above gateway.limits.result_rows (${this.deps.maxRows})`);
        this.#end(run, { status: 413, decision: 'allow', error_code: 'payload_too_large' });
        if (cut) return;
        return this.#send(errorResponse({ sqlstate: '54000', message: `the result exceeds the gateway's row limit (${this.deps.maxRows} rows)` }));
      }
      if (declaresCursorOverRedacted(run.req)) this.#cursorMayQuote = true;
      this.#end(run, { status: 200, decision: 'allow', error_code: null });
    }
    if (!cut) this.#send(raw);
  }
}

function utf8OrNull(value: string | null | undefined): Buffer | null {
  return value === null || value === undefined ? null : Buffer.from(value, 'utf8');
}

function sameColumns(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The statements of a query string as separate texts (byte offsets from the real parser); [] when it holds none. */
export function splitStatements(sql: string, classifier: SqlClassifier): string[] {
  // The classifier's cache answers the common single-statement case without a second parse.
  const c = classifier.classify(sql);
  if (!c.ok) return c.error.code === 'sql_empty' ? [] : [sql];
  if (!c.multiStatement) return [sql];
  const parsed = guardedParse(sql);
  // Unparseable text is handed to the decision as a whole, which refuses it (42601).
  if (!parsed.ok) return [sql];
  const stmts = (parsed.tree as { stmts?: Array<{ stmt_location?: number; stmt_len?: number }> }).stmts ?? [];
  if (stmts.length <= 1) return stmts.length === 0 ? [] : [sql];
  const bytes = Buffer.from(sql, 'utf8');
  return stmts.map((s) => {
    const start = s.stmt_location ?? 0;
    const end = s.stmt_len ? start + s.stmt_len : bytes.length;
    return bytes.toString('utf8', start, end).trim();
  });
}

const NO_EFFECTS: readonly PathEffect[] = Object.freeze([]);

/** What a decided statement does to the session's search_path, transaction and SQL prepared statements. */
function effectsOf(req: GovernedRequest): readonly PathEffect[] {
  const statements = req.sql?.statements;
  if (statements === undefined) return NO_EFFECTS;
  let out: PathEffect[] | null = null;
  // Most statements (every plain read or write) have none: asked three times per statement, they allocate nothing.
  for (const st of statements) if (st.pathEffects !== undefined && st.pathEffects.length > 0) (out ??= []).push(...st.pathEffects);
  return out ?? NO_EFFECTS;
}

/** The key of the search_path a statement was governed under ('' for the default). */
function pathKey(req: GovernedRequest): string {
  return req.action.kind === 'sql' ? (req.action.searchPath?.key ?? '') : '';
}

function unionPaths(a: readonly SearchPath[], b: readonly SearchPath[]): readonly SearchPath[] {
  // The common case: one path at Bind and still the same one at Execute.
  if (a.length === 1 && b.length === 1 && a[0] === b[0]) return a;
  const out = [...a];
  for (const p of b) if (!out.some((q) => q.length === p.length && q.every((s, i) => s === p[i]))) out.push(p);
  return out;
}

/** A CommandComplete's tag (`ROLLBACK` for a COMMIT of a failed block); '' for EmptyQueryResponse and PortalSuspended. */
function commandTag(raw: Buffer): string {
  if (raw[0] !== Backend.CommandComplete) return '';
  const end = raw.indexOf(0, 5);
  return raw.toString('utf8', 5, end < 0 ? raw.length : end);
}

/** A DECLARE whose query reads redacted columns: its rows are computed later, at FETCH or, held, at COMMIT. */
function declaresCursorOverRedacted(req: GovernedRequest): boolean {
  return (req.sql?.statements.some((s) => s.kind === 'declare_cursor') ?? false) && errorMayQuoteRedacted(req);
}
