// Path-attack table for resolveProxyTarget: every traversal and smuggling family is refused with its reason; legitimate targets map to the expected upstream URL.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PATH_REJECT_REASONS, placeUnderBase, resolveProxyTarget } from '../../src/governance/http-path.js';
import { DEFAULT_BASE_URL, DEFAULT_SOURCE_ID, pathCases } from '../gateway/proxy/path-table.js';

describe('resolveProxyTarget: path-attack table', () => {
  it('has at least 60 rows, both outcomes, only known reasons', () => {
    expect(pathCases.length).toBeGreaterThanOrEqual(60);
    expect(pathCases.filter((c) => c.expect.ok).length).toBeGreaterThanOrEqual(20);
    expect(pathCases.filter((c) => !c.expect.ok).length).toBeGreaterThanOrEqual(40);
    for (const c of pathCases) if (!c.expect.ok) expect(PATH_REJECT_REASONS).toContain(c.expect.reason);
    expect(new Set(pathCases.map((c) => c.name)).size).toBe(pathCases.length);
  });

  it.each(pathCases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const result = resolveProxyTarget({ rawUrl: c.rawUrl, sourceId: c.sourceId ?? DEFAULT_SOURCE_ID, baseUrl: c.baseUrl ?? DEFAULT_BASE_URL });
    if (c.expect.ok) {
      expect(result).toMatchObject({ ok: true, path: c.expect.path });
      if (!result.ok) return;
      expect(result.url.href).toBe(c.expect.url);
      if (c.expect.query !== undefined) expect(result.query).toBe(c.expect.query);
    } else {
      expect(result).toEqual({ ok: false, code: 'invalid_path', reason: c.expect.reason });
    }
  });
});

