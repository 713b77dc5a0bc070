// Proxy target path rules (the refusal reasons of spec §4 "HTTP proxy" rules 2 and 3): every traversal and smuggling family is refused with its reason; legitimate targets map to the expected upstream URL.
//
// Works on the RAW request target (`request.raw.url`), never on a framework-decoded path:
// decoding first is what lets `%2e%2e` or `%2f` slip past a check. Order of checks:
//   1. bounds and request-target form (origin-form only; absolute-form, authority-form, `*` refused)
//   2. the `/proxy/<sourceId>` prefix must match byte for byte
//   3. every raw character of the remainder must be an RFC 3986 pchar or `/` (no raw controls,
//      spaces, backslashes, non-ASCII, `#`), every `%` must start a well-formed escape
//   4. per segment: decode (strict UTF-8, so overlong forms like `%c0%ae` fail), then refuse
//      encoded `/` and `\`, controls, dot segments, matrix params, confusables; then decode again,
//      up to MAX_DECODE_LEVELS, judging every level by the same rule (a double-decoding upstream
//      reads level 2, a triple-decoding one level 3); a segment still holding an escape after the
//      last level is refused (`encoding_too_deep`). Harmless nested escapes (`my%2520file`) pass
//      and reach the upstream byte for byte.
//   5. build the URL with WHATWG URL and check containment (origin equal, path beneath the base
//      path on a segment boundary) — defence in depth, it cannot fail if 1–4 hold
// The reasons are stable identifiers for logs and audit; clients only ever see `invalid_path`.

import { baseUrlProblem } from './base-url.js';
import { BoundedMemo } from '../util/bounded-memo.js';

/** Longest accepted path part of the request target (prefix + remainder), in bytes/characters. */
export const MAX_PATH_LENGTH = 8 * 1024;
/** Longest accepted query string (without the `?`). */
export const MAX_QUERY_LENGTH = 8 * 1024;
/** Most segments accepted in the remainder. */
export const MAX_SEGMENTS = 128;
/**
 * Decodings judged per segment: level 1 is what a conforming upstream sees, each further level what one more
 * decoding layer (a front proxy, a framework, an application) would see. Small, so the work stays bounded.
 */
export const MAX_DECODE_LEVELS = 4;
/** Route prefix the gateway mounts the proxy under (spec §4 Gateway table). */
export const PROXY_PREFIX = '/proxy/';

export const PATH_REJECT_REASONS = [
  'too_long', // path part longer than MAX_PATH_LENGTH
  'query_too_long', // query longer than MAX_QUERY_LENGTH
  'too_many_segments', // more than MAX_SEGMENTS segments
  'not_origin_form', // absolute-form (`http://evil/`), authority-form, `*`, or anything not starting with `/`
  'source_mismatch', // the raw target does not start with `/proxy/<sourceId>` exactly
  'control_character', // raw or percent-encoded C0/C1 control, DEL or NUL
  'backslash', // raw `\` or encoded `%5c`
  'encoded_slash', // `%2f` inside a segment
  'invalid_character', // a raw character outside RFC 3986 pchar (space, `"`, `<`, `|`, non-ASCII, …)
  'fragment', // a raw `#` (clients never send fragments; URL parsers would cut there)
  'invalid_percent_encoding', // `%zz`, truncated `%2`
  'encoding_too_deep', // a segment still holds an escape after MAX_DECODE_LEVELS decodings (`%2525252e`)
  'invalid_utf8', // decoded bytes are not strict UTF-8 (overlong `%c0%ae`, `%e0%80%ae`, lone surrogates)
  'dot_segment', // `.`/`..` in any spelling, or a segment of only dots/trailing dots and spaces
  'empty_segment', // `//` anywhere (authority injection `//host`, ambiguous empty segments)
  'scheme_injection', // first segment looks like a scheme (`http:`, `javascript:`)
  'authority_injection', // `@` in the first segment (userinfo tricks)
  'matrix_parameter', // `;` raw or `%3b` (path parameters: `/admin;x/` bypasses path rules on Tomcat-like servers)
  'unicode_confusable', // a segment whose NFKC form holds `/`, `\` or is a dot segment (`％２ｅ`, `．．`, `∕`)
  'invalid_query', // raw control, space, `#` or non-ASCII in the query
  'base_url_invalid', // the configured base URL is not an absolute http(s) URL without userinfo, query or fragment
  'containment', // the built URL escaped the base URL's origin or path (should be unreachable)
] as const;

