// Path-attack table for resolveProxyTarget: every traversal and smuggling family is refused with its reason; legitimate targets map to the expected upstream URL.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PATH_REJECT_REASONS, resolveProxyTarget } from '../../src/governance/http-path.js';
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
