// The cache scope key: every field of spec rule 9 separates keys (property test), and the eligibility rules table.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cacheScopeKey, canonicalScope, isCacheEligible, isRequestCacheable } from '../../src/governance/cache-scope.js';
import type { CacheScope, ResponseCacheInput } from '../../src/governance/cache-scope.js';

const text = fc.string({ maxLength: 12, unit: 'binary' });
const nullableText = fc.option(text, { nil: null });
const id = fc.integer({ min: 0, max: 1_000_000 });

const scopeArb: fc.Arbitrary<CacheScope> = fc.record({
  source_id: text,
  identity_id: fc.oneof(id, text),
  team: nullableText,
  grant_version: id,
  mapped_pg_role: nullableText,
  role_decision: fc.record({ grant_id: id, role_key: text, rule_index: fc.integer({ min: 0, max: 20 }) }),
  policy: fc.record({
    version: fc.oneof(id, text),
    deciding_policy_id: fc.option(id, { nil: null }),
    matched_policy_ids: fc.array(id, { maxLength: 4 }),
    obligations: fc.record({
      redact_columns: fc.array(text, { maxLength: 3 }),
      pii_mode: fc.constantFrom('off' as const, 'fast' as const, 'deep' as const, null),
      cache: fc.boolean(),
    }),
  }),
  method: fc.constant('GET' as const),
  path: text,
  query: text,
  accept: nullableText,
  accept_language: nullableText,
  source_generation: id,
});

/** Every leaf of the scope, by path, so one mutation can target exactly one field. */
const LEAVES = [
  'source_id', 'identity_id', 'team', 'grant_version', 'mapped_pg_role',
  'role_decision.grant_id', 'role_decision.role_key', 'role_decision.rule_index',
  'policy.version', 'policy.deciding_policy_id', 'policy.matched_policy_ids',
  'policy.obligations.redact_columns', 'policy.obligations.pii_mode', 'policy.obligations.cache',
  'path', 'query', 'accept', 'accept_language', 'source_generation',
] as const;

function get(obj: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], obj);
}

function withLeaf(scope: CacheScope, path: string, value: unknown): CacheScope {
  const copy = structuredClone(scope) as unknown as Record<string, unknown>;
  const parts = path.split('.');
  const parent = parts.slice(0, -1).reduce<Record<string, unknown>>((o, k) => o[k] as Record<string, unknown>, copy);
  parent[parts.at(-1)!] = value;
  return copy as unknown as CacheScope;
}

const base: CacheScope = {
  source_id: 'crm', identity_id: 7, team: 'sales', grant_version: 3, mapped_pg_role: null,
  role_decision: { grant_id: 11, role_key: 'reader', rule_index: 0 },
  policy: { version: 5, deciding_policy_id: 2, matched_policy_ids: [2, 4], obligations: { redact_columns: ['*.email'], pii_mode: 'fast', cache: true } },
  method: 'GET', path: '/customers', query: 'a=1&b=2', accept: 'application/json', accept_language: null, source_generation: 9,
};

describe('cacheScopeKey', () => {
  it('is a stable SHA-256 hex of the scope', () => {
    const key = cacheScopeKey(base);
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(cacheScopeKey(structuredClone(base))).toBe(key);
  });

  it('gives a different key when any single field differs (property)', () => {
    fc.assert(
      fc.property(scopeArb, fc.constantFrom(...LEAVES), scopeArb, (scope, leaf, other) => {
        const replacement = get(other, leaf);
        fc.pre(JSON.stringify(replacement) !== JSON.stringify(get(scope, leaf)));
        expect(cacheScopeKey(withLeaf(scope, leaf, replacement))).not.toBe(cacheScopeKey(scope));
      }),
      { numRuns: 3000 },
    );
  });

  it('is injective over whole scopes: different canonical scopes never share a key (property)', () => {
    fc.assert(
      fc.property(scopeArb, scopeArb, (a, b) => {
        fc.pre(canonicalScope(a) !== canonicalScope(b));
        expect(cacheScopeKey(a)).not.toBe(cacheScopeKey(b));
      }),
      { numRuns: 1000 },
    );
  });

  it.each([
    ['number vs string identity', { identity_id: '7' }],
    ['null vs "null" team', { team: 'null' }],
    ['query order is kept, not sorted', { query: 'b=2&a=1' }],
    ['empty vs absent query', { query: '?a=1&b=2' }],
    ['matched policy order', { policy: { ...base.policy, matched_policy_ids: [4, 2] } }],
    ['field boundaries cannot be shifted', { path: '/customers","a=1' , query: 'b=2' }],
  ])('separates %s', (_name, patch) => {
    expect(cacheScopeKey({ ...base, ...patch } as CacheScope)).not.toBe(cacheScopeKey(base));
  });

  it.each([
    ['a NaN generation', { source_generation: Number.NaN }],
    ['an Infinity grant version', { grant_version: Number.POSITIVE_INFINITY }],
    ['a non-GET method', { method: 'POST' }],
    ['a missing path', { path: undefined }],
    ['a fractional rule index', { role_decision: { ...base.role_decision, rule_index: 0.5 } }],
  ])('refuses %s', (_name, patch) => {
    expect(() => cacheScopeKey({ ...base, ...patch } as unknown as CacheScope)).toThrow(TypeError);
  });
});

