// The governed cache's scope key and eligibility rules (spec §4 HTTP proxy rule 9): pure, so every front door keys and admits entries the same way.
import { hash } from 'node:crypto';
import type { PiiMode } from './policy/schema.js';

/**
 * Everything a cached answer may depend on. Two requests share a cache entry only when every
 * field is identical, so a hit is the answer the origin would have given to *this* scope
 * (same identity, grants, role decision, redaction decision, policy-set version, path, query
 * and source generation) — never a less restrictive one.
 *
 * Values are taken as given: nothing is normalized here (query parameters are not sorted,
 * header values not trimmed), because for some upstream APIs `?a=1&b=2` and `?b=2&a=1`
 * differ. Normalizing could merge requests that deserve different answers; not normalizing
 * can only cost a miss.
 */
export interface CacheScope {
  readonly source_id: string;
  readonly identity_id: number | string;
  readonly team: string | null;
  /** The identity's active-grant version (bumped on every grant change). */
  readonly grant_version: number;
  /** The mapped upstream role of the identity. */
  readonly mapped_pg_role: string | null;
  /** The source-role decision that allowed the request. */
  readonly role_decision: { readonly grant_id: number; readonly role_key: string; readonly rule_index: number };
  readonly policy: CachePolicyScope;
  readonly method: 'GET';
  /** The path beneath the source base, as it will be sent upstream (after validation). */
  readonly path: string;
  /** The raw query string without the leading `?` ('' for none), exactly as forwarded. */
  readonly query: string;
  /**
   * Forwarded request headers that select a representation (spec rule 6 allowlist). They are part
   * of the scope so that an upstream answering `Vary: Accept` is still cached correctly.
   */
  readonly accept: string | null;
  readonly accept_language: string | null;
  /** The source generation read before the upstream request (see src/cache/generations.ts). */
  readonly source_generation: number;
}

export interface CachePolicyScope {
  /** The policy-set version the decision was made with. */
  readonly version: string | number;
  readonly deciding_policy_id: number | null;
  /** Ids of the matched policies, in the order the engine reported them. */
  readonly matched_policy_ids: readonly number[];
  /** The redaction decision: what was applied to the body that is cached. */
  readonly obligations: {
    readonly redact_columns: readonly string[];
    readonly pii_mode: PiiMode | null;
    readonly cache: boolean;
  };
}

/** Bumped if the encoding below ever changes, so old and new keys can never collide. */
const SCOPE_KEY_VERSION = 'gatehouse.cache-scope.v1';

function str(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new TypeError(`cache scope: ${what} must be a string`);
  return value;
}

function nullableStr(value: unknown, what: string): string | null {
  return value === null ? null : str(value, what);
}

/** JSON maps NaN and Infinity to null, which would collide with a real null: only safe integers pass. */
function int(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new TypeError(`cache scope: ${what} must be a safe integer`);
  return value;
}

function intOrStr(value: unknown, what: string): number | string {
  return typeof value === 'string' ? value : int(value, what);
}

/**
 * The canonical encoding: a fixed-order JSON array (no object key order to depend on) in which
 * every field keeps its JSON type, so `1` and `"1"`, `null` and `"null"` stay distinct. JSON
 * escapes lone surrogates (ES2019), so distinct JS strings always give distinct UTF-8 bytes.
 */
