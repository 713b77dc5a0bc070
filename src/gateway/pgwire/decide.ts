// Governance of one wire statement: the shared decision stages, the audit entry it owns, and the ErrorResponse a refusal becomes.
import type { LRUCache } from 'lru-cache';
import { ttlCache } from '../../util/ttl-cache.js';
import { applyPolicy, auditFieldsOf, decisionStages, preparationStages } from '../../pipeline/decide.js';
import { asGatehouseError, auditFailure, runStages } from '../../pipeline/run.js';
import type { GovernedRequest, PipelineDeps, RoleContext, Stage, StageOutcome } from '../../pipeline/context.js';
import type { CompiledPolicySet } from '../../governance/policy/index.js';
import type { RegisteredSource } from '../../registry/sources.js';
import type { AuditContext, Auditor } from '../../audit/context.js';
import { AUDIT_ACCEPTED } from '../../audit/port.js';
import type { AgentIdentity, KeyRevocation, KeyRevocationFeed } from '../../identity/index.js';
import { toAgentIdentity } from '../../identity/index.js';
import { getIdentityById } from '../../store/repos/identities.js';
import type { Db } from '../../store/repos/util.js';
import { UpstreamSqlError } from '../../connectors/postgres-exec.js';
import type { ErrorFields } from './protocol.js';
import type { CallTrust } from '../../governance/sql/source-calls.js';
import type { PathResolution } from '../../governance/sql/search-path.js';

/**
 * The SQLSTATE of "approval required": an implementation-defined class (classes starting with 5–9 or I–Z are
 * reserved for implementations); "W" for wait, "A" for approval. docs/pgwire.md and docs/errors.md document it.
 */
export const APPROVAL_REQUIRED_SQLSTATE = 'WA001';

/** Every decision stage, for an execution. */
export const WIRE_EXECUTE_STAGES: readonly Stage[] = decisionStages;
/** The stages up to policy, for a Parse: parameters are not known yet, so rate limits and approvals wait for Execute. */
export const WIRE_PARSE_STAGES: readonly Stage[] = preparationStages;

/** A refusal's audit entry is ended by the decision; `recorded` settles when it is durable (true) or could not be recorded (false). */
export type StatementDecision =
  | { kind: 'allow'; req: GovernedRequest }
  | { kind: 'queued'; req: GovernedRequest; error: ErrorFields; recorded: Promise<boolean> }
  | { kind: 'refused'; req: GovernedRequest; error: ErrorFields; recorded: Promise<boolean> };

export interface WireDecider {
  readonly pipeline: PipelineDeps;
  readonly auditor: Auditor;
  /** The next statement's request id: the session's id and the statement's number in it (`<session>:<n>`). */
  nextRequestId(): string;
  readonly clientIp: string | null;
  readonly sourceId: string;
}

/** The one place a wire failure becomes ErrorResponse fields: the registry's SQLSTATE and safe message, or an upstream error's own (already sanitized). */
export function errorFieldsOf(err: unknown): ErrorFields {
  if (err instanceof UpstreamSqlError) return { sqlstate: err.sqlstate, message: err.message };
  const e = asGatehouseError(err);
  const sqlstate = typeof e.details?.sqlstate === 'string' ? e.details.sqlstate : e.spec.sqlstate;
  return { sqlstate, message: e.message, ...(e.retryAfterSeconds !== undefined ? { hint: `Retry after ${e.retryAfterSeconds} s.` } : {}) };
}


/** The stage names the memo knows every input of; any other list (a stage added or moved) is always run in full. */
const MEMO_STAGE_NAMES = 'validate_input,session_escape,authenticate,resolve_source,source_role,catalog,columns,policy,rate_limit,write_estimate,approval';
const MEMO_ENABLED = decisionStages.map((s) => s.name).join(',') === MEMO_STAGE_NAMES;
const MAX_MEMO_ENTRIES = 64;
/** What the front door sets on a request before the stages run; everything else on it is what the stages decided. */
const FRONT_DOOR_FIELDS: ReadonlySet<string> = new Set(['channel', 'requestId', 'clientIp', 'sourceId', 'credential', 'action', 'audit', 'preApproved']);

/** An allowed statement's decision and every input it was made from (pipeline/decide.ts), compared by identity on reuse. */
interface Remembered {
  identity: AgentIdentity;
  source: RegisteredSource;
  roleContext: RoleContext;
  /** The source's call trust the stages used (null when they asked none): a catalog read since then decides anew. */
  callTrust: CallTrust | null;
  policies: CompiledPolicySet;
  /** The decision holds from when its stages started until the first grant expiry after they ended. */
  from: number;
  until: number;
  /** The request fields the stages set (classification, source, role and policy decisions, risk). */
  fields: Partial<GovernedRequest>;
  /** What runStages recorded in the audit entry when the stages ended (auditFieldsOf), frozen: every reuse shares it. */
  auditFields: Readonly<Record<string, unknown>>;
}

