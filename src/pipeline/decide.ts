// The decision stages shared by every front door (spec §4 steps 1–5): input, identity, source, source role, policy, rate limit, risk and approval.
import { jwtRefusalReason } from '../identity/agent-jwt.js';
import { GatehouseError } from '../errors/registry.js';
import { sourceRoleDecision, type SourceRoleDecision, type SourceRoleRequest } from '../governance/source-roles.js';
import { DecisionMemo } from './memo.js';
import { evaluate, type CompiledPolicySet, type Decision, type Operation } from '../governance/policy/index.js';
import { compileColumnGlobs } from '../governance/policy/glob.js';
import { liveCatalogFacts, operationClassifications } from '../catalog/governance.js';
import { approvalVerdict, assessRisk, grownSinceApproval, needsWriteEstimate } from '../governance/risk.js';
import { checkProxyPath, placeUnderBase } from '../governance/http-path.js';
import type { GovernedRequest, PipelineDeps, RoleContext, Stage } from './context.js';
import { isWriteOperation } from './context.js';
import { refuseUncallable, untrustedCalls } from './calls.js';
import { AUDIT_ARRAY_MAX, boundedAuditText } from '../audit/entry.js';
import { deniedColumns, refuseRedactedCopies, resolveColumns } from './columns.js';
import { durationMs } from '../governance/sql/functions.js';
import { postgresConfigOf } from '../connectors/postgres.js';

const HTTP_METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
const EFFECT_RANK: Readonly<Record<Decision['effect'], number>> = { allow: 0, require_approval: 1, deny: 2 };

/** Step 1: encoding, path and SQL are validated before anything is looked up. */
export const validateInput: Stage = {
  name: 'validate_input',
  run(req, deps) {
    const a = req.action;
    if (a.kind === 'http') {
      if (!HTTP_METHODS.has(a.method)) throw new GatehouseError('invalid_request', `Method ${a.method} is not offered by the proxy.`);
      const checked = checkProxyPath({ rawUrl: a.rawTarget, sourceId: req.sourceId });
      if (!checked.ok) throw new GatehouseError('invalid_path', `The request path is not allowed (${checked.reason}).`);
      req.httpPath = checked;
      req.operation = a.method === 'GET' ? 'read' : 'write';
      return;
    }
    const classified = deps.sql.classify(a.sql, a.searchPath ?? null);
    if (!classified.ok) {
      // Unparseable SQL is denied, never guessed (docs/governance/sql.md).
      req.audit.addReason(classified.error.code);
      throw new GatehouseError(classified.error.code === 'sql_too_long' ? 'payload_too_large' : 'sql_parse_error', classified.error.message);
    }
    req.sql = classified;
    req.operation = classified.operation;
    if (deps.config.gateway.test_hooks.skip_sql_analysis) {
      // Test-only (refused outside environment test): no tables, columns or calls for the later stages to judge, so
      // only the database's own privileges refuse (docs/least-privilege.md "Tests").
      req.tables = [];
      req.columns = [];
      return;
    }
    req.tables = classified.tables;
    req.columns = classified.columns;
  },
};

/** Traps refused outright on every SQL front door, whatever the grants: they would change what later statements mean or who runs them. */
const SESSION_ESCAPE_TRAPS: ReadonlyMap<string, string> = new Map([
  ['role_change', 'Changing the session role or authorization is not allowed through the gateway.'],
  ['search_path_change', 'This change of search_path is not allowed through the gateway: its value, or whether it runs, cannot be known before it runs (use SET search_path or SELECT set_config(\'search_path\', \'<constant>\', <constant>) on its own).'],
  // The gateway governs statements as UTF8 text; PostgreSQL must read the same bytes the same way.
  ['session_default_change', 'Changing the default settings of a role or database (ALTER ROLE/DATABASE … SET search_path, role, encoding or a guarded setting) is not allowed through the gateway: later sessions would start outside its governance.'],
  ['encoding_change', 'Changing client_encoding is not allowed through the gateway: it speaks UTF8 only.'],
  ['string_syntax_change', 'Turning standard_conforming_strings off is not allowed through the gateway.'],
]);