export function canonicalScope(scope: CacheScope): string {
  const { role_decision: role, policy } = scope;
  if (scope.method !== 'GET') throw new TypeError('cache scope: only GET requests are cached');
  const obligations = policy.obligations;
  return JSON.stringify([
    SCOPE_KEY_VERSION,
    str(scope.source_id, 'source_id'),
    intOrStr(scope.identity_id, 'identity_id'),
    nullableStr(scope.team, 'team'),
    int(scope.grant_version, 'grant_version'),
    nullableStr(scope.mapped_pg_role, 'mapped_pg_role'),
    [int(role.grant_id, 'role_decision.grant_id'), str(role.role_key, 'role_decision.role_key'), int(role.rule_index, 'role_decision.rule_index')],
    [
      intOrStr(policy.version, 'policy.version'),
      policy.deciding_policy_id === null ? null : int(policy.deciding_policy_id, 'policy.deciding_policy_id'),
      policy.matched_policy_ids.map((id, i) => int(id, `policy.matched_policy_ids[${i}]`)),
      obligations.redact_columns.map((c, i) => str(c, `policy.obligations.redact_columns[${i}]`)),
      nullableStr(obligations.pii_mode, 'policy.obligations.pii_mode'),
      obligations.cache === true,
    ],
    scope.method,
    str(scope.path, 'path'),
    str(scope.query, 'query'),
    nullableStr(scope.accept, 'accept'),
    nullableStr(scope.accept_language, 'accept_language'),
    int(scope.source_generation, 'source_generation'),
  ]);
}

/** SHA-256 (hex) of the canonical scope: the governed cache's key in the coordination store. Throws TypeError on a malformed scope. */
export function cacheScopeKey(scope: CacheScope): string {
  return scopeDigest(canonicalScope(scope));
}

/** SHA-256 (hex) of a canonical scope's text (canonicalScope). */
export function scopeDigest(canonical: string): string {
  // The one-shot hash: the same digest as a Hash object's, without building one per call.
  return hash('sha256', canonical, 'hex');
}

// ---------------------------------------------------------------------------------------------
// Eligibility

/** Source `cache_strategy` values that admit the governed cache; anything else (e.g. "none") opts the source out. */
export const CACHEABLE_STRATEGIES: ReadonlySet<string> = new Set(['deterministic_first']);

/** Statuses stored: final, complete representations. 204/206/3xx/4xx/5xx are never cached. */
export const CACHEABLE_STATUSES: ReadonlySet<number> = new Set([200, 203]);

/** Request headers that make a request conditional: forwarded upstream unanswered by the cache (it may answer 304). */
const CONDITIONAL_HEADERS = ['if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since'] as const;

/** Representation-selecting request headers that are part of the scope; a `Vary` on anything else is not cached. */
const SCOPED_VARY: ReadonlySet<string> = new Set(['accept', 'accept-language', 'accept-encoding']);

export type Eligibility = { readonly eligible: true } | { readonly eligible: false; readonly reason: string };

export interface RequestCacheInput {
  readonly method: string;
  /** Request headers as forwarded (names lower case). */
  readonly requestHeaders?: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly obligations: { readonly cache: boolean };
  readonly cacheStrategy: string;
}

/** Whether a request may be answered from (and later stored in) the governed cache at all. */
export function isRequestCacheable(input: RequestCacheInput): Eligibility {
  if (input.method !== 'GET') return { eligible: false, reason: 'method' };
  if (input.obligations.cache !== true) return { eligible: false, reason: 'policy_opt_out' };
  if (!CACHEABLE_STRATEGIES.has(input.cacheStrategy)) return { eligible: false, reason: 'source_strategy' };
  const headers = input.requestHeaders ?? {};
  for (const name of CONDITIONAL_HEADERS) if (headers[name] !== undefined) return { eligible: false, reason: 'conditional_request' };
  return { eligible: true };
}

export interface ResponseCacheInput extends RequestCacheInput {
  readonly status: number;
  /** Upstream response headers before the response allowlist (names lower case), so Set-Cookie is still visible. */
  readonly upstreamHeaders: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** Size of the redacted body that would be stored. */
  readonly bodyBytes: number;
  readonly maxEntryBytes: number;
  /** For `Expires`; defaults to Date.now(). */
  readonly now?: number;
}

export type ResponseEligibility =
  | { readonly eligible: true; /** Upper bound from Cache-Control max-age / s-maxage or Expires; undefined when none. */ readonly maxTtlSeconds: number | undefined }
  | { readonly eligible: false; readonly reason: string };

function headerList(value: string | readonly string[] | undefined): string[] {
  if (value === undefined) return [];
  return typeof value === 'string' ? [value] : [...value];
}

