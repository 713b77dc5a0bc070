// The proxy path-attack table: raw request targets with the expected resolution, shared by the unit test of resolveProxyTarget and the route-level test.
import type { PathRejectReason } from '../../../src/governance/http-path.js';

export const DEFAULT_SOURCE_ID = 'src1';
export const DEFAULT_BASE_URL = 'https://api.example.com/base/';

export interface PathCase {
  name: string;
  /** Raw request target as sent on the wire. */
  rawUrl: string;
  /** Defaults to DEFAULT_SOURCE_ID. */
  sourceId?: string;
  /** Defaults to DEFAULT_BASE_URL. */
  baseUrl?: string;
  expect:
    | { ok: true; url: string; path: string; query?: string }
    | { ok: false; reason: PathRejectReason };
}

const ok = (url: string, path: string, query?: string): PathCase['expect'] => (query === undefined ? { ok: true, url, path } : { ok: true, url, path, query });
const no = (reason: PathRejectReason): PathCase['expect'] => ({ ok: false, reason });
const B = 'https://api.example.com/base';

/**
 * Rows a route-level test can send as-is. Some raw targets (absolute-form, raw controls, raw non-ASCII)
 * are refused by Node's HTTP parser before any route runs; `wireSafe: false` marks them so a route test
 * can skip them or expect the parser's 400.
 */