export type PathRejectReason = (typeof PATH_REJECT_REASONS)[number];

export interface ResolveProxyTargetInput {
  /** The request target exactly as received, e.g. `/proxy/src1/v1/items?x=1`. */
  rawUrl: string;
  /** The source id the route matched; must appear verbatim after the prefix. */
  sourceId: string;
  /** The source's configured base URL, e.g. `https://api.example.com/base/`. */
  baseUrl: string;
  /** Route prefix; defaults to `/proxy/`. */
  prefix?: string;
}

/**
 * An upstream URL as placeUnderBase answers it: the parts a request to it reads, read only (the URL of a repeated
 * target is shared by the requests that name it, and frozen). Always http(s), beneath its base, with no credentials
 * and no fragment.
 */
export interface PlacedUrl {
  readonly href: string;
  readonly origin: string;
  readonly protocol: string;
  readonly hostname: string;
  readonly pathname: string;
  /** `?` and the query as forwarded, or '' without one. */
  readonly search: string;
}

export type ResolveProxyTargetResult =
  | {
      ok: true;
      /** Absolute upstream URL: base URL + remainder, beneath the base path; shared by the requests that name it (read only). */
      url: PlacedUrl;
      /** The remainder, fully percent-decoded, for role/policy matching; always starts with `/`. */
      path: string;
      /** The raw query string without `?` ('' when absent), preserved as received. */
      query: string;
      /** The path as further decoding layers would read it (levels 2.., distinct from `path`); role and policy must hold for each. */
      deeperPaths: readonly string[];
    }
  | { ok: false; code: 'invalid_path'; reason: PathRejectReason };

const reject = (reason: PathRejectReason): { ok: false; code: 'invalid_path'; reason: PathRejectReason } => ({ ok: false, code: 'invalid_path', reason });

// RFC 3986 pchar minus `;` (matrix params refused on purpose), plus `/` and `%` (its escape is checked separately),
// as a table by character code: the raw scan runs over every character of every proxied path.
const PATH_CHARS = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,=:@/%") PATH_CHARS[c.charCodeAt(0)] = 1;
const PERCENT = 0x25;

function isHexDigit(cp: number): boolean {
  return (cp >= 0x30 && cp <= 0x39) || (cp >= 0x41 && cp <= 0x46) || (cp >= 0x61 && cp <= 0x66);
}

/** Two hex digits at `i` (false past the end, as a truncated escape). */
function hexPairAt(s: string, i: number): boolean {
  return isHexDigit(s.charCodeAt(i)) && isHexDigit(s.charCodeAt(i + 1));
}
const SCHEME_LIKE = /^[A-Za-z][A-Za-z0-9+.-]*:/;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A request target that passed the source-independent checks (spec §4 step 1), ready to be placed under a base URL. */
export interface CheckedProxyPath {
  /** RFC 3986-normalized remainder for the upstream URL ('' when the target names the base itself). */
  readonly canonical: string;
  /** The remainder, fully percent-decoded, for role/policy matching; always starts with `/`. */
  readonly path: string;
  /** The raw query string without `?` ('' when absent), preserved as received. */
  readonly query: string;
  /** The path as further decoding layers would read it (levels 2.., each distinct from `path`); usually empty. */
  readonly deeperPaths: readonly string[];
}

export type CheckProxyPathResult = ({ ok: true } & CheckedProxyPath) | { ok: false; code: 'invalid_path'; reason: PathRejectReason };