/** Cache-Control directives, lower-cased; duplicate headers are merged (RFC 9111 §5.2). Bounded by the response header limit upstream. */
function cacheControl(value: string | readonly string[] | undefined): Map<string, string | null> {
  const out = new Map<string, string | null>();
  for (const line of headerList(value)) {
    for (const part of line.split(',')) {
      const [rawName, ...rest] = part.split('=');
      const name = rawName!.trim().toLowerCase();
      if (name === '') continue;
      const arg = rest.length > 0 ? rest.join('=').trim().replace(/^"(.*)"$/, '$1') : null;
      // The most restrictive reading wins when a directive repeats: keep the smallest age.
      const prev = out.get(name);
      if (prev !== undefined && prev !== null && arg !== null && Number(prev) <= Number(arg)) continue;
      out.set(name, arg);
    }
  }
  return out;
}

function deltaSeconds(arg: string | null | undefined): number | null {
  if (arg === undefined) return null;
  // An unparsable age is treated as 0 (stale at once), never as "no limit".
  if (arg === null || !/^\d{1,10}$/.test(arg)) return 0;
  return Number(arg);
}

/**
 * Whether an upstream answer may be stored. Rules (docs/cache.md "Eligibility"):
 * - the request is cacheable (GET, policy did not opt out, source strategy admits caching, not conditional);
 * - status 200 or 203;
 * - no `Cache-Control: no-store | private | no-cache`, no `Pragma: no-cache`, and a max-age / s-maxage above 0;
 * - no `Set-Cookie` (a per-client answer, even though the cookie itself is never returned);
 * - no `Vary: *`, and no `Vary` on a header outside the scope (Accept, Accept-Language; Accept-Encoding is the gateway's own);
 * - a valid, future `Expires` when it is the only freshness information;
 * - the redacted body fits `maxEntryBytes`.
 */
export function isCacheEligible(input: ResponseCacheInput): ResponseEligibility {
  const request = isRequestCacheable(input);
  if (!request.eligible) return request;
  if (!CACHEABLE_STATUSES.has(input.status)) return { eligible: false, reason: 'status' };
  const h = input.upstreamHeaders;
  const cc = cacheControl(h['cache-control']);
  for (const directive of ['no-store', 'private', 'no-cache']) if (cc.has(directive)) return { eligible: false, reason: `cache_control_${directive.replace('-', '_')}` };
  if (headerList(h['pragma']).some((p) => /(^|,)\s*no-cache\s*(,|$)/i.test(p))) return { eligible: false, reason: 'pragma_no_cache' };
  if (headerList(h['set-cookie']).length > 0) return { eligible: false, reason: 'set_cookie' };
  for (const line of headerList(h['vary'])) {
    for (const name of line.split(',').map((v) => v.trim().toLowerCase())) {
      if (name === '') continue;
      if (name === '*') return { eligible: false, reason: 'vary_star' };
      if (!SCOPED_VARY.has(name)) return { eligible: false, reason: 'vary_unscoped' };
    }
  }
  let maxTtl: number | undefined;
  const sMaxAge = deltaSeconds(cc.get('s-maxage'));
  const maxAge = deltaSeconds(cc.get('max-age'));
  const age = sMaxAge ?? maxAge;
  if (age !== null) {
    if (age <= 0) return { eligible: false, reason: 'max_age_zero' };
    maxTtl = age;
  } else {
    const expires = headerList(h['expires'])[0];
    if (expires !== undefined) {
      const at = Date.parse(expires);
      const now = input.now ?? Date.now();
      // RFC 9111 §5.3: an invalid Expires (e.g. "0") means already expired.
      if (!Number.isFinite(at) || at <= now) return { eligible: false, reason: 'expired' };
      maxTtl = Math.max(1, Math.floor((at - now) / 1000));
    }
  }
  if (!Number.isSafeInteger(input.bodyBytes) || input.bodyBytes < 0) return { eligible: false, reason: 'body_size_unknown' };
  if (input.bodyBytes > input.maxEntryBytes) return { eligible: false, reason: 'too_large' };
  return { eligible: true, maxTtlSeconds: maxTtl };
}