/**
 * Decisions of a session's statements, reused by the extended protocol's Parse and Execute while nothing they were made
 * from changed: the same statement text, identity state (the refresher's object, replaced by a revocation or after at
 * most a second, as for every statement), registry source record, role context (the grant-version cache's answer, asked
 * again each time), compiled policy set, and no grant expiring in between. Only an allow that consumed nothing is
 * reused: a policy with a rate limit, a statement needing approval or a write measured by its effect runs every stage every time. Sessions decide one
 * statement at a time, so the role context the stages used is the last one asked for.
 */
export class DecisionMemo {
  readonly #entries = new Map<string, Remembered>();
  readonly #pipeline: PipelineDeps;
  readonly deps: PipelineDeps;
  #roleContext: RoleContext | null = null;
  #callTrust: CallTrust | null = null;
  /** Statements decided from the memo (tests read it to see the memo works). */
  reused = 0;

  constructor(pipeline: PipelineDeps) {
    this.#pipeline = pipeline;
    this.deps = {
      ...pipeline,
      roleContext: async (identity, sourceId) => (this.#roleContext = await pipeline.roleContext(identity, sourceId)),
      ...(pipeline.callTrust ? { callTrust: async (source: RegisteredSource) => (this.#callTrust = await pipeline.callTrust!(source)) } : {}),
    };
  }

  /**
   * Sets the remembered decision's fields on `req` when every input is unchanged; false when the stages must run. The
   * answer comes at once when every input is held in memory (the role context and call trust cached), as a promise only
   * when one of them must be read (docs/decisions/0029, "Decided without waiting").
   */
  reuse(req: GovernedRequest, identity: AgentIdentity, sql: string): boolean | Promise<boolean> {
    const m = this.#entries.get(sql);
    if (!m || m.identity !== identity) return false;
    const now = Date.now();
    if (now < m.from || now >= m.until) return false;
    const p = this.#pipeline;
    let role: RoleContext | Promise<RoleContext>;
    try {
      if (p.lookupSource(req.sourceId) !== m.source || p.policies() !== m.policies) return false;
      // A decision made against a source structure holds only while that structure is the current one (DDL, TTL).
      const analysis = m.fields.columnAnalysis;
      if (analysis !== undefined && p.structures.current(m.source) !== analysis.structure.base) return false;
      // Classifications and drift protection the decision used must still be the catalog's current ones (docs/catalog.md).
      if (m.fields.catalog !== undefined && p.catalog?.current(req.sourceId) !== m.fields.catalog) return false;
      role = p.roleContext(identity, req.sourceId);
    } catch {
      // The stages meet the same failure and refuse the statement with it.
      return false;
    }
    if (role instanceof Promise) return role.then((r) => this.#reuseWith(req, m, r), () => false);
    return this.#reuseWith(req, m, role);
  }

  /** reuse, once the role context is known: the call trust, then the fields. */
  #reuseWith(req: GovernedRequest, m: Remembered, role: RoleContext): boolean | Promise<boolean> {
    if (role !== m.roleContext) return false;
    if (m.callTrust !== null) {
      let trust: CallTrust | Promise<CallTrust> | undefined;
      try {
        trust = this.#pipeline.callTrust?.(m.source);
      } catch {
        return false;
      }
      if (trust instanceof Promise) return trust.then((t) => t === m.callTrust && this.#apply(req, m), () => false);
      if (trust !== m.callTrust) return false;
    }
    return this.#apply(req, m);
  }

  #apply(req: GovernedRequest, m: Remembered): true {
    Object.assign(req, m.fields);
    // What runStages recorded when the stages ended: the same inputs give the same fields.
    req.audit.set(m.auditFields);
    this.reused++;
    return true;
  }

  /** Call right before the stages run; `remember` then keeps their decision if it can be reused. */
  begin(): number {
    this.#roleContext = null;
    this.#callTrust = null;
    return Date.now();
  }

  remember(req: GovernedRequest, identity: AgentIdentity, sql: string, from: number): void {
    const roleContext = this.#roleContext;
    const source = req.source;
    const policy = req.policyDecision;
    if (!roleContext || !source || !policy || policy.obligations.rate_limits.length > 0) return;
    // A write allowed on its measured effect is measured again every time: the table may have grown, the parameters differ.
    if (req.writeEffect !== undefined) return;
    // Reasons are only added on the way to a refusal today; one on an allow would be lost by reuse.
    if (req.audit.snapshot().reasons.length > 0) return;
    let policies: CompiledPolicySet;
    try {
      policies = this.#pipeline.policies();
    } catch {
      return;
    }
    const ended = Date.now();
    let until = Infinity;
    for (const g of roleContext.grants) {
      const expiry = g.expires_at?.getTime();
      if (expiry === undefined || expiry <= from) continue;
      // A grant that expired while the stages ran may have been seen either way: such a decision is not kept.
      if (expiry <= ended) return;
      until = Math.min(until, expiry);
    }
    const fields: Partial<GovernedRequest> = {};
    for (const [k, v] of Object.entries(req)) if (!FRONT_DOOR_FIELDS.has(k)) (fields as Record<string, unknown>)[k] = v;
    if (this.#entries.size >= MAX_MEMO_ENTRIES) this.#entries.clear();
    const auditFields = auditFieldsOf(req);
    for (const v of Object.values(auditFields)) if (Array.isArray(v)) Object.freeze(v);
    this.#entries.set(sql, { identity, source, roleContext, callTrust: this.#callTrust, policies, from, until, fields, auditFields: Object.freeze(auditFields) });
  }
}

/**
 * Runs one statement through the stages. Allowed: the caller executes it and ends the audit entry with what
 * the upstream answered. Refused or queued: the entry is ended here, and the caller answers the error.
 * With a memo (extended protocol), an unchanged decision is reused instead of running the stages again.
 */
export function decideStatement(
  d: WireDecider,
  identity: AgentIdentity,
  sql: string,
  params: readonly unknown[],
  stages: readonly Stage[],
  memo: DecisionMemo | null = null,
  searchPath: PathResolution | null = null,
): StatementDecision | Promise<StatementDecision> {
  const audit = d.auditor.begin({ channel: 'pgwire', request_id: d.nextRequestId(), client_ip: d.clientIp, source_id: d.sourceId, bytes_in: Buffer.byteLength(sql) });
  const req: GovernedRequest = {
    channel: 'pgwire',
    requestId: audit.request_id,
    clientIp: d.clientIp,
    sourceId: d.sourceId,
    credential: { kind: 'authenticated', identity },
    action: { kind: 'sql', sql, params, reappliesSessionState: true, tracksSearchPath: true, searchPath },
    audit,
  };
  const memoize = memo !== null && MEMO_ENABLED;
  // A decision holds for the search_path it was made under: the same text names other tables under another path.
  const key = searchPath === null ? sql : `${searchPath.key}\u0000${sql}`;
  if (!memoize) return runStatementStages(d, req, identity, stages, null, key);
  // A decision reused from the memo is answered at once when every input is in memory: no promise for the statement.
  const reused = memo.reuse(req, identity, key);
  if (reused === true) return { kind: 'allow', req };
  if (reused === false) return runStatementStages(d, req, identity, stages, memo, key);
  return reused.then((ok) => (ok ? { kind: 'allow', req } : runStatementStages(d, req, identity, stages, memo, key)));
}

/** decideStatement's stages, run in full (no memo, or none of its decisions holds): the decision is remembered when it may be reused. */
async function runStatementStages(
  d: WireDecider, req: GovernedRequest, identity: AgentIdentity, stages: readonly Stage[], memo: DecisionMemo | null, key: string,
): Promise<StatementDecision> {
  const { audit } = req;
  const memoize = memo !== null;
  const from = memoize ? memo.begin() : 0;
  let outcome: StageOutcome | undefined;
  try {
    outcome = await runStages(stages, req, memoize ? memo.deps : d.pipeline);
  } catch (err) {
    if (asGatehouseError(err).code === 'internal') d.pipeline.log.error({ err }, 'wire statement decision failed');
    return { kind: 'refused', req, error: errorFieldsOf(err), recorded: endRecorded(d, audit, auditFailure(err)) };
  }
  if (outcome?.kind === 'queued') {
    const a = outcome.approval;
    const recorded = endRecorded(d, audit, { status: 202, decision: 'require_approval', approval_id: a.id });
    return {
      kind: 'queued',
      req,
      recorded,
      error: {
        sqlstate: APPROVAL_REQUIRED_SQLSTATE,
        message: 'approval required',
        detail: `approval_id=${a.id}`,
        hint: `The statement was not executed; it waits for approval (state ${a.state}, expires ${a.expires_at}). An approved statement is executed by the gateway once.`,
      },
    };
  }
  if (memoize && stages === WIRE_EXECUTE_STAGES) memo.remember(req, identity, key, from);
  return { kind: 'allow', req };
}

/**
 * What endRecorded answers for an entry the audit port accepted at once (buffered durability, room in the buffer):
 * recorded, with nothing to wait for. The relay holds no output on it.
 */
export const RECORDED_AT_ONCE: Promise<boolean> = Promise.resolve(true);

/**
 * Ends an entry; resolves true once it satisfies the audit durability mode (strict: committed or fsynced), false when
 * it could not be recorded (logged here). Never rejects: the relay holds the statement's answer on it (strict mode).
 */
export function endRecorded(d: Pick<WireDecider, 'pipeline'>, audit: AuditContext, fields: Parameters<AuditContext['end']>[0]): Promise<boolean> {
  const written = audit.end(fields);
  if (written === AUDIT_ACCEPTED) return RECORDED_AT_ONCE;
  return written.then(
    () => true,
    (err: unknown) => {
      d.pipeline.log.error({ err: { code: (err as { code?: string }).code } }, 'wire audit entry could not be recorded');
      return false;
    },
  );
}

export interface IdentityState {
  identity: AgentIdentity;
  verifier: string | null;
  /** The key digest revocations name the identity by (null for an identity without a peppered key). */
  digest: string | null;
}

/** How long an identity state is reused at most (an identity without a key digest is never named by a revocation). */
export const IDENTITY_REFRESH_MS = 1_000;

/**
 * The identity as it stands now, shared by the process's sessions. A revocation (identity updated, disabled, deleted,
 * key rotated, grants or a granted role changed) drops the identity's state at once, locally or through the key
 * revocation broadcast, so the next statement is decided against the database again: a disabled identity or a rotated
 * key ends its sessions, new grants apply. While the subscription is down the state is not reused at all, the same
 * rule the key-session memo follows for HTTP and MCP.
 */
export class IdentityRefresher {
  readonly #cache: LRUCache<number, IdentityState>;
  readonly #revocations: KeyRevocationFeed | null;
  readonly #stopListening: () => void;

  constructor(private readonly db: Db, revocations: KeyRevocationFeed | null, ttlMs = IDENTITY_REFRESH_MS) {
    this.#cache = ttlCache({ max: 10_000, ttl: ttlMs });
    this.#revocations = revocations;
    this.#stopListening = revocations?.onRevoked((revoked) => this.#revoke(revoked)) ?? (() => undefined);
  }

  /**
   * The identity's state when it is held and may be reused now, without waiting (undefined: current() reads it). While
   * revocations cannot reach this process, the identity is read for every statement, as the key-session memo is
   * bypassed for every HTTP and MCP request then.
   */
  cached(id: number): IdentityState | undefined {
    return this.#revocations?.live === false ? undefined : this.#cache.get(id);
  }

  async current(id: number): Promise<IdentityState | null> {
    const hit = this.cached(id);
    if (hit) return hit;
    // A read a revocation overtook answers its statement but is not kept.
    const seen = this.#revocations?.revision;
    const row = await getIdentityById(this.db, id);
    if (!row) return null;
    const state = { identity: toAgentIdentity(row), verifier: row.scram_verifier, digest: row.api_key_digest };
    if (seen === this.#revocations?.revision) this.#cache.set(id, state);
    return state;
  }

  /** Revocations are rare (operator changes): a scan of the cached states costs less than an index kept per read. */
  #revoke(revoked: KeyRevocation): void {
    if (revoked === 'all') return this.#cache.clear();
    const digests = new Set(revoked);
    const stale: number[] = [];
    for (const [id, state] of this.#cache.entries()) if (state.digest !== null && digests.has(state.digest)) stale.push(id);
    for (const id of stale) this.#cache.delete(id);
  }

  close(): void {
    this.#stopListening();
    this.#cache.clear();
  }
}

/** Audit sink for the probes of recheckColumns: only the full recheck's reasons belong in the entry. */
const SILENT_AUDIT = { addReason: () => undefined } as unknown as AuditContext;

/**
 * The policy stage again, over the columns a statement really moves when its text names them only as a whole
 * (`COPY t` moves every column of t): a policy on any of them denies it as it would deny a SELECT of that column, and
 * the obligations (redacted columns) become those of the full list. Returns the first denied column (its reasons are
 * in the entry), or null with `req.policyDecision` and `req.columns` updated.
 */
export function recheckColumns(d: Pick<WireDecider, 'pipeline'>, req: GovernedRequest, columns: readonly string[]): string | null {
  // Test-only (docs/least-privilege.md "Tests"): the gateway's column analysis is off, the database alone decides.
  if (d.pipeline.config.gateway.test_hooks.skip_sql_analysis) return null;
  const probe: GovernedRequest = { ...req, columns };
  try {
    void applyPolicy.run(probe, d.pipeline);
  } catch {
    for (const c of columns) {
      try {
        void applyPolicy.run({ ...req, columns: [c], audit: SILENT_AUDIT }, d.pipeline);
      } catch {
        return c;
      }
    }
    // Denied by the set but by no column alone: reported under the first (no rule works that way today).
    return columns[0] ?? '*';
  }
  req.columns = columns;
  req.policyDecision = probe.policyDecision!;
  return null;
}
