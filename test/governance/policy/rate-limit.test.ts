// Rate-limit strings of policy actions: accepted forms, rejected forms and the strictness order.
import { describe, expect, it } from 'vitest';
import { compareStrictness, parseRateLimit } from '../../../src/governance/policy/rate-limit.js';

describe('parseRateLimit', () => {
  const valid: [string, number, number][] = [
    ['100/minute', 100, 60],
    ['10/second', 10, 1],
    ['1000/hour', 1000, 3600],
    ['5000/day', 5000, 86_400],
    ['100/minutes', 100, 60],
    ['7/s', 7, 1],
    ['7/sec', 7, 1],
    ['7/secs', 7, 1],
    ['3/m', 3, 60],
    ['3/min', 3, 60],
    ['3/h', 3, 3600],
    ['3/d', 3, 86_400],
    ['300/15minutes', 300, 900],
    ['300 / 15 minutes', 300, 900],
    ['  20/Hour ', 20, 3600],
  ];
  it.each(valid)('%s → %i points per %i s', (text, points, durationSec) => {
    expect(parseRateLimit(text)).toEqual({ points, durationSec });
  });

  const invalid = ['', '100', '/minute', '0/minute', '-1/minute', '1.5/minute', '100/fortnight', '100/ms', '100/minute/2',
    'abc/second', '100/0minutes', '100/400days', '99999999999/second', '100 per minute', '100/mins!'];
  it.each(invalid)('rejects %j', (text) => {
    expect(parseRateLimit(text)).toBeNull();
  });
});

describe('compareStrictness', () => {
  it('orders by rate, then burst, then window', () => {
    const tenPerSec = { points: 10, durationSec: 1 };
    const hundredPerMin = { points: 100, durationSec: 60 };
    expect(compareStrictness(hundredPerMin, tenPerSec)).toBeLessThan(0);
    expect(compareStrictness(tenPerSec, hundredPerMin)).toBeGreaterThan(0);
    // Same rate: the smaller burst is stricter.
    expect(compareStrictness({ points: 1, durationSec: 1 }, { points: 60, durationSec: 60 })).toBeLessThan(0);
    expect(compareStrictness(tenPerSec, { ...tenPerSec })).toBe(0);
  });
});
