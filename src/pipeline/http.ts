// The HTTP execution stages (spec §4 steps 6–10): egress and circuit, governed cache, upstream request, redaction, cache store and invalidation.
import { GatehouseError } from '../errors/registry.js';
import { isCacheEligible, isRequestCacheable } from '../governance/cache-scope.js';
import { upstreamRequest, type UpstreamMethod } from '../egress/request.js';
import { resolveCredential } from '../connectors/credentials.js';
import { httpConfigSchema } from '../connectors/http.js';
import { parsedConfigReader } from '../connectors/parsed-config.js';
import { scanBody, type PiiMode, type PiiScanner } from '../governance/pii/index.js';
import type { EgressDispatcher } from '../egress/agent.js';
import type { CircuitRegistry } from '../egress/circuit.js';
import type { CacheKey, GovernedCache } from '../cache/governed-cache.js';
import type { SecretRefResult } from '../config/secrets.js';
import type { GovernedRequest, HttpHeaders, PipelineDeps, Stage, StageOutcome } from './context.js';
import { isWriteOperation } from './context.js';
import { decisionStages } from './decide.js';
import { recordWriteIntent, runStages } from './run.js';

/** Spec §4 rule 6: the only request headers that reach the upstream. */
export const FORWARDED_REQUEST_HEADERS = ['accept', 'accept-language', 'content-type', 'if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since', 'idempotency-key'] as const;
/** Spec §4 rule 7: the only upstream response headers returned. */
export const RETURNED_RESPONSE_HEADERS = ['cache-control', 'content-type', 'etag', 'expires', 'last-modified', 'vary'] as const;


export interface ProxyResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export interface HttpPipelineDeps extends PipelineDeps {
  readonly egress: EgressDispatcher;
  readonly circuits: CircuitRegistry;
  readonly cache: GovernedCache;
  resolveSecretRef(ref: string): SecretRefResult;
}

/** The HTTP request as it moves through execution: what it would send, and what came back. */
export interface HttpExecution extends GovernedRequest {
  cacheKey?: CacheKey | null;
  cacheOutcome?: 'hit' | 'miss' | 'bypass';
  upstream?: { status: number; headers: Record<string, string | string[]>; body: Buffer; wireBytes: number };
  response?: ProxyResponse;
  redactions?: number;
  /** The source generation advanced before this write executed (strict write barrier). */
  barrierRaised?: boolean;
}

export type HttpOutcome = StageOutcome | { readonly kind: 'respond'; readonly response: ProxyResponse };

type HttpStage = Stage<HttpExecution, HttpPipelineDeps, HttpOutcome>;

/** One header value: a list (what node:http keeps as one) joined as the header would be repeated. */
export function single(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}

function cacheScope(req: HttpExecution) {
  const identity = req.identity!;
  const decision = req.policyDecision!;
  const role = req.roleDecision!;
  const headers: HttpHeaders = req.action.kind === 'http' ? req.action.headers : {};
  return {
    source_id: req.sourceId,
    identity_id: identity.id,
    team: identity.team,
    grant_version: identity.grant_version,
    mapped_pg_role: identity.mapped_pg_role,
    role_decision: { grant_id: role.grant_id ?? 0, role_key: role.role_key ?? '', rule_index: role.rule_index ?? -1 },
    policy: {
      version: decision.policy_version,
      deciding_policy_id: decision.deciding_policy_id,
      matched_policy_ids: decision.matched_policies.map((p) => p.id),
      obligations: { redact_columns: decision.obligations.redact_columns, pii_mode: decision.obligations.pii_mode, cache: decision.obligations.cache },
    },
    method: 'GET' as const,
    path: req.httpTarget!.path,
    query: req.httpTarget!.query,
    accept: single(headers.accept) ?? null,
    accept_language: single(headers['accept-language']) ?? null,
  };
}

/** A source's HTTP connection config, parsed once per configuration object (parsed-config.ts). */
const httpConfigOf = parsedConfigReader(httpConfigSchema);

/** Step 6: the target must be an allowed address for this source and its circuit must not be open. */
export const checkEgress: HttpStage = {
  name: 'egress',
  run(req, deps) {
    const circuit = deps.circuits.for(req.sourceId);
    if (circuit.state === 'open' || circuit.state === 'isolated') throw new GatehouseError('unavailable', 'The source is temporarily unavailable (circuit open).');
    // The connection re-checks the address it connects to; this early check makes a forbidden target a 403 before the cache or a write barrier is touched.
    return deps.egress.precheck(req.sourceId, req.httpTarget!.url.hostname);
  },
};