const SEARCH_PATH_UNTRACKED = 'Changing search_path is only allowed on a wire session, which governs its later statements under the new path.';

/** Step 1b (SQL): statements that could escape governance for the rest of the session (docs/pgwire.md, "Session escapes"). */
export const refuseSessionEscapes: Stage = {
  name: 'session_escape',
  run(req) {
    const tracksPath = req.action.kind === 'sql' && req.action.tracksSearchPath === true;
    const trap = req.sql?.traps.find((t) => SESSION_ESCAPE_TRAPS.has(t) || (t === 'search_path_set' && !tracksPath));
    if (trap === undefined) {
      if (!req.sql?.traps.includes('session_reset') || (req.action.kind === 'sql' && req.action.reappliesSessionState === true)) return;
      req.audit.addReason('session_reset refused');
      throw new GatehouseError('forbidden', 'Session resets (DISCARD ALL, RESET ALL, RESET ROLE …) are only allowed on a wire session, which restores the governed session state after them.');
    }
    req.audit.addReason(`${trap} refused`);
    throw new GatehouseError('forbidden', SESSION_ESCAPE_TRAPS.get(trap) ?? SEARCH_PATH_UNTRACKED);
  },
};

/** Step 2a: who is asking. Missing or invalid credentials are 401 before anything about the source is revealed. */
export const authenticateIdentity: Stage = {
  name: 'authenticate',
  run(req, deps) {
    if (req.credential.kind === 'authenticated') {
      req.identity = req.credential.identity;
      return;
    }
    return deps.authenticate(req.credential.authorization).then(
      (identity) => {
        req.identity = identity;
      },
      (err: unknown) => {
        const reason = jwtRefusalReason(err);
        if (reason !== null) req.audit.addReason(reason);
        throw err;
      },
    );
  },
};

/** Step 2b: the source must be registered, enabled and of a type that speaks the request's protocol. */
export const resolveSource: Stage = {
  name: 'resolve_source',
  run(req, deps) {
    const source = deps.lookupSource(req.sourceId);
    // A disabled source answers like an unknown one, so agents cannot probe what exists.
    if (!source || !source.enabled) throw new GatehouseError('unknown_source');
    const wantsHttp = req.action.kind === 'http';
    if (wantsHttp !== (source.source_type === 'http')) {
      throw new GatehouseError('invalid_request', wantsHttp ? 'The source does not accept HTTP requests.' : 'The source does not accept SQL.');
    }
    req.source = source;
    if (req.sql && req.sql.statementTimeouts.length > 0) boundStatementTimeout(req, source);
    if (req.action.kind === 'http') {
      const baseUrl = source.connection_config.base_url;
      if (typeof baseUrl !== 'string') throw new GatehouseError('invalid_request', 'The source has no valid base URL configured.');
      // Step 1 already checked the path; only the source's containment boundary is left to apply.
      const target = placeUnderBase(req.httpPath!, baseUrl);
      if (!target.ok) throw new GatehouseError('invalid_path', `The request path is not allowed (${target.reason}).`);
      req.httpTarget = { url: target.url, path: target.path, query: target.query, deeperPaths: target.deeperPaths };
    }
  },
};

/**
 * A statement may lower the source's statement_timeout, never raise it above the source's statement_timeout_ms or
 * turn it off (0): `SET [LOCAL] statement_timeout` and `set_config('statement_timeout', …)` above the bound, or with a
 * value that is not a constant, are refused (docs/pgwire.md "Statement timeout"). RESET and DEFAULT return to the bound.
 */