describe('resolveProxyTarget: containment property', () => {
  const base = new URL(DEFAULT_BASE_URL);
  // Arbitrary strings of URL-ish characters and escapes: whatever is accepted stays beneath the base.
  const piece = fc.constantFrom('a', 'B', '.', '..', '/', '%2e', '%2E', '%2f', '%5c', '%25', '%c0%ae', '%00', ';', ':', '@', '?', '#', '\\', '%20', '%C3%A9', '~', '-', '_', 'http:', '//');
  it('accepted targets never leave the base origin or path, and never hold a dot segment', () => {
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 24 }), (parts) => {
        const r = resolveProxyTarget({ rawUrl: '/proxy/src1/' + parts.join(''), sourceId: 'src1', baseUrl: DEFAULT_BASE_URL });
        if (!r.ok) return;
        expect(r.url.origin).toBe(base.origin);
        expect(r.url.pathname.startsWith('/base/')).toBe(true);
        expect(r.path.startsWith('/')).toBe(true);
        expect(r.path.split('/').some((s) => s === '.' || s === '..')).toBe(false);
        // What the upstream decodes is what policy matched.
        expect(decodeURIComponent(r.url.pathname.slice('/base'.length))).toBe(r.path);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('placeUnderBase: a target placed again answers as the first time', () => {
  // Upstream URLs are remembered by base URL, canonical path and query, and checked remainders by remainder
  // (docs/decisions/0028, "placing the path").
  const bases = [DEFAULT_BASE_URL, 'https://other.example:8443/v2', 'http://10.0.0.7/', 'ftp://not-http.example/'];
  const piece = fc.constantFrom('a', 'B', '/', '%2e', '%41', '%25', ':', '@', '~', '-', '_', '%C3%A9', '..', ';');
  const query = fc.constantFrom('', '?', '?B', '?a=1', '?a=2', '?a=1&b=%20', '?x=%2e%2e', '?q=' + 'z'.repeat(1_100));
  const target = fc.record({ base: fc.constantFrom(...bases), parts: fc.array(piece, { maxLength: 8 }), query });
  const expected = (t: { base: string; parts: string[]; query: string }) => {
    const r = resolveProxyTarget({ rawUrl: '/proxy/src1/' + t.parts.join('') + t.query, sourceId: 'src1', baseUrl: t.base });
    return r.ok ? { href: r.url.href, path: r.path, query: r.query, deeper: [...r.deeperPaths] } : { reason: r.reason };
  };

  it('the same answer, whatever was placed in between, and each beneath its own base', () => {
    fc.assert(
      fc.property(fc.array(target, { minLength: 1, maxLength: 40 }), (targets) => {
        const first = targets.map(expected);
        // Again, in reverse order: every answer the same as the first, for its own base and query.
        const again = targets.slice().reverse().map(expected).reverse();
        expect(again).toEqual(first);
        // And each against what the request itself says, not against another answer of the memo: its own base,
        // its own path (what policy matched) and its own query.
        targets.forEach((t, i) => {
          const r = first[i]!;
          if (r.href === undefined) return;
          const base = new URL(t.base);
          const url = new URL(r.href);
          const basePath = base.pathname.endsWith('/') ? base.pathname.slice(0, -1) : base.pathname;
          expect(url.origin).toBe(base.origin);
          expect(url.pathname.startsWith(basePath)).toBe(true);
          expect(decodeURIComponent(url.pathname.slice(basePath.length)) || '/').toBe(r.path);
          expect(url.search).toBe(t.query === '?' ? '' : t.query);
        });
      }),
      { numRuns: 500 },
    );
  });

  it('a query goes where the URL parser would put it, whichever characters it holds', () => {
    // Every character checkQuery lets through, those the parser percent-encodes (`"`, `'`, `<`, `>`) among them: a
    // plain query is added after the URL placed for the path alone, any other is placed with the parser.
    const printable = fc.integer({ min: 0x21, max: 0x7e }).filter((c) => c !== 0x23).map((c) => String.fromCharCode(c));
    const anyQuery = fc.oneof(fc.array(printable, { maxLength: 12 }).map((a) => a.join('')), fc.constantFrom('a=1', "q='x'", 'a=<b>', 'x="y"&z=%22', '??', '%zz'));
    fc.assert(
      fc.property(fc.constantFrom(...bases), fc.array(piece, { maxLength: 6 }), anyQuery, (base, parts, q) => {
        const rawPath = '/proxy/src1/' + parts.join('');
        const withQ = resolveProxyTarget({ rawUrl: `${rawPath}?${q}`, sourceId: 'src1', baseUrl: base });
        const alone = resolveProxyTarget({ rawUrl: rawPath, sourceId: 'src1', baseUrl: base });
        if (!alone.ok) return void expect(withQ).toEqual(alone);
        expect(withQ.ok).toBe(true);
        if (!withQ.ok) return;
        const parsed = new URL(alone.url.href);
        // As received: the setter drops one leading `?`, so a query that begins with one is given its own.
        if (q !== '') parsed.search = `?${q}`;
        const { href, origin, protocol, hostname, pathname, search } = parsed;
        expect({ ...withQ.url }).toEqual({ href, origin, protocol, hostname, pathname, search });
        expect(withQ.query).toBe(q);
        expect(withQ.path).toBe(alone.path);
      }),
      { numRuns: 2_000 },
    );
  });

  it('a query that reached placeUnderBase without checkQuery is still placed as the parser places it, never raw', () => {
    // checkProxyPath refuses these before; placeUnderBase does not rely on it.
    for (const q of ['a b', 'a\tb', 'x#y', 'é=1', 'a\u0000', '\u2028', 'ok=1&"x"', '?lead']) {
      const r = placeUnderBase({ canonical: '/x', path: '/x', query: q, deeperPaths: [] }, DEFAULT_BASE_URL);
      const parsed = new URL('/base/x', DEFAULT_BASE_URL);
      parsed.search = `?${q}`;
      expect(r.ok && { href: r.url.href, search: r.url.search }).toEqual({ href: parsed.href, search: parsed.search });
    }
  });

  it('more targets than it remembers, and a key too long to remember, are placed all the same', () => {
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 2_500; i++) {
        const r = resolveProxyTarget({ rawUrl: `/proxy/src1/item?n=${i}`, sourceId: 'src1', baseUrl: DEFAULT_BASE_URL });
        expect(r.ok && r.url.href).toBe(`${new URL(DEFAULT_BASE_URL).origin}/base/item?n=${i}`);
      }
    }
    const long = 'p'.repeat(1_500);
    const once = resolveProxyTarget({ rawUrl: `/proxy/src1/${long}`, sourceId: 'src1', baseUrl: DEFAULT_BASE_URL });
    const twice = resolveProxyTarget({ rawUrl: `/proxy/src1/${long}`, sourceId: 'src1', baseUrl: DEFAULT_BASE_URL });
    expect(once.ok && twice.ok && once.url.href === twice.url.href && once.url.pathname === `/base/${long}`).toBe(true);
    expect(resolveProxyTarget({ rawUrl: '/proxy/src1/x', sourceId: 'src1', baseUrl: 'ftp://not-http.example/' })).toEqual({ ok: false, code: 'invalid_path', reason: 'base_url_invalid' });
  });
});