/** Step 7: eligible GETs are served from the governed cache, keyed by the full decision scope. */
export const lookupCache: HttpStage = {
  name: 'cache_lookup',
  run(req, deps) {
    if (req.action.kind !== 'http') return;
    const eligible = isRequestCacheable({
      method: req.action.method,
      requestHeaders: req.action.headers,
      obligations: req.policyDecision!.obligations,
      cacheStrategy: req.source!.cache_strategy,
    });
    if (!eligible.eligible) {
      req.cacheOutcome = 'bypass';
      return;
    }
    return cachedAnswer(req, deps);
  },
};

async function cachedAnswer(req: HttpExecution, deps: HttpPipelineDeps): Promise<HttpOutcome | undefined> {
  const found = await deps.cache.lookup(cacheScope(req));
  req.cacheKey = found.key;
  if (!found.hit) {
    req.cacheOutcome = found.reason === 'not_found' ? 'miss' : 'bypass';
    return;
  }
  req.cacheOutcome = 'hit';
  const response = { status: found.entry.status, headers: { ...found.entry.headers }, body: found.entry.body };
  req.response = response;
  return { kind: 'respond', response };
}

/** Step 8a: with strict write barriers, a mutation advances the source generation before it executes (spec rule 9). */
export const raiseWriteBarrier: HttpStage = {
  name: 'write_barrier',
  run(req, deps) {
    if (!isWriteOperation(req.operation)) return;
    // Strict audit: a write must not reach the upstream unless its entry can be recorded.
    req.audit.admit();
    return deps.cache.beforeWrite(req.sourceId).then(() => {
      req.barrierRaised = true;
    });
  },
};

/** Step 8b: the upstream request, with only allowlisted headers and the source's own credential. */
export const executeUpstream: HttpStage = {
  name: 'upstream',
  async run(req, deps) {
    if (req.action.kind !== 'http') return;
    // The last step before the upstream sees a write: its intent becomes durable (reads keep the plain path).
    if (isWriteOperation(req.operation) || req.preApproved) await recordWriteIntent(req);
    const headers: Record<string, string> = {};
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const v = single(req.action.headers[name]);
      if (v !== undefined) headers[name] = v;
    }
    const config = httpConfigOf(req.source!);
    if (config === null) throw new GatehouseError('invalid_request', 'The source configuration is invalid.');
    const credential = resolveCredential(config, { literal: 'token', ref: 'token_ref' }, (ref) => deps.resolveSecretRef(ref));
    if (!credential.ok) {
      deps.log.error({ source_id: req.sourceId, problem: credential.problem }, 'source credential reference cannot be resolved');
      throw new GatehouseError('unavailable', 'The source credential is unavailable.');
    }
    if (credential.value !== null) headers[config.auth_header.toLowerCase()] = config.auth_scheme ? `${config.auth_scheme} ${credential.value}` : credential.value;
    const limits = deps.config.gateway.limits;
    const upstream = await deps.circuits.for(req.sourceId).execute(() =>
      upstreamRequest({
        dispatcher: deps.egress,
        url: req.httpTarget!.url,
        method: req.action.kind === 'http' ? (req.action.method as UpstreamMethod) : 'GET',
        headers,
        body: req.action.kind === 'http' ? req.action.body : null,
        sourceId: req.sourceId,
        timeoutMs: Math.min(config.timeout_ms, deps.config.gateway.timeouts.upstream_request_ms),
        maxResponseBytes: limits.response_body_bytes,
      }),
    );
    req.upstream = upstream;
    req.audit.set({ upstream_status: upstream.status });
  },
};

/**
 * Whether anything in force asks for this response to be redacted: a column obligation, or a personal-data mode
 * (the policy's, else `pii.default_mode`) that is still on after the scanner's enablement. Decides the default for
 * responses the scanner cannot read (docs/proxy.md "Bodies").
 */
function asksForRedaction(opts: { mode: PiiMode; redactColumns: readonly string[] }, pii: PiiScanner): boolean {
  return opts.redactColumns.length > 0 || pii.effectiveMode(opts.mode) !== 'off';
}