function boundStatementTimeout(req: GovernedRequest, source: NonNullable<GovernedRequest['source']>): void {
  const bound = postgresConfigOf(source)?.statement_timeout_ms ?? 0;
  for (const value of req.sql!.statementTimeouts) {
    const ms = value === null ? null : durationMs(value);
    if (ms !== null && ms > 0 && ms <= bound) continue;
    req.audit.addReason('statement_timeout above the source bound refused');
    throw new GatehouseError('forbidden', `statement_timeout can be at most the source's bound of ${bound} ms (a constant, 0 = none is not allowed); RESET statement_timeout returns to it.`);
  }
}

/** An HTTP request's source-role verdict: the decision on its path, why a deeper reading of the path is refused (if one is), and until when it holds. */
interface HttpRoleVerdict {
  readonly decision: SourceRoleDecision;
  readonly deeperRefusal: string | null;
  /** The next grant expiry (ms): the only thing that changes the verdict of an unchanged role context. */
  readonly until: number;
}

/**
 * HTTP role verdicts by role context (replaced on every grant or role change: it is cached by grant version), method and
 * path. The decision is a pure function of those and the clock, which only matters at a grant's expiry.
 */
const httpRoleVerdicts = new DecisionMemo<HttpRoleVerdict>();

function httpRoleVerdict(ctx: RoleContext, identityId: number, sourceId: string, method: string, target: NonNullable<GovernedRequest['httpTarget']>): HttpRoleVerdict {
  const now = Date.now();
  const key = target.deeperPaths.length === 0 ? `${method} ${target.path}` : `${method} ${target.path}\u0000${target.deeperPaths.join('\u0000')}`;
  const known = httpRoleVerdicts.get(ctx, key);
  if (known !== undefined && now < known.until) return known;
  const input = { source_id: sourceId, identity_id: identityId, grants: ctx.grants, roles: ctx.roles, now: new Date(now) };
  const decision = sourceRoleDecision(input, { kind: 'http', method, path: target.path });
  let deeperRefusal: string | null = null;
  // A nested escape names another path to an upstream that decodes twice: a role must allow that reading too.
  if (decision.allowed) {
    for (const path of target.deeperPaths) {
      const deeper = sourceRoleDecision(input, { kind: 'http', method, path });
      if (deeper.allowed) continue;
      deeperRefusal = deeper.reason;
      break;
    }
  }
  let until = Number.POSITIVE_INFINITY;
  for (const g of ctx.grants) if (g.expires_at !== null && g.expires_at.getTime() > now) until = Math.min(until, g.expires_at.getTime());
  const verdict = { decision, deeperRefusal, until };
  httpRoleVerdicts.set(ctx, key, verdict);
  return verdict;
}

function refuseByRole(req: GovernedRequest, decision: SourceRoleDecision): never {
  req.audit.addReason(`source_role: ${decision.reason}`);
  const call = decision.refusedCall;
  throw new GatehouseError('forbidden', call === undefined ? 'No source role allows this request.' : `Calling ${call} is not allowed: it is not a trusted built-in and no source role names it.`);
}

/** Step 3: a source-role allow is required first; policy can never create access (spec rule 1). */
export const checkSourceRole: Stage = {
  name: 'source_role',
  async run(req, deps) {
    const identity = req.identity!;
    const ctx = await deps.roleContext(identity, req.sourceId);
    if (req.action.kind === 'http') {
      const verdict = httpRoleVerdict(ctx, identity.id, req.sourceId, req.action.method, req.httpTarget!);
      req.roleDecision = verdict.decision;
      if (!verdict.decision.allowed) refuseByRole(req, verdict.decision);
      if (verdict.deeperRefusal !== null) {
        req.audit.addReason(`source_role: ${verdict.deeperRefusal} (path decoded again)`);
        throw new GatehouseError('forbidden', 'No source role allows this request.');
      }
      return;
    }
    const analysis = req.sql !== undefined && !deps.config.gateway.test_hooks.skip_sql_analysis;
    if (analysis) refuseUncallable(req, req.sql!);
    const calls = analysis ? await untrustedCalls(req, req.sql!, deps) : [];
    const request: SourceRoleRequest = { kind: 'sql', operation: req.operation!, tables: req.tables ?? [], calls };
    const input = { source_id: req.sourceId, identity_id: identity.id, grants: ctx.grants, roles: ctx.roles, now: new Date() };
    const decision = sourceRoleDecision(input, request);
    req.roleDecision = decision;
    if (!decision.allowed) refuseByRole(req, decision);
    if (req.operation === 'ddl' || req.operation === 'admin') deps.callCatalogChanged?.(req.sourceId);
  },
};