/**
 * Step 1 of the proxy: every check that does not depend on the source (encoding, dot segments, traversal,
 * injection, bounds). Pure; never throws. `placeUnderBase` then applies the source's containment boundary.
 */
export function checkProxyPath(input: { rawUrl: string; sourceId: string; prefix?: string }): CheckProxyPathResult {
  const { rawUrl, sourceId } = input;
  const prefix = input.prefix ?? PROXY_PREFIX;
  if (!rawUrl.startsWith('/') || rawUrl.startsWith('//')) return reject('not_origin_form');

  const q = rawUrl.indexOf('?');
  const pathPart = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const query = q === -1 ? '' : rawUrl.slice(q + 1);
  if (pathPart.length > MAX_PATH_LENGTH) return reject('too_long');
  if (query.length > MAX_QUERY_LENGTH) return reject('query_too_long');

  const head = prefix + sourceId;
  if (sourceId === '' || !pathPart.startsWith(head)) return reject('source_mismatch');
  const remainder = pathPart.slice(head.length);
  if (remainder !== '' && remainder[0] !== '/') return reject('source_mismatch');

  const checked = checkedRemainders.get(remainder) ?? checkedRemainders.keep(remainder, checkRemainder(remainder));
  if (typeof checked === 'string') return reject(checked);

  const queryProblem = checkQuery(query);
  if (queryProblem !== null) return reject(queryProblem);
  return { ok: true, canonical: remainder === '' ? '' : checked.canonical, path: checked.decoded, query, deeperPaths: checked.deeper };
}

/** The source's base URL is the containment boundary (spec §4 rule 3): the upstream URL of a checked path beneath it. */
export function placeUnderBase(checked: CheckedProxyPath, baseUrl: string): ResolveProxyTargetResult {
  const { query } = checked;
  // A query the URL parser keeps as it is goes after the URL placed for the path alone: a stream of unique queries
  // (an agent paging, searching) places each path once instead of parsing every URL (docs/decisions/0028, "placing
  // the path").
  const plain = query === '' || !QUERY_NOT_PLAIN.test(query);
  const key = `${baseUrl}\u0000${checked.canonical}\u0000${plain ? '' : query}`;
  const placed = placedUrls.get(key) ?? placedUrls.keep(key, upstreamUrl(checked.canonical, plain ? '' : query, baseUrl));
  if (typeof placed === 'string') return reject(placed);
  const url = plain && query !== '' ? withQuery(placed, query) : placed;
  return { ok: true, url, path: checked.path, query, deeperPaths: checked.deeperPaths };
}

/**
 * A character the WHATWG URL parser would change or cut in the query of an http(s) URL: anything outside `!`–`~`, and
 * the special-query percent-encode set (`"`, `'`, `<`, `>`) and `#` within it. checkQuery refuses all but those four
 * before, but a query is checked here again rather than trusted: one that holds any goes through the parser. A query
 * without them is its URL's search as it stands.
 */