/** Step 9a: personal data and policy columns are redacted before anything leaves or is cached; a scanner failure replaces the body (fail closed). */
export const redactResponse: HttpStage = {
  name: 'redact',
  run(req, deps) {
    const upstream = req.upstream!;
    const headers: Record<string, string> = {};
    for (const name of RETURNED_RESPONSE_HEADERS) {
      const v = single(upstream.headers[name]);
      if (v !== undefined) headers[name] = v;
    }
    const obligations = req.policyDecision!.obligations;
    const opts = { mode: obligations.pii_mode ?? deps.config.pii.default_mode, redactColumns: obligations.redact_columns };
    let body = upstream.body;
    let redactions = 0;
    if (body.length > 0) {
      const scanned = scanBody(deps.pii, body, headers['content-type'], opts);
      if (scanned.kind === 'unscannable') {
        const setting = httpConfigOf(req.source!)?.unscannable_responses ?? (asksForRedaction(opts, deps.pii) ? 'refuse' : 'pass');
        if (setting === 'refuse') {
          req.audit.addReason(`redaction: response refused as unscannable (${scanned.reason})`);
          const refuse = (): never => {
            throw new GatehouseError('unscannable_response');
          };
          // A write that went through still changed the source: its dependent cache entries go before the refusal (step 10).
          if (isWriteOperation(req.operation) && ((upstream.status >= 200 && upstream.status < 300) || req.barrierRaised)) return deps.cache.afterWrite(req.sourceId).then(refuse);
          refuse();
        }
        req.audit.addReason(`redaction: response passed unscanned (${scanned.reason})`);
      } else {
        body = scanned.body;
        redactions = scanned.redactions;
        if (scanned.contentType !== '') headers['content-type'] = scanned.contentType;
        if (scanned.failedClosed) req.audit.addReason('redaction: scan failed closed');
      }
    }
    req.redactions = redactions;
    req.response = { status: upstream.status, headers, body };
    return undefined;
  },
};

/** Step 9b: the redacted form of an eligible answer is stored under the key read before the upstream call. */
export const storeInCache: HttpStage = {
  name: 'cache_store',
  run(req, deps) {
    if (!req.cacheKey || req.action.kind !== 'http') return;
    const upstream = req.upstream!;
    const response = req.response!;
    const eligible = isCacheEligible({
      method: req.action.method,
      requestHeaders: req.action.headers,
      obligations: req.policyDecision!.obligations,
      cacheStrategy: req.source!.cache_strategy,
      status: upstream.status,
      upstreamHeaders: upstream.headers,
      bodyBytes: response.body.length,
      maxEntryBytes: deps.config.gateway.limits.response_body_bytes,
    });
    if (!eligible.eligible) return;
    return deps.cache.store(req.cacheKey, response, { ttlSeconds: eligible.maxTtlSeconds }).then(() => undefined);
  },
};

/** Step 10: after a successful mutation, dependent cache entries of the source are invalidated everywhere. */
export const invalidateAfterWrite: HttpStage = {
  name: 'invalidate',
  run(req, deps) {
    if (!isWriteOperation(req.operation)) return;
    const status = req.upstream?.status ?? 0;
    // A failed write may still have changed something upstream; when the barrier already ran, advancing again is cheap and safe.
    if ((status >= 200 && status < 300) || req.barrierRaised) return deps.cache.afterWrite(req.sourceId);
    return undefined;
  },
};

/** Spec §4 steps 6–10, run after the shared decision stages. */
export const httpExecutionStages: readonly HttpStage[] = [checkEgress, lookupCache, raiseWriteBarrier, executeUpstream, redactResponse, storeInCache, invalidateAfterWrite];

/** The whole HTTP proxy pipeline in order (spec §4 steps 1–10): the shared decision stages, then execution. */
export const httpPipelineStages: readonly HttpStage[] = [...decisionStages, ...httpExecutionStages];

/** Runs the HTTP pipeline; the caller renders the outcome and ends the audit entry (step 11). */
export async function runHttpPipeline(req: HttpExecution, deps: HttpPipelineDeps): Promise<HttpOutcome> {
  const outcome = await runStages(httpPipelineStages, req, deps);
  return outcome ?? { kind: 'respond', response: req.response! };
}