describe('isRequestCacheable', () => {
  const ok = { method: 'GET', obligations: { cache: true }, cacheStrategy: 'deterministic_first' };
  it.each([
    ['a plain GET', ok, true, undefined],
    ['POST', { ...ok, method: 'POST' }, false, 'method'],
    ['a policy opt-out', { ...ok, obligations: { cache: false } }, false, 'policy_opt_out'],
    ['source strategy none', { ...ok, cacheStrategy: 'none' }, false, 'source_strategy'],
    ['an unknown strategy (fail closed)', { ...ok, cacheStrategy: 'semantic' }, false, 'source_strategy'],
    ['If-None-Match', { ...ok, requestHeaders: { 'if-none-match': '"x"' } }, false, 'conditional_request'],
    ['If-Modified-Since', { ...ok, requestHeaders: { 'if-modified-since': 'Tue, 01 Jan 2030 00:00:00 GMT' } }, false, 'conditional_request'],
    ['Accept only', { ...ok, requestHeaders: { accept: 'application/json' } }, true, undefined],
  ])('%s', (_name, input, eligible, reason) => {
    const result = isRequestCacheable(input);
    expect(result.eligible).toBe(eligible);
    if (!result.eligible) expect(result.reason).toBe(reason);
  });
});

describe('isCacheEligible', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  const ok: ResponseCacheInput = {
    method: 'GET', obligations: { cache: true }, cacheStrategy: 'deterministic_first',
    status: 200, upstreamHeaders: { 'content-type': 'application/json' }, bodyBytes: 100, maxEntryBytes: 1000, now,
  };
  const rows: Array<[string, Partial<ResponseCacheInput>, string | number | undefined]> = [
    ['200 with no freshness info', {}, undefined],
    ['203', { status: 203 }, undefined],
    ['204', { status: 204 }, 'status'],
    ['206', { status: 206 }, 'status'],
    ['301', { status: 301 }, 'status'],
    ['404', { status: 404 }, 'status'],
    ['500', { status: 500 }, 'status'],
    ['no-store', { upstreamHeaders: { 'cache-control': 'no-store' } }, 'cache_control_no_store'],
    ['private among others', { upstreamHeaders: { 'cache-control': 'max-age=60, Private' } }, 'cache_control_private'],
    ['no-cache', { upstreamHeaders: { 'cache-control': 'no-cache' } }, 'cache_control_no_cache'],
    ['no-store in a second header line', { upstreamHeaders: { 'cache-control': ['max-age=60', 'no-store'] } }, 'cache_control_no_store'],
    ['Pragma: no-cache', { upstreamHeaders: { pragma: 'no-cache' } }, 'pragma_no_cache'],
    ['Set-Cookie', { upstreamHeaders: { 'set-cookie': ['a=b'] } }, 'set_cookie'],
    ['Vary: *', { upstreamHeaders: { vary: '*' } }, 'vary_star'],
    ['Vary: Cookie', { upstreamHeaders: { vary: 'Accept, Cookie' } }, 'vary_unscoped'],
    ['Vary: Accept, Accept-Language', { upstreamHeaders: { vary: 'Accept, Accept-Language' } }, undefined],
    ['max-age=0', { upstreamHeaders: { 'cache-control': 'max-age=0' } }, 'max_age_zero'],
    ['s-maxage=0 beats max-age', { upstreamHeaders: { 'cache-control': 'max-age=60, s-maxage=0' } }, 'max_age_zero'],
    ['unparsable max-age', { upstreamHeaders: { 'cache-control': 'max-age=soon' } }, 'max_age_zero'],
    ['max-age=60 caps the TTL', { upstreamHeaders: { 'cache-control': 'public, max-age=60' } }, 60],
    ['repeated max-age keeps the smallest', { upstreamHeaders: { 'cache-control': ['max-age=60', 'max-age=5'] } }, 5],
    ['a future Expires caps the TTL', { upstreamHeaders: { expires: 'Tue, 01 Jan 2030 00:02:00 GMT' } }, 120],
    ['Expires: 0', { upstreamHeaders: { expires: '0' } }, 'expired'],
    ['a past Expires', { upstreamHeaders: { expires: 'Mon, 31 Dec 2029 00:00:00 GMT' } }, 'expired'],
    ['too large', { bodyBytes: 1001 }, 'too_large'],
    ['exactly the bound', { bodyBytes: 1000 }, undefined],
    ['a policy opt-out', { obligations: { cache: false } }, 'policy_opt_out'],
    ['a write', { method: 'PUT' }, 'method'],
  ];
  it.each(rows)('%s', (_name, patch, expected) => {
    const result = isCacheEligible({ ...ok, ...patch });
    if (expected === undefined || typeof expected === 'number') {
      expect(result).toEqual({ eligible: true, maxTtlSeconds: expected });
    } else {
      expect(result).toEqual({ eligible: false, reason: expected });
    }
  });
});
