// The JSON nesting scan agrees with the real parser's nesting on generated documents, and ignores brackets inside strings.
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { jsonDeeperThan } from '../../src/util/json-depth.js';

function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (v !== null && typeof v === 'object') return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

describe('jsonDeeperThan', () => {
  test('agrees with the parsed depth of generated JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 0, max: 10 }), (value, max) => {
        const text = JSON.stringify(value);
        expect(jsonDeeperThan(text, max)).toBe(depthOf(JSON.parse(text)) > max);
      }),
      { numRuns: 500 },
    );
  });

  test('brackets and escaped quotes inside strings do not count', () => {
    expect(jsonDeeperThan(JSON.stringify({ a: '[[[[{{{{' }), 1)).toBe(false);
    expect(jsonDeeperThan(JSON.stringify({ a: 'x\\"[[[[' }), 1)).toBe(false);
    expect(jsonDeeperThan(JSON.stringify({ a: '\\' }) + '', 1)).toBe(false);
    expect(jsonDeeperThan('[[["\\"]"]]]', 3)).toBe(false);
    expect(jsonDeeperThan('[[["\\"]"]]]', 2)).toBe(true);
  });

  test('unbalanced or invalid text never throws', () => {
    expect(jsonDeeperThan(']]]]', 1)).toBe(false);
    expect(jsonDeeperThan('"unterminated [[[', 1)).toBe(false);
    expect(jsonDeeperThan('[[[', 2)).toBe(true);
  });
});