/**
 * Step 3a: the source catalog's classifications and drift protection (docs/catalog.md), cached per source. A catalog
 * that cannot be read refuses the request: the columns it protects are unknown (fail closed).
 */
export const loadCatalog: Stage = {
  name: 'catalog',
  run(req, deps) {
    const port = deps.catalog;
    if (port === undefined) return;
    const cached = port.current(req.sourceId);
    if (cached !== null) {
      req.catalog = cached;
      return;
    }
    return port.get(req.sourceId).then(
      (c) => {
        req.catalog = c;
      },
      () => {
        req.audit.addReason('catalog: classifications unavailable');
        throw new GatehouseError('unavailable', 'The source catalog cannot be read now; the request is refused.');
      },
    );
  },
};

type LiveFacts = { unseen: string[]; tags: Map<string, string[]> } | null;

/** The catalog compared by identity with the live structure the statement was analysed against (catalog/governance.ts). */
function liveFacts(req: GovernedRequest): LiveFacts {
  const c = req.catalog;
  const a = req.columnAnalysis;
  if (c?.identity === undefined || a === undefined || req.action.kind !== 'sql') return null;
  return liveCatalogFacts(c.identity, a.structure, req.tables ?? [], c.driftProtection ?? true);
}

/** The catalog facts policy reads for this request: the tags of what it touches, and the redaction names per tag. */
function classificationInput(req: GovernedRequest, live: LiveFacts): { classification_tags: string[]; classified?: ReadonlyMap<string, readonly string[]> } {
  const c = req.catalog;
  if (c === undefined) return { classification_tags: [] };
  const tags = new Set<string>();
  if (req.action.kind === 'sql') {
    if (c.columnTags.size > 0) for (const col of req.columns ?? []) for (const t of c.columnTags.get(col) ?? []) tags.add(t);
    if (live === null || live.tags.size === 0) return { classification_tags: [...tags], classified: c.byTag };
    // Columns classified by identity under their live names (renamed since the scan).
    const byTag = new Map<string, readonly string[]>(c.byTag);
    const read = new Set(req.columns ?? []);
    for (const [col, list] of live.tags) {
      for (const t of list) {
        if (read.has(col)) tags.add(t);
        byTag.set(t, [...(byTag.get(t) ?? []), col]);
      }
    }
    return { classification_tags: [...tags], classified: byTag };
  }
  if (c.operations.length === 0) return { classification_tags: [] };
  const http = operationClassifications(c, req.action.method, [req.httpTarget?.path ?? '', ...(req.httpTarget?.deeperPaths ?? [])]);
  return { classification_tags: http.tags, classified: http.byTag };
}

/** One matcher per catalog view's protected list (the list lives as long as the cached view). */
const protectedMatchers = new WeakMap<readonly string[], (name: string) => boolean>();