export const pathCases: (PathCase & { wireSafe?: false })[] = [
  // ---- allowed: shapes of a legitimate remainder
  { name: 'simple nested path', rawUrl: '/proxy/src1/v1/items', expect: ok(`${B}/v1/items`, '/v1/items') },
  { name: 'deeply nested path', rawUrl: '/proxy/src1/a/b/c/d/e', expect: ok(`${B}/a/b/c/d/e`, '/a/b/c/d/e') },
  { name: 'query preserved as-is', rawUrl: '/proxy/src1/v1/items?x=1&y=two', expect: ok(`${B}/v1/items?x=1&y=two`, '/v1/items', 'x=1&y=two') },
  { name: 'query with encoded chars kept raw', rawUrl: '/proxy/src1/search?q=a%20b%2Fc&z=%00', expect: ok(`${B}/search?q=a%20b%2Fc&z=%00`, '/search', 'q=a%20b%2Fc&z=%00') },
  { name: 'empty query', rawUrl: '/proxy/src1/v1?', expect: ok(`${B}/v1`, '/v1', '') },
  { name: 'trailing slash kept', rawUrl: '/proxy/src1/v1/items/', expect: ok(`${B}/v1/items/`, '/v1/items/') },
  { name: 'encoded space', rawUrl: '/proxy/src1/files/my%20file.txt', expect: ok(`${B}/files/my%20file.txt`, '/files/my file.txt') },
  { name: 'unicode é encoded', rawUrl: '/proxy/src1/caf%C3%A9', expect: ok(`${B}/caf%C3%A9`, '/café') },
  { name: 'lower-case hex canonicalised', rawUrl: '/proxy/src1/caf%c3%a9', expect: ok(`${B}/caf%C3%A9`, '/café') },
  { name: 'encoded unreserved decoded (policy sees admin)', rawUrl: '/proxy/src1/%61dmin/x', expect: ok(`${B}/admin/x`, '/admin/x') },
  { name: 'dots inside a name', rawUrl: '/proxy/src1/v1/file.tar.gz', expect: ok(`${B}/v1/file.tar.gz`, '/v1/file.tar.gz') },
  { name: 'dot prefix name', rawUrl: '/proxy/src1/.well-known/openid', expect: ok(`${B}/.well-known/openid`, '/.well-known/openid') },
  { name: 'encoded dot inside a name', rawUrl: '/proxy/src1/v1/a%2eb', expect: ok(`${B}/v1/a.b`, '/v1/a.b') },
  { name: 'colon in a later segment (custom method)', rawUrl: '/proxy/src1/v1/jobs/7:cancel', expect: ok(`${B}/v1/jobs/7:cancel`, '/v1/jobs/7:cancel') },
  { name: '@ in a later segment', rawUrl: '/proxy/src1/users/@me', expect: ok(`${B}/users/@me`, '/users/@me') },
  { name: 'sub-delims allowed', rawUrl: "/proxy/src1/a!$&'()*+,=b", expect: ok(`${B}/a!$&'()*+,=b`, "/a!$&'()*+,=b") },
  { name: 'encoded reserved kept encoded upstream', rawUrl: '/proxy/src1/a%2Bb%3Fc%23d', expect: ok(`${B}/a%2Bb%3Fc%23d`, '/a+b?c#d') },
  { name: 'literal percent (not double encoding)', rawUrl: '/proxy/src1/100%25', expect: ok(`${B}/100%25`, '/100%') },
  { name: 'double-encoded space in a file name, forwarded as sent', rawUrl: '/proxy/src1/files/my%2520file.txt', expect: ok(`${B}/files/my%2520file.txt`, '/files/my%20file.txt') },
  { name: 'triple-encoded é in a file name, forwarded as sent', rawUrl: '/proxy/src1/caf%2525C3%2525A9', expect: ok(`${B}/caf%2525C3%2525A9`, '/caf%25C3%25A9') },
  { name: 'double-encoded dot inside a name', rawUrl: '/proxy/src1/v1/a%252eb', expect: ok(`${B}/v1/a%252eb`, '/v1/a%2eb') },
  { name: 'empty remainder is the base itself', rawUrl: '/proxy/src1', expect: ok(`${B}/`, '/') },
  { name: 'empty remainder with query', rawUrl: '/proxy/src1?x=1', expect: ok(`${B}/?x=1`, '/', 'x=1') },
  { name: 'lone slash is the base itself', rawUrl: '/proxy/src1/', expect: ok(`${B}/`, '/') },
  { name: 'base without trailing slash, nested', rawUrl: '/proxy/src1/v1/items', baseUrl: 'https://api.example.com/base', expect: ok(`${B}/v1/items`, '/v1/items') },
  { name: 'base without trailing slash, empty remainder', rawUrl: '/proxy/src1', baseUrl: 'https://api.example.com/base', expect: ok(`${B}`, '/') },
  { name: 'base without trailing slash, lone slash', rawUrl: '/proxy/src1/', baseUrl: 'https://api.example.com/base', expect: ok(`${B}/`, '/') },
  { name: 'root base with slash', rawUrl: '/proxy/src1/v1', baseUrl: 'https://api.example.com/', expect: ok('https://api.example.com/v1', '/v1') },
  { name: 'root base without slash', rawUrl: '/proxy/src1/v1', baseUrl: 'https://api.example.com', expect: ok('https://api.example.com/v1', '/v1') },
  { name: 'root base, empty remainder', rawUrl: '/proxy/src1', baseUrl: 'https://api.example.com', expect: ok('https://api.example.com/', '/') },
  { name: 'base with port and http', rawUrl: '/proxy/src1/x', baseUrl: 'http://10.0.0.5:8080/api/v2/', expect: ok('http://10.0.0.5:8080/api/v2/x', '/x') },
  { name: 'other source id', rawUrl: '/proxy/billing-api/v1/invoices', sourceId: 'billing-api', expect: ok(`${B}/v1/invoices`, '/v1/invoices') },
  { name: 'deep base path', rawUrl: '/proxy/src1/items', baseUrl: 'https://api.example.com/a/b/c/', expect: ok('https://api.example.com/a/b/c/items', '/items') },

  // ---- dot segments in every spelling
  { name: 'literal ..', rawUrl: '/proxy/src1/../etc/passwd', expect: no('dot_segment') },
  { name: 'literal .. after a name', rawUrl: '/proxy/src1/v1/../../admin', expect: no('dot_segment') },
  { name: 'literal .', rawUrl: '/proxy/src1/./v1', expect: no('dot_segment') },
  { name: 'trailing ..', rawUrl: '/proxy/src1/v1/..', expect: no('dot_segment') },
  { name: 'encoded %2e%2e', rawUrl: '/proxy/src1/%2e%2e/admin', expect: no('dot_segment') },
  { name: 'encoded %2E%2E upper', rawUrl: '/proxy/src1/%2E%2E/admin', expect: no('dot_segment') },
  { name: 'mixed .%2e', rawUrl: '/proxy/src1/.%2e/admin', expect: no('dot_segment') },
  { name: 'mixed %2e.', rawUrl: '/proxy/src1/%2e./admin', expect: no('dot_segment') },
  { name: 'single %2e', rawUrl: '/proxy/src1/%2e/admin', expect: no('dot_segment') },
  { name: 'triple dots', rawUrl: '/proxy/src1/.../admin', expect: no('dot_segment') },
  { name: 'dots with trailing space (Windows trims)', rawUrl: '/proxy/src1/..%20/admin', expect: no('dot_segment') },
  { name: 'double-encoded %252e', rawUrl: '/proxy/src1/%252e%252e/admin', expect: no('dot_segment') },
  { name: 'double-encoded %252E upper', rawUrl: '/proxy/src1/%252E/admin', expect: no('dot_segment') },
  { name: 'triple-encoded %25252e', rawUrl: '/proxy/src1/%25252e%25252e/admin', expect: no('dot_segment') },
  { name: 'triple-encoded, split escapes %25%32%35%32%65', rawUrl: '/proxy/src1/%25%32%35%32%65%25%32%35%32%65/admin', expect: no('dot_segment') },
  { name: 'double-encoded, split escape %252%65', rawUrl: '/proxy/src1/%252%65%252%65/admin', expect: no('dot_segment') },
  { name: 'quadruple-encoded dot', rawUrl: '/proxy/src1/%2525252e/admin', expect: no('dot_segment') },
  { name: 'five levels of encoding exceed the bound', rawUrl: '/proxy/src1/a%252525252eb', expect: no('encoding_too_deep') },
  { name: 'double-encoded overlong dot', rawUrl: '/proxy/src1/%25c0%25ae/admin', expect: no('invalid_utf8') },
  { name: 'double-encoded scheme in the first segment', rawUrl: '/proxy/src1/https%253A/x', expect: no('scheme_injection') },
  { name: 'Tomcat ..;/ traversal', rawUrl: '/proxy/src1/..;/admin', expect: no('matrix_parameter') },

  // ---- encoded separators and backslashes
  { name: 'encoded slash %2f', rawUrl: '/proxy/src1/v1%2f..%2fadmin', expect: no('encoded_slash') },
  { name: 'encoded slash %2F upper', rawUrl: '/proxy/src1/a%2Fb', expect: no('encoded_slash') },
  { name: 'double-encoded slash %252f', rawUrl: '/proxy/src1/a%252fb', expect: no('encoded_slash') },
  { name: 'triple-encoded slash %25252F', rawUrl: '/proxy/src1/a%25252Fb', expect: no('encoded_slash') },
  { name: 'encoded backslash %5c', rawUrl: '/proxy/src1/..%5cadmin', expect: no('backslash') },
  { name: 'encoded backslash %5C upper', rawUrl: '/proxy/src1/a%5Cb', expect: no('backslash') },
  { name: 'double-encoded backslash %255c', rawUrl: '/proxy/src1/a%255cb', expect: no('backslash') },
  { name: 'double-encoded NUL %2500', rawUrl: '/proxy/src1/a%2500b', expect: no('control_character') },
  { name: 'triple-encoded LF', rawUrl: '/proxy/src1/a%25250ab', expect: no('control_character') },
  { name: 'double-encoded matrix parameter', rawUrl: '/proxy/src1/admin%253bx/y', expect: no('matrix_parameter') },
  { name: 'raw backslash', rawUrl: '/proxy/src1/a\\..\\admin', expect: no('backslash') },
  { name: 'raw backslash authority \\\\host', rawUrl: '/proxy/src1/\\\\evil.com/x', expect: no('backslash') },

  // ---- control characters and NUL
  { name: 'encoded NUL', rawUrl: '/proxy/src1/file%00.json', expect: no('control_character') },
  { name: 'encoded LF', rawUrl: '/proxy/src1/a%0aHost:evil', expect: no('control_character') },
  { name: 'encoded CR', rawUrl: '/proxy/src1/a%0Db', expect: no('control_character') },
  { name: 'encoded tab', rawUrl: '/proxy/src1/a%09b', expect: no('control_character') },
  { name: 'encoded DEL', rawUrl: '/proxy/src1/a%7fb', expect: no('control_character') },
  { name: 'encoded C1 control (U+0085)', rawUrl: '/proxy/src1/a%C2%85b', expect: no('control_character') },
  { name: 'raw NUL', rawUrl: '/proxy/src1/a\u0000b', expect: no('control_character'), wireSafe: false },
  { name: 'raw LF', rawUrl: '/proxy/src1/a\nb', expect: no('control_character'), wireSafe: false },
  { name: 'raw control in query', rawUrl: '/proxy/src1/a?x=1\r\nHost: evil', expect: no('invalid_query'), wireSafe: false },
  { name: 'raw tab in query', rawUrl: '/proxy/src1/a?x=\t', expect: no('invalid_query'), wireSafe: false },

  // ---- overlong UTF-8 and malformed percent-encoding
  { name: 'overlong 2-byte dot %c0%ae', rawUrl: '/proxy/src1/%c0%ae%c0%ae/admin', expect: no('invalid_utf8') },
  { name: 'overlong 3-byte dot %e0%80%ae', rawUrl: '/proxy/src1/%e0%80%ae%e0%80%ae/admin', expect: no('invalid_utf8') },
  { name: 'overlong slash %c0%af', rawUrl: '/proxy/src1/a%c0%afb', expect: no('invalid_utf8') },
  { name: 'lone continuation byte', rawUrl: '/proxy/src1/a%80b', expect: no('invalid_utf8') },
  { name: 'UTF-16 surrogate in UTF-8', rawUrl: '/proxy/src1/%ed%a0%80', expect: no('invalid_utf8') },
  { name: 'truncated multibyte', rawUrl: '/proxy/src1/caf%C3', expect: no('invalid_utf8') },
  { name: 'malformed %zz', rawUrl: '/proxy/src1/a%zzb', expect: no('invalid_percent_encoding') },
  { name: 'truncated %2', rawUrl: '/proxy/src1/a%2', expect: no('invalid_percent_encoding') },
  { name: 'bare %', rawUrl: '/proxy/src1/a%', expect: no('invalid_percent_encoding') },
  { name: 'half-hex %g1', rawUrl: '/proxy/src1/%g1', expect: no('invalid_percent_encoding') },

  // ---- unicode confusables
  { name: 'fullwidth dots', rawUrl: '/proxy/src1/%EF%BC%8E%EF%BC%8E/admin', expect: no('unicode_confusable') },
  { name: 'fullwidth solidus', rawUrl: '/proxy/src1/a%EF%BC%8Fb', expect: no('unicode_confusable') },
  { name: 'fullwidth percent-2e', rawUrl: '/proxy/src1/%EF%BC%85%EF%BC%92%EF%BD%85', expect: no('unicode_confusable') },

  // ---- scheme, authority and absolute-URL smuggling
  { name: 'scheme as first segment', rawUrl: '/proxy/src1/http://evil.com/x', expect: no('scheme_injection') },
  { name: 'scheme with single slash', rawUrl: '/proxy/src1/http:/evil.com', expect: no('scheme_injection') },
  { name: 'javascript: first segment', rawUrl: '/proxy/src1/javascript:alert(1)', expect: no('scheme_injection') },
  { name: 'encoded colon scheme', rawUrl: '/proxy/src1/https%3A/evil.com', expect: no('scheme_injection') },
  { name: '//host authority injection', rawUrl: '/proxy/src1//evil.com/x', expect: no('empty_segment') },
  { name: 'empty segment in the middle', rawUrl: '/proxy/src1/v1//items', expect: no('empty_segment') },
  { name: 'userinfo @ trick', rawUrl: '/proxy/src1/@evil.com/x', expect: no('authority_injection') },
  { name: 'user@host first segment', rawUrl: '/proxy/src1/user@evil.com', expect: no('authority_injection') },
  { name: 'absolute-form target', rawUrl: 'http://evil.com/proxy/src1/x', expect: no('not_origin_form'), wireSafe: false },
  { name: 'absolute-form https target', rawUrl: 'https://api.example.com/base/x', expect: no('not_origin_form'), wireSafe: false },
  { name: 'protocol-relative target', rawUrl: '//evil.com/proxy/src1/x', expect: no('not_origin_form') },
  { name: 'asterisk-form target', rawUrl: '*', expect: no('not_origin_form'), wireSafe: false },
  { name: 'authority-form target', rawUrl: 'evil.com:443', expect: no('not_origin_form'), wireSafe: false },
  { name: 'fragment in target', rawUrl: '/proxy/src1/a#frag', expect: no('fragment'), wireSafe: false },
  { name: 'fragment in query', rawUrl: '/proxy/src1/a?x=1#frag', expect: no('invalid_query'), wireSafe: false },

  // ---- matrix parameters (decided: refused)
  { name: 'matrix parameter', rawUrl: '/proxy/src1/admin;jsessionid=1/x', expect: no('matrix_parameter') },
  { name: 'encoded matrix parameter %3b', rawUrl: '/proxy/src1/admin%3bx/y', expect: no('matrix_parameter') },

  // ---- source prefix
  { name: 'source id mismatch', rawUrl: '/proxy/other/v1', expect: no('source_mismatch') },
  { name: 'source id as prefix of a longer one', rawUrl: '/proxy/src10/v1', expect: no('source_mismatch') },
  { name: 'encoded source id', rawUrl: '/proxy/src%31/v1', expect: no('source_mismatch') },
  { name: 'double slash before source', rawUrl: '/proxy//src1/v1', expect: no('source_mismatch') },

  // ---- raw characters outside pchar
  { name: 'raw space', rawUrl: '/proxy/src1/a b', expect: no('invalid_character'), wireSafe: false },
  { name: 'raw non-ASCII', rawUrl: '/proxy/src1/café', expect: no('invalid_character'), wireSafe: false },
  { name: 'raw pipe', rawUrl: '/proxy/src1/a|b', expect: no('invalid_character') },
  { name: 'raw angle brackets', rawUrl: '/proxy/src1/<script>', expect: no('invalid_character') },
  { name: 'raw non-ASCII in query', rawUrl: '/proxy/src1/a?q=café', expect: no('invalid_query'), wireSafe: false },

  // ---- bounds
  { name: 'path over 8 KiB', rawUrl: '/proxy/src1/' + 'a'.repeat(8200), expect: no('too_long') },
  { name: 'path at the bound', rawUrl: '/proxy/src1/' + 'a'.repeat(8192 - '/proxy/src1/'.length), expect: ok(`${B}/` + 'a'.repeat(8192 - '/proxy/src1/'.length), '/' + 'a'.repeat(8192 - '/proxy/src1/'.length)) },
  { name: 'query over 8 KiB', rawUrl: '/proxy/src1/a?' + 'q'.repeat(8200), expect: no('query_too_long') },
  { name: 'too many segments', rawUrl: '/proxy/src1' + '/a'.repeat(129), expect: no('too_many_segments') },
  { name: 'segments at the bound', rawUrl: '/proxy/src1' + '/a'.repeat(128), expect: ok(B + '/a'.repeat(128), '/a'.repeat(128)) },

  // ---- configured base URL
  { name: 'base URL with userinfo refused', rawUrl: '/proxy/src1/x', baseUrl: 'https://u:p@api.example.com/', expect: no('base_url_invalid') },
  { name: 'base URL not http(s)', rawUrl: '/proxy/src1/x', baseUrl: 'file:///etc/', expect: no('base_url_invalid') },
  { name: 'base URL not absolute', rawUrl: '/proxy/src1/x', baseUrl: '/relative/', expect: no('base_url_invalid') },
];
