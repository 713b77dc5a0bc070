// Which base URLs an HTTP source may have: only spellings every URL parser reads the same way (WHATWG URL, RFC 3986 parsers, undici, the upstream's own); each refusal says why.
//
// The base URL is the proxy's containment boundary (spec §4 "HTTP proxy" rule 3) and the egress target. A
// spelling that two parsers read differently — WHATWG turns `\` into `/`, drops tabs and newlines, reads
// `127.1` as `127.0.0.1`, takes `http:host` as `http://host/` — lets the admin who registers it, or an attacker
// who can influence it, point the gateway somewhere other than what the registration shows. So the raw text is
// judged before any parser normalizes it, and what is accepted must survive a WHATWG round trip unchanged.

/** Longest accepted base URL. */
export const MAX_BASE_URL_LENGTH = 2048;

const SCHEME = /^(https?):\/\//i;
// RFC 3986 pchar minus `;` (matrix parameters are refused on proxy paths too), plus `/` and `%` (escapes are checked below).
const PATH_CHAR = /^[A-Za-z0-9\-._~!$&'()*+,=:@/%]*$/;
const HOST_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const DOTTED_QUAD = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const IPV6_LITERAL = /^\[[0-9A-Fa-f:.]+\]$/;

/**
 * Why `raw` is not an acceptable base URL, or null when it is: an absolute http(s) URL with a plain host, an
 * optional port and a path, nothing a second parser could read another way.
 */
export function baseUrlProblem(raw: string): string | null {
  if (raw.length === 0) return 'must not be empty';
  if (raw.length > MAX_BASE_URL_LENGTH) return `must be at most ${MAX_BASE_URL_LENGTH} characters`;
  for (let i = 0; i < raw.length; i++) {
    const cp = raw.charCodeAt(i);
    // WHATWG strips leading and trailing C0 and spaces and deletes tabs and newlines anywhere; other parsers keep or reject them.
    if (cp <= 0x20 || cp === 0x7f) return 'must not contain whitespace or control characters';
    if (cp > 0x7e) return 'must be ASCII (write an internationalized host in its xn-- form and percent-encode the path)';
  }
  // WHATWG reads `\` as `/` in http(s) URLs (`https://evil.example\@api.example/` has host evil.example there, api.example elsewhere).
  if (raw.includes('\\')) return 'must not contain a backslash';
  if (raw.startsWith('//')) return 'must not be scheme-relative: start with http:// or https://';
  const scheme = SCHEME.exec(raw);
  if (scheme === null) {
    if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(raw)) return /^https?:/i.test(raw) ? 'must spell the scheme as http:// or https:// (two slashes, then the host)' : 'must use the http or https scheme';
    return 'must be an absolute URL starting with http:// or https://';
  }
  if (raw.includes('#')) return 'must not contain a fragment (#)';
  if (raw.includes('?')) return 'must not contain a query (?)';

  const rest = raw.slice(scheme[0].length);
  const slash = rest.indexOf('/');
  const authority = slash === -1 ? rest : rest.slice(0, slash);
  const path = slash === -1 ? '' : rest.slice(slash);
  const problem = authorityProblem(authority) ?? pathProblem(path);
  if (problem !== null) return problem;

  // What is left must be exactly what WHATWG makes of it, up to case, a default port and an empty path.
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not a valid URL';
  }
  const expected = expectedHref(scheme[1]!.toLowerCase(), authority, path);
  if (url.href !== expected) return `is read differently by URL parsers (as ${url.href})`;
  return null;
}

function authorityProblem(authority: string): string | null {
  if (authority.length === 0) return 'must name a host after the scheme';
  if (authority.includes('@')) return 'must not contain credentials (user:password@); use token or token_ref';
  if (authority.includes('%')) return authority.startsWith('[') ? 'must not contain an IPv6 zone identifier' : 'must not percent-encode the host';
  let host = authority;
  let port: string | null = null;
  if (authority.startsWith('[')) {
    const close = authority.indexOf(']');
    if (close === -1) return 'has an unterminated IPv6 literal';
    host = authority.slice(0, close + 1);
    const after = authority.slice(close + 1);
    if (after !== '') {
      if (!after.startsWith(':')) return 'has characters after the IPv6 literal';
      port = after.slice(1);
    }
    if (!IPV6_LITERAL.test(host)) return 'has an invalid IPv6 literal';
  } else {
    const colon = authority.indexOf(':');
    if (colon !== -1) {
      host = authority.slice(0, colon);
      port = authority.slice(colon + 1);
    }
    const hostProblem = regNameProblem(host);
    if (hostProblem !== null) return hostProblem;
  }
  if (port !== null && !/^[1-9]\d{0,4}$/.test(port)) return 'must have a port of 1 to 65535 digits without leading zeros, or none';
  if (port !== null && Number(port) > 65535) return 'must have a port of at most 65535';
  return null;
}

function regNameProblem(host: string): string | null {
  if (host.length === 0) return 'must name a host after the scheme';
  if (host.length > 253) return 'has a host name longer than 253 characters';
  if (host.endsWith('.')) return 'must not end the host with a dot';
  const labels = host.split('.');
  const last = labels[labels.length - 1]!;
  // A numeric last label makes WHATWG read the host as an IPv4 address (`127.1`, `0x7f.1`, `2130706433`, `0177.0.0.1`); others read a name.
  if (/^(?:\d+|0x[0-9a-f]*)$/i.test(last)) {
    return DOTTED_QUAD.test(host) ? null : 'must write an IPv4 address as four decimal parts without leading zeros (a.b.c.d)';
  }
  for (const label of labels) if (!HOST_LABEL.test(label)) return 'must have a host of letters, digits, hyphens and dots';
  return null;
}

function pathProblem(path: string): string | null {
  if (path === '') return null;
  if (!PATH_CHAR.test(path)) return 'has a path character that must be percent-encoded';
  if (path.includes('@')) return "must not contain '@' in the path (some parsers read what precedes it as credentials)";
  if (path.startsWith('//') || path.includes('//')) return 'must not contain an empty path segment (//)';
  for (const seg of path.split('/')) {
    let decoded: string;
    if (/%(?![0-9A-Fa-f]{2})/.test(seg)) return 'has a malformed percent-escape in the path';
    try {
      decoded = decodeURIComponent(seg);
    } catch {
      return 'has a percent-escape in the path that is not UTF-8';
    }
    if (/^[.\s]+$/.test(decoded)) return 'must not contain a dot segment (. or ..) in the path, in any encoding';
    if (decoded !== seg && hasStructuralChar(decoded)) return 'must not percent-encode a separator, backslash, percent sign or control character in the path';
  }
  return null;
}

/** A character an escape must not hide in a base path: a separator, a backslash, a percent sign (nesting) or a control. */
function hasStructuralChar(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f || c === 0x2f || c === 0x5c || c === 0x3b || c === 0x25) return true;
  }
  return false;
}

/** What WHATWG serializes an accepted base URL to: lower-case scheme and host, no default port, `/` for an empty path. */
function expectedHref(scheme: string, authority: string, path: string): string {
  let host = authority.toLowerCase();
  const defaultPort = scheme === 'https' ? ':443' : ':80';
  if (host.endsWith(defaultPort)) host = host.slice(0, -defaultPort.length);
  return `${scheme}://${host}${path === '' ? '/' : path}`;
}