/** Drift protection: columns added since the last acknowledgement, or not yet scanned, stay redacted whatever the policies say (docs/catalog.md). */
function withDriftProtection(req: GovernedRequest, decision: Decision, live: LiveFacts): Decision {
  const known = req.catalog?.protectedColumns ?? [];
  const unseen = live?.unseen ?? [];
  if ((known.length === 0 && unseen.length === 0) || req.action.kind !== 'sql') return decision;
  const protectedColumns = unseen.length === 0 ? known : [...known, ...unseen];
  let m = protectedMatchers.get(protectedColumns);
  if (m === undefined) {
    m = compileColumnGlobs(protectedColumns);
    if (unseen.length === 0) protectedMatchers.set(protectedColumns, m);
  }
  const hit = (req.columns ?? []).filter((c) => m(c));
  if (hit.length > 0) req.audit.addReason(`drift protection: ${hit.slice(0, 10).join(', ')} redacted until acknowledged`);
  if (unseen.length > 0) req.audit.addReason(`drift protection: not in the served catalog snapshot yet: ${unseen.slice(0, 10).join(', ')}`);
  const redact = [...new Set([...decision.obligations.redact_columns, ...protectedColumns])].sort();
  return { ...decision, obligations: { ...decision.obligations, redact_columns: redact } };
}

/** The policy decision of a request: every reading of a nested-escape path is evaluated and the most restrictive stands (deny, then approval). */
function evaluatePolicies(req: GovernedRequest, policies: CompiledPolicySet): Decision {
  const identity = req.identity!;
  const http = req.action.kind === 'http' ? { method: req.action.method, path: req.httpTarget!.path } : {};
  const live = liveFacts(req);
  const policyInput = {
    identity: { id: identity.id, roles: identity.roles, team: identity.team },
    source_id: req.sourceId,
    operation: req.operation as Operation,
    ...http,
    tables: req.tables ?? [],
    columns: req.columns ?? [],
    ...classificationInput(req, live),
    roleDecision: { allowed: req.roleDecision!.allowed, reason: req.roleDecision!.reason },
  };
  let decision = evaluate(policies, policyInput);
  for (const path of req.httpTarget?.deeperPaths ?? []) {
    const deeper = evaluate(policies, { ...policyInput, path });
    if (EFFECT_RANK[deeper.effect] > EFFECT_RANK[decision.effect]) decision = deeper;
  }
  return withDriftProtection(req, decision, live);
}

/**
 * HTTP policy decisions by compiled policy set (replaced on every policy change) and everything else evaluation reads
 * of an HTTP request: identity (id, roles, team), source, method, path and its deeper readings, and the role decision.
 * A source whose catalog classifies HTTP operations is evaluated every time (its classifications are a further input).
 */
const httpPolicyDecisions = new DecisionMemo<Decision>();

function decidePolicy(req: GovernedRequest, policies: CompiledPolicySet): Decision {
  if (req.action.kind !== 'http' || (req.catalog !== undefined && req.catalog.operations.length > 0)) return evaluatePolicies(req, policies);
  const identity = req.identity!;
  const target = req.httpTarget!;
  const role = req.roleDecision!;
  const key = [identity.id, identity.team === null ? '\u0001' : identity.team, identity.roles.join('\u0001'), req.sourceId, req.action.method, target.path, target.deeperPaths.join('\u0001'), role.allowed ? 'allow' : 'deny', role.reason].join('\u0000');
  let decision = httpPolicyDecisions.get(policies, key);
  if (decision === undefined) {
    decision = evaluatePolicies(req, policies);
    httpPolicyDecisions.set(policies, key, decision);
  }
  return decision;
}

/** Step 4a: policies restrict and add obligations; the role decision is an input they cannot overturn. */
export const applyPolicy: Stage = {
  name: 'policy',
  run(req, deps) {
    const decision = decidePolicy(req, deps.policies());
    req.policyDecision = decision;
    if (decision.effect === 'deny') {
      for (const r of decision.reasons) req.audit.addReason(r);
      const denied = req.action.kind === 'sql' ? deniedColumns(deps.policies(), decision.deciding_policy_id, req.columns ?? []) : [];
      if (denied.length > 0) {
        req.audit.addReason(`columns denied: ${denied.slice(0, 20).join(', ')}`);
        throw new GatehouseError('forbidden', `A policy denies reading column ${denied.slice(0, 5).join(', ')}.`);
      }
      throw new GatehouseError('forbidden', 'A policy denies this request.');
    }
    if (req.action.kind === 'sql') refuseRedactedCopies(req);
  },
};

