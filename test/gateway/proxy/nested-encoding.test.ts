// Nested percent-encoding through the real proxy (docs/proxy.md "Nested percent-encoding"): dot segments, separators and controls encoded 1..N times are refused before the upstream; harmless nested escapes reach it byte for byte; a policy holds for every decoding.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { resolveProxyTarget } from "../../../src/governance/http-path.js"; const MAX_DECODE_LEVELS = 4;
import { startWorld, type World } from '../../support/world.js';
import { startRecordingUpstream, type RecordingUpstream } from './support.js';

let world: World;
let up: RecordingUpstream;
let reader: { key: string };

const hex = (c: string, upper: boolean): string => {
  const h = c.charCodeAt(0).toString(16).padStart(2, '0');
  return '%' + (upper ? h.toUpperCase() : h);
};

/**
 * One more level of percent-encoding: `%` is always escaped (else the level would not nest), every other character
 * is escaped where `bits` says so. `force` escapes every character of the original target (the innermost level).
 */
function encodeOnce(s: string, bits: boolean[], upper: boolean, force = false): string {
  let out = '';
  for (const c of s) out += c === '%' || force || bits.shift() === true ? hex(c, upper) : c;
  return out;
}

function encodeLevels(s: string, levels: number, bits: boolean[], upper: boolean): string {
  let out = encodeOnce(s, bits, upper, true);
  for (let l = 2; l <= levels; l++) out = encodeOnce(out, bits, upper);
  return out;
}

const DANGEROUS = [
  { make: (e: string) => `${e}/admin`, inner: '.' },
  { make: (e: string) => `${e}/admin`, inner: '..' },
  { make: (e: string) => `a${e}b`, inner: '/' },
  { make: (e: string) => `a${e}b`, inner: '\\' },
  { make: (e: string) => `a${e}b`, inner: '\u0000' },
  { make: (e: string) => `a${e}b`, inner: '\n' },
  { make: (e: string) => `a${e}b`, inner: '\u007f' },
  { make: (e: string) => `a${e}b`, inner: ';' },
] as const;

const dangerous = fc.record({
  which: fc.integer({ min: 0, max: DANGEROUS.length - 1 }),
  levels: fc.integer({ min: 1, max: MAX_DECODE_LEVELS + 2 }),
  bits: fc.array(fc.boolean(), { minLength: 64, maxLength: 64 }),
  upper: fc.boolean(),
});

// Harmless names: characters with no structural meaning at any level, nested 2..MAX_DECODE_LEVELS times.
const HARMLESS_CHARS = [' ', '!', '$', '&', "'", '(', ')', '+', ',', '=', ':', '"', '<', '>', '[', ']', '{', '}', '|', '^', '`'];
const harmless = fc.record({
  name: fc.array(fc.constantFrom(...HARMLESS_CHARS, 'a', 'z', 'Q', '7', '-', '_'), { minLength: 1, maxLength: 8 }).map((a) => 'f' + a.join('') + 'x'),
  levels: fc.integer({ min: 2, max: MAX_DECODE_LEVELS }),
});

/** Escapes of a harmless name: every non-alphanumeric character escaped (upper-case hex), then nested. */
function harmlessTarget(name: string, levels: number): string {
  let out = '';
  for (const c of name) out += /[A-Za-z0-9_-]/.test(c) ? c : hex(c, true);
  for (let l = 2; l <= levels; l++) out = out.replaceAll('%', '%25');
  return out;
}

describe('nested percent-encoding: the path rule (pure)', () => {
  it('any encoding of a dot segment, separator, backslash or control at 1..N levels is refused', () => {
    fc.assert(
      fc.property(dangerous, ({ which, levels, bits, upper }) => {
        const d = DANGEROUS[which]!;
        const seg = d.make(encodeLevels(d.inner, levels, [...bits], upper));
        const r = resolveProxyTarget({ rawUrl: `/proxy/s/files/${seg}`, sourceId: 's', baseUrl: 'https://api.example.com/' });
        expect(r.ok, seg).toBe(false);
      }),
      { numRuns: 3000 },
    );
  });

  it('harmless nested escapes are allowed and kept byte for byte', () => {
    fc.assert(
      fc.property(harmless, ({ name, levels }) => {
        const seg = harmlessTarget(name, levels);
        const r = resolveProxyTarget({ rawUrl: `/proxy/s/files/${seg}`, sourceId: 's', baseUrl: 'https://api.example.com/' });
        expect(r.ok, seg).toBe(true);
        if (r.ok) expect(r.url.pathname).toBe(`/files/${seg}`);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('nested percent-encoding through the proxy', () => {
  beforeAll(async () => {
    up = await startRecordingUpstream();
    world = await startWorld({ privateSources: ['nest'], env: { SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
    await world.httpSource('nest', `${up.base}/base/`);
    reader = await world.agent('nest-reader', [{ source_id: 'nest', role_key: 'reader' }]);
    await world.policy({ name: 'no cache', conditions: { source_ids: ['nest'] }, actions: { effect: 'allow', cache: false } });
    await world.policy({ name: 'no admin', conditions: { source_ids: ['nest'], paths: ['/admin/**'] }, actions: { effect: 'deny' } });
  }, 60_000);

  afterAll(async () => {
    await world?.stop();
    await up?.close();
  });

  it('a double-encoded space in a file name reaches the upstream as sent', async () => {
    const res = await world.rawProxy(reader.key, 'GET', '/proxy/nest/files/my%2520file.txt');
    expect(res.status, res.text).toBe(200);
    expect(up.received.at(-1)!.path).toBe('/base/files/my%2520file.txt');
  });

  it('a triple-encoded dot segment is refused before the upstream', async () => {
    const before = up.received.length;
    const res = await world.rawProxy(reader.key, 'GET', '/proxy/nest/files/%25%32%35%32%65%25%32%35%32%65/secret');
    expect(res.status, res.text).toBe(400);
    expect(res.json).toMatchObject({ error: 'invalid_path' });
    expect(up.received.length).toBe(before);
  });

  it('a policy denial holds for the path a double-decoding upstream would read', async () => {
    const before = up.received.length;
    const plain = await world.rawProxy(reader.key, 'GET', '/proxy/nest/admin/users');
    expect(plain.status).toBe(403);
    const nested = await world.rawProxy(reader.key, 'GET', '/proxy/nest/%2561dmin/users');
    expect(nested.status, nested.text).toBe(403);
    expect(up.received.length).toBe(before);
  });

  it('generated dangerous encodings at 1..N levels answer 400 and never reach the upstream', async () => {
    await fc.assert(
      fc.asyncProperty(dangerous, async ({ which, levels, bits, upper }) => {
        const d = DANGEROUS[which]!;
        const seg = d.make(encodeLevels(d.inner, levels, [...bits], upper));
        const before = up.received.length;
        const res = await world.rawProxy(reader.key, 'GET', `/proxy/nest/files/${seg}`);
        expect(res.status, seg).toBe(400);
        expect(up.received.length).toBe(before);
      }),
      { numRuns: 80 },
    );
  });

  it('generated harmless nested names answer 200 and reach the upstream byte for byte', async () => {
    await fc.assert(
      fc.asyncProperty(harmless, async ({ name, levels }) => {
        const seg = harmlessTarget(name, levels);
        const res = await world.rawProxy(reader.key, 'GET', `/proxy/nest/files/${seg}`);
        expect(res.status, `${seg} → ${res.text}`).toBe(200);
        expect(up.received.at(-1)!.path).toBe(`/base/files/${seg}`);
      }),
      { numRuns: 60 },
    );
  });
});
