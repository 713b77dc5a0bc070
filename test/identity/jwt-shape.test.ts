// Whether a bearer credential is read as a JWT (looksLikeJwt), with its header segments remembered: the same answers
// as reading every header afresh, whatever was seen before (docs/decisions/0011, "the hit with a JWT").
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { bearerJwt, looksLikeJwt, MAX_AGENT_JWT_LENGTH } from '../../src/identity/agent-jwt.js';

/** The rule as written before the memo: shape, then the first segment decoded as a JSON object with a string `alg`. */
function reference(token: string): boolean {
  if (token.length > MAX_AGENT_JWT_LENGTH || !/^[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*$/.test(token)) return false;
  try {
    const header: unknown = JSON.parse(Buffer.from(token.slice(0, token.indexOf('.')), 'base64url').toString('utf8'));
    return header !== null && typeof header === 'object' && typeof (header as { alg?: unknown }).alg === 'string';
  } catch {
    return false;
  }
}

const b64 = (v: string) => Buffer.from(v, 'utf8').toString('base64url');
const headers = fc.oneof(
  fc.constantFrom({ alg: 'RS256', kid: 'k1' }, { alg: 'ES256' }, { alg: 7 }, { typ: 'JWT' }, [1, 2], null, 'RS256', { alg: 'none', x: 'y'.repeat(900) }).map((h) => b64(JSON.stringify(h))),
  // Headers that share all but their last characters and differ in the answer.
  fc.tuple(fc.constantFrom('kid-0123456789abcdef', 'kid-0123456789abcdeg'), fc.constantFrom('"RS256"', '1', 'null', '"x"')).map(([kid, alg]) => b64(`{"kid":"${kid}","alg":${alg}}`)),
  fc.string({ unit: fc.constantFrom('A', 'b', '0', '-', '_', 'e', 'y', 'J'), minLength: 2, maxLength: 40 }),
  fc.constantFrom('eyJhbGciOiJSUzI1NiJ9', 'eyJhbGciOiJSUzI1NiJ9x', 'e', '', 'eyJhbGciOiJSUzI1NiJ9.'),
  // A header with its last character changed (most such are no longer JSON).
  fc.tuple(fc.constantFrom({ alg: 'RS256' }, { kid: 'k', alg: 'ES256' }, { alg: 'PS256', typ: 'at+jwt' }), fc.constantFrom('A', 'Q', 'g', 'w', '0', '9', '-', '_')).map(([h, c]) => b64(JSON.stringify(h)).slice(0, -1) + c),
);
const token = fc.tuple(headers, fc.constantFrom('eyJzdWIiOiJhIn0', 'x', 'payload', 'a.b'), fc.constantFrom('sig', '', '***', 'c'.repeat(9_000))).map(([h, p, s]) => `${h}.${p}.${s}`);

describe('looksLikeJwt', () => {
  it('answers as the rule read afresh, in any order and again', () => {
    fc.assert(
      fc.property(fc.array(token, { minLength: 1, maxLength: 30 }), (tokens) => {
        for (const t of [...tokens, ...tokens.slice().reverse()]) expect(looksLikeJwt(t), t.slice(0, 80)).toBe(reference(t));
      }),
      { numRuns: 1_000 },
    );
  });

  it('more headers than it remembers are read all the same', () => {
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 600; i++) {
        const withAlg = b64(JSON.stringify({ kid: `k${i}`, alg: 'RS256' }));
        const without = b64(JSON.stringify({ kid: `k${i}`, alg: i }));
        expect(looksLikeJwt(`${withAlg}.eyJzdWIiOiJhIn0.sig`)).toBe(true);
        expect(looksLikeJwt(`${without}.eyJzdWIiOiJhIn0.sig`)).toBe(false);
      }
    }
  });
});

describe('bearerJwt', () => {
  /** The rule as it was read in two passes: any bearer token of the JWT alphabet and dots, then looksLikeJwt's. */
  function twoPasses(header: string): string | null {
    if (header.length > 'Bearer '.length + MAX_AGENT_JWT_LENGTH) return null;
    const token = /^Bearer ([A-Za-z0-9_.-]+)$/i.exec(header)?.[1] ?? null;
    return token !== null && reference(token) ? token : null;
  }
  const prefixes = fc.constantFrom('Bearer ', 'bearer ', 'BEARER ', 'BeArEr ', 'Bearer  ', ' Bearer ', 'Bearer\t', 'Basic ', 'Bearer', '', 'Bearerx ');
  const suffixes = fc.constantFrom('', ' ', '\n', '.', '..', '=', 'é', '\u0000');
  const keys = fc.constantFrom('gh_live_0123456789abcdefghijklmnopqrstuvwxyzABCD', 'a.b', 'ab.cd.', 'ab.cd.ef.gh', '..', 'x'.repeat(MAX_AGENT_JWT_LENGTH + 1));

  it('answers as the bearer token read first and looksLikeJwt after, for any header', () => {
    fc.assert(
      fc.property(prefixes, fc.oneof(token, keys), suffixes, (prefix, credential, suffix) => {
        const header = `${prefix}${credential}${suffix}`;
        expect(bearerJwt(header), header.slice(0, 80)).toBe(twoPasses(header));
      }),
      { numRuns: 3_000 },
    );
  });

  it('is bounded by the longest JWT read, and reads no header that is not a string', () => {
    const jwt = `${b64(JSON.stringify({ alg: 'RS256' }))}.eyJzdWIiOiJhIn0.`;
    const longest = jwt + 'S'.repeat(MAX_AGENT_JWT_LENGTH - jwt.length);
    expect(bearerJwt(`Bearer ${longest}`)).toBe(longest);
    expect(bearerJwt(`Bearer ${longest}S`)).toBeNull();
    expect(bearerJwt(undefined)).toBeNull();
  });
});

describe('looksLikeJwt keeps no token', () => {
  it('the header segments it remembers do not hold the tokens they were cut from (a credential) in memory', () => {
    // A process of its own with --expose-gc: 200 tokens of ≈ 8 kB with distinct headers, then a collection. Kept
    // slices would hold ≈ 1.6 MB of tokens; copies hold ≈ 40 kB.
    const script = `
      import { looksLikeJwt } from ${JSON.stringify(new URL('../../src/identity/agent-jwt.ts', import.meta.url).pathname)};
      const b64 = (v) => Buffer.from(v).toString('base64url');
      const tail = 'S'.repeat(8_000);
      globalThis.gc(); globalThis.gc();
      const before = process.memoryUsage().heapUsed;
      let seen = 0;
      for (let i = 0; i < 200; i++) if (looksLikeJwt(b64(JSON.stringify({ alg: 'RS256', kid: 'key-' + i })) + '.eyJzdWIiOiJhIn0.' + tail + i)) seen++;
      globalThis.gc(); globalThis.gc();
      console.log(JSON.stringify({ seen, retained: process.memoryUsage().heapUsed - before }));
    `;
    const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    const { seen, retained } = JSON.parse(out.trim().split('\n').at(-1)!) as { seen: number; retained: number };
    expect(seen).toBe(200);
    expect(retained).toBeLessThan(800_000);
  });
});