/** Step 4b: every rate limit of every matching policy, shared across replicas through the coordination store. */
export const enforceRateLimit: Stage = {
  name: 'rate_limit',
  run(req, deps) {
    const limits = req.policyDecision!.obligations.rate_limits;
    if (limits.length === 0) return;
    return consumeRateLimits(req, deps, limits);
  },
};

async function consumeRateLimits(req: GovernedRequest, deps: PipelineDeps, limits: Decision['obligations']['rate_limits']): Promise<void> {
  const result = await deps.rateLimiter.consumeAll({ identity_id: req.identity!.id, source_id: req.sourceId }, limits);
  if (result.allowed) return;
  if (result.reason === 'limiter_unavailable') {
    // Fail closed: without the shared budget nobody can tell whether the limit still holds.
    throw new GatehouseError('unavailable', 'The rate limiter is unavailable.', { retryAfterSeconds: result.retryAfterSeconds });
  }
  req.audit.addReason(`rate_limit: policy ${result.policy_id}`);
  throw new GatehouseError('rate_limited', undefined, { retryAfterSeconds: result.retryAfterSeconds });
}

/** Whether the approval stage could queue this write: no role rule or policy that waives approval outright. */
function mayQueue(req: GovernedRequest): boolean {
  return req.policyDecision!.effect === 'require_approval' || req.roleDecision!.approval !== 'never';
}

/** A measurement that could not be made, as the risk rule reads it: high risk (fail closed). */
const unmeasured = (reason: string) => ({ estimate: { ok: false as const, reason }, thresholds: { max_rows: 0, max_table_share: 0, share_min_rows: 0 } });

/**
 * Step 5a (SQL): a row-writing statement's effect is measured on its source before anything decides on it — the
 * planner's estimate for this statement with its bound parameters, against the source's thresholds (risk by effect,
 * not by syntax: docs/approvals.md "Risk by effect"). I/O through the WriteEffectPort; nothing is cached, so a table
 * that grew is measured as it is now. Reads, and writes no rule could queue, are not measured.
 */
export const estimateWriteEffect: Stage = {
  name: 'write_estimate',
  run(req, deps) {
    // Reads (the hot path) leave at the first test, before anything is allocated.
    if (req.action.kind !== 'sql' || req.sql!.operation !== 'write' || !mayQueue(req)) return;
    const sql = req.sql!;
    if (!needsWriteEstimate({ operation: sql.operation, statementKinds: sql.statements.map((s) => s.kind), traps: sql.traps, multiStatement: sql.multiStatement })) return;
    const port = deps.writeEffects;
    if (!port) {
      req.writeEffect = unmeasured('no estimator for this source');
      return;
    }
    const action = req.action;
    return port
      .estimate({ source: req.source!, identity: req.identity!, sql: action.sql, params: action.params })
      .catch(() => unmeasured('the estimator failed'))
      .then((measured) => {
        req.writeEffect = measured;
        if (measured.estimate.ok) req.audit.addReason(`write estimate: about ${Math.round(measured.estimate.rows)} rows`);
      });
  },
};