const QUERY_NOT_PLAIN = /[^\x21-\x7e]|["#'<>]/;

/** `placed` (no query of its own) with a query the parser would keep as it is. */
function withQuery(placed: PlacedUrl, query: string): PlacedUrl {
  const search = `?${query}`;
  // Its own request's: not shared, so not frozen.
  return { ...placed, href: placed.href + search, search };
}

/**
 * Upstream URLs already placed, by base URL, canonical path and a query the parser would encode (a plain query is
 * added after, withQuery), which alone decide it (a pure function): a
 * repeated request (every cache hit) does not parse its URL again (docs/decisions/0028, "placing the path"). Each
 * URL is shared by the requests that name it, so nothing may change one: it is read, never written. Bounded by
 * count and key length; cleared when full. The key is one-to-one: neither a canonical path nor a checked query holds
 * a NUL, so a NUL (which no valid base URL holds either) cannot move the boundary between the three.
 */
const placedUrls = new BoundedMemo<PlacedUrl | PathRejectReason>(256, 1_024);

function upstreamUrl(canonical: string, query: string, baseUrl: string): PlacedUrl | PathRejectReason {
  const base = parsedBase(baseUrl);
  if (base === null) return 'base_url_invalid';
  // Empty remainder means the base URL itself, exactly as configured (with or without its trailing slash).
  const upstreamPath = canonical === '' ? base.pathname : base.pathTrimmed + canonical;
  let url: URL;
  try {
    url = new URL(upstreamPath, base.origin);
  } catch {
    return 'containment';
  }
  // The setter drops one leading `?`: given its own, a query that begins with `?` is forwarded as received.
  if (query !== '') url.search = `?${query}`;

  // Defence in depth: whatever the checks above missed, the result must stay beneath the base.
  if (url.origin !== base.origin || url.username !== '' || url.password !== '' || url.hash !== '') return 'containment';
  if (url.pathname !== base.pathname && url.pathname !== base.pathTrimmed + '/' && !url.pathname.startsWith(base.pathTrimmed + '/')) {
    return 'containment';
  }
  return Object.freeze({ href: url.href, origin: url.origin, protocol: url.protocol, hostname: url.hostname, pathname: url.pathname, search: url.search });
}

/** Resolves a raw proxy request target against a source's base URL: checkProxyPath, then placeUnderBase. Pure; never throws. */
export function resolveProxyTarget(input: ResolveProxyTargetInput): ResolveProxyTargetResult {
  if (parsedBase(input.baseUrl) === null) return reject('base_url_invalid');
  const checked = checkProxyPath(input);
  if (!checked.ok) return checked;
  return placeUnderBase(checked, input.baseUrl);
}

interface ParsedBase {
  url: URL;
  /** `url.origin`, which a URL computes afresh on every read. */
  origin: string;
  /** The base pathname as configured (`/base/` or `/base`; `/` for a root base). */
  pathname: string;
  /** The base pathname without its trailing slash (`/base`; '' for a root base). */
  pathTrimmed: string;
}

/** Sources are few and their base URLs change rarely: parse each once, not per request (bounded all the same). */
const parsedBases = new BoundedMemo<ParsedBase | null>(10_000);

function parsedBase(raw: string): ParsedBase | null {
  // An invalid base is remembered too (null), so `??` would not do.
  const known = parsedBases.get(raw);
  return known !== undefined ? known : parsedBases.keep(raw, parseBaseUrl(raw));
}

function parseBaseUrl(raw: string): ParsedBase | null {
  // A source stored before the base URL rules tightened is refused here too (fail closed).
  if (baseUrlProblem(raw) !== null) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') return null;
  const pathname = url.pathname;
  return { url, origin: url.origin, pathname, pathTrimmed: pathname.endsWith('/') ? pathname.slice(0, -1) : pathname };
}

/**
 * Remainders already checked (checkRemainder, a pure function of the remainder alone): a repeated path (every cache
 * hit; every miss that differs only in its query) is not decoded and checked again. The answers are shared, so they
 * are frozen. Bounded as placedUrls is.
 */
const checkedRemainders = new BoundedMemo<Readonly<{ canonical: string; decoded: string; deeper: readonly string[] }> | PathRejectReason>(256, 1_024);

/** Validates the remainder; returns its canonical raw form (for the URL) and decoded form (for matching), or a reason. */
function checkRemainder(remainder: string): Readonly<{ canonical: string; decoded: string; deeper: readonly string[] }> | PathRejectReason {
  if (remainder === '' || remainder === '/') return Object.freeze({ canonical: remainder === '' ? '' : '/', decoded: '/', deeper: NO_DEEPER });

  // Raw characters first: the cheapest and most important filter.
  let escaped = false;
  for (let i = 0; i < remainder.length; i++) {
    const cp = remainder.charCodeAt(i);
    if (cp < 0x80 && PATH_CHARS[cp] === 1) {
      if (cp === PERCENT) {
        if (!hexPairAt(remainder, i + 1)) return 'invalid_percent_encoding';
        escaped = true;
      }
      continue;
    }
    if (cp < 0x20 || cp === 0x7f || (cp >= 0x80 && cp <= 0x9f)) return 'control_character';
    if (cp === 0x5c) return 'backslash';
    if (cp === 0x23) return 'fragment';
    if (cp === 0x3b) return 'matrix_parameter';
    return 'invalid_character';
  }

  const segments = remainder.slice(1).split('/');
  if (segments.length > MAX_SEGMENTS) return 'too_many_segments';
  const canonical: string[] = [];
  const decoded: string[] = [];
  // Per segment, its levels 2.. (only segments that nest escapes have any).
  const nested: (readonly string[])[] = [];
  let depth = 1;
  for (let s = 0; s < segments.length; s++) {
    const seg = segments[s]!;
    const last = s === segments.length - 1;
    if (seg === '') {
      if (last) {
        // A trailing slash is meaningful to many APIs and harmless.
        canonical.push('');
        decoded.push('');
        nested.push([]);
        continue;
      }
      return 'empty_segment';
    }
    const result = escaped && seg.includes('%') ? checkSegment(seg, s === 0) : checkPlainSegment(seg, s === 0);
    if (typeof result === 'string') return result;
    canonical.push(result.canonical);
    decoded.push(result.decoded);
    nested.push(result.deeper);
    depth = Math.max(depth, result.deeper.length + 1);
  }
  const deeper: string[] = [];
  // Level k of the path: every segment at its level k, or at its last level when it has fewer.
  for (let level = 2; level <= depth; level++) {
    deeper.push('/' + decoded.map((d, i) => nested[i]![Math.min(level, nested[i]!.length + 1) - 2] ?? d).join('/'));
  }
  return Object.freeze({ canonical: '/' + canonical.join('/'), decoded: '/' + decoded.join('/'), deeper: deeper.length === 0 ? NO_DEEPER : Object.freeze(deeper) });
}

const NO_DEEPER: readonly string[] = Object.freeze([]);

/**
 * A segment of a remainder without any `%`, after the raw scan: only ASCII pchars, so it is its own decoded and
 * canonical form, valid UTF-8, free of controls and NFKC-stable; what checkSegment would still refuse is checked here.
 */
function checkPlainSegment(seg: string, first: boolean): CheckedSegment | PathRejectReason {
  if (isDotLike(seg)) return 'dot_segment';
  if (first) {
    if (SCHEME_LIKE.test(seg)) return 'scheme_injection';
    if (seg.includes('@')) return 'authority_injection';
  }
  return { canonical: seg, decoded: seg, deeper: [] };
}

interface CheckedSegment {
  canonical: string;
  decoded: string;
  /** The segment at decoding levels 2.. (empty when level 1 holds no escape). */
  deeper: string[];
}

/** One decoding level: the byte an escape stands for, refused when it is a separator, a backslash, `;` or a control. */
function escapedByteProblem(byte: number): PathRejectReason | null {
  if (byte === 0x2f) return 'encoded_slash';
  if (byte === 0x5c) return 'backslash';
  if (byte === 0x3b) return 'matrix_parameter';
  if (byte < 0x20 || byte === 0x7f) return 'control_character';
  return null;
}

const ESCAPE = /%[0-9A-Fa-f]{2}/;

/**
 * Levels 2..MAX_DECODE_LEVELS of a segment whose level 1 is `decoded`: each level decodes the escapes the previous
 * one produced and is judged like level 1. An escape left after the last level is refused: nobody can say what
 * yet another layer would make of it.
 */
function deeperLevels(decoded: string, first: boolean): string[] | PathRejectReason {
  const levels: string[] = [];
  let current = decoded;
  for (let level = 2; level <= MAX_DECODE_LEVELS && ESCAPE.test(current); level++) {
    const bytes: number[] = [];
    for (let i = 0; i < current.length; i++) {
      if (current.charCodeAt(i) === PERCENT && hexPairAt(current, i + 1)) {
        const byte = Number.parseInt(current.slice(i + 1, i + 3), 16);
        const problem = escapedByteProblem(byte);
        if (problem !== null) return problem;
        bytes.push(byte);
        i += 2;
        continue;
      }
      // Literal characters of this level (ASCII or text decoded by an earlier level) keep their UTF-8 bytes.
      const cp = current.codePointAt(i)!;
      if (cp > 0xffff) i++;
      for (const b of Buffer.from(String.fromCodePoint(cp), 'utf8')) bytes.push(b);
    }
    let next: string;
    try {
      next = utf8.decode(Uint8Array.from(bytes));
    } catch {
      return 'invalid_utf8';
    }
    const problem = judgeDecoded(next, first);
    if (problem !== null) return problem;
    levels.push(next);
    current = next;
  }
  if (ESCAPE.test(current)) return 'encoding_too_deep';
  return levels;
}

/** The rule every decoding level of a segment must pass (after its escapes were vetted byte by byte). */
function judgeDecoded(decoded: string, first: boolean): PathRejectReason | null {
  for (const c of decoded) {
    const cp = c.codePointAt(0)!;
    if ((cp >= 0x80 && cp <= 0x9f) || cp === 0x2028 || cp === 0x2029) return 'control_character';
  }
  if (isDotLike(decoded)) return 'dot_segment';
  // Upstreams that apply compatibility normalization (IIS best-fit, NFKC in Python frameworks) would turn these into separators or dots.
  const nfkc = decoded.normalize('NFKC');
  if (nfkc !== decoded && (nfkc.includes('/') || nfkc.includes('\\') || isDotLike(nfkc) || nfkc.includes('%'))) return 'unicode_confusable';
  if (first) {
    if (SCHEME_LIKE.test(decoded)) return 'scheme_injection';
    if (decoded.includes('@')) return 'authority_injection';
  }
  return null;
}

function checkSegment(seg: string, first: boolean): CheckedSegment | PathRejectReason {
  const bytes: number[] = [];
  let canonical = '';
  for (let i = 0; i < seg.length; i++) {
    const ch = seg[i]!;
    if (ch !== '%') {
      bytes.push(ch.charCodeAt(0));
      canonical += ch;
      continue;
    }
    const byte = Number.parseInt(seg.slice(i + 1, i + 3), 16);
    i += 2;
    const problem = escapedByteProblem(byte);
    if (problem !== null) return problem;
    bytes.push(byte);
    // RFC 3986 §6.2.2: decode unreserved characters, upper-case the hex of the rest.
    canonical += isUnreserved(byte) ? String.fromCharCode(byte) : '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  }

  let decoded: string;
  try {
    decoded = utf8.decode(Uint8Array.from(bytes));
  } catch {
    return 'invalid_utf8';
  }
  const problem = judgeDecoded(decoded, first);
  if (problem !== null) return problem;
  const deeper = deeperLevels(decoded, first);
  if (typeof deeper === 'string') return deeper;
  return { canonical, decoded, deeper };
}

/** `.`, `..`, `...`, and forms Windows-style servers trim into those (`.. `, `..%20.`). */
function isDotLike(segment: string): boolean {
  return /^[.\s]*$/u.test(segment);
}

function isUnreserved(byte: number): boolean {
  return (
    (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte === 0x2d || byte === 0x2e || byte === 0x5f || byte === 0x7e
  );
}

function checkQuery(query: string): PathRejectReason | null {
  for (let i = 0; i < query.length; i++) {
    const cp = query.charCodeAt(i);
    // Raw controls split or smuggle requests; `#` would be cut by any URL parser; raw non-ASCII must be encoded.
    if (cp <= 0x20 || cp === 0x7f || cp >= 0x80 || cp === 0x23) return 'invalid_query';
  }
  return null;
}