/** Step 5b: classify write risk and queue for a human when role, policy or risk says so. */
export const queueRiskyWrites: Stage = {
  name: 'approval',
  run(req, deps) {
    const risk =
      req.action.kind === 'http'
        ? assessRisk({ kind: 'http', method: req.action.method })
        : assessRisk({
            kind: 'sql',
            operation: req.operation!,
            statementKinds: req.sql!.statements.map((s) => s.kind),
            unboundedWrite: req.sql!.traps.includes('unbounded_write'),
            multiStatement: req.sql!.multiStatement,
            ...(req.writeEffect ? { effect: req.writeEffect } : {}),
          });
    req.risk = risk;
    const verdict = approvalVerdict({
      isWrite: isWriteOperation(req.operation),
      policyEffect: req.policyDecision!.effect,
      roleApproval: req.roleDecision!.approval,
      risk,
    });
    if (!verdict.required) return;
    if (req.preApproved) {
      // The approver decided on the effect they were shown; a write that has since grown by a change of scale is not that write.
      const grown = grownSinceApproval(req.preApproved.approvedRows, req.writeEffect?.estimate, req.writeEffect?.thresholds);
      if (grown !== null) {
        req.audit.addReason(`approval ${req.preApproved.approvalId}: ${grown}`);
        throw new GatehouseError('forbidden', `The write has grown since it was approved (${grown}); it was not executed.`);
      }
      req.audit.addReason(`approval: executed as approval ${req.preApproved.approvalId}`);
      return;
    }
    req.audit.addReason(`approval: ${verdict.reason}`);
    // The stored request is an audit-worthy event: in strict mode it is refused unless its entry can be recorded.
    req.audit.admit();
    return previewFor(req, deps).then(() =>
      deps.approvals.enqueue(req as Parameters<PipelineDeps['approvals']['enqueue']>[0]).then((ticket) => {
        req.approval = ticket;
        return { kind: 'queued' as const, approval: ticket };
      }),
    );
  },
};

/** The approver sees what the write would do now: the exact count of a rolled-back run, when it can be made safely. */
async function previewFor(req: GovernedRequest, deps: PipelineDeps): Promise<void> {
  const estimate = req.writeEffect?.estimate;
  if (req.action.kind !== 'sql' || estimate === undefined) return;
  if (!estimate.ok || !deps.writeEffects) {
    req.writePreview = { ok: false, reason: 'the write effect could not be estimated' };
    return;
  }
  const r = { source: req.source!, identity: req.identity!, sql: req.action.sql, params: req.action.params };
  req.writePreview = await deps.writeEffects.preview(r, estimate).catch(() => ({ ok: false as const, reason: 'the preview failed' }));
}

/** Spec §4 steps 1–5 in order (step 5 measures a write, then decides on it); every front door runs exactly this list before anything executes. */
export const decisionStages: readonly Stage[] = [
  validateInput,
  refuseSessionEscapes,
  authenticateIdentity,
  resolveSource,
  checkSourceRole,
  loadCatalog,
  resolveColumns,
  applyPolicy,
  enforceRateLimit,
  estimateWriteEffect,
  queueRiskyWrites,
];

/**
 * The stages that can run before a statement's parameters are known (a wire Parse): everything up to policy.
 * Rate limits and approvals wait for the execution, which runs all of decisionStages.
 */
export const preparationStages: readonly Stage[] = [validateInput, refuseSessionEscapes, authenticateIdentity, resolveSource, checkSourceRole, loadCatalog, resolveColumns, applyPolicy];

/** The audit fields known from the stages that have run (identity, source, decision trail). */
export function auditFieldsOf(req: GovernedRequest): Record<string, unknown> {
  const d = req.policyDecision;
  return {
    // The wire and MCP authenticate the session before any statement: a refusal by an earlier stage is still theirs.
    identity_id: req.identity?.id ?? (req.credential.kind === 'authenticated' ? req.credential.identity.id : null),
    source_id: req.source?.source_id ?? req.sourceId,
    operation: req.operation ?? null,
    method: req.action.kind === 'http' ? req.action.method : null,
    path: req.httpTarget?.path ?? null,
    sql_fingerprint: req.sql?.fingerprint ?? null,
    sql_normalized: boundedAuditText(req.sql?.normalized ?? null),
    tables: (req.tables ?? []).slice(0, AUDIT_ARRAY_MAX),
    policy_ids: d ? d.matched_policies.map((p) => p.id) : [],
    approval_id: req.approval?.id ?? req.preApproved?.approvalId ?? null,
  };
}
