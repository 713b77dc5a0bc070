// Audit ids and timestamps: the fast UUIDv7 and ISO formatters give exactly what the slow, obvious ones give.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { assertValidEntry, entryTimeMs, isoTimestamp, newAuditId } from '../../src/audit/entry.js';
import { makeEntry } from './support.js';

const UUID_V7 = /^([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('isoTimestamp', () => {
  it('is toISOString for every millisecond, across seconds, centuries and five-digit years', () => {
    const edges = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, -1, -999, -1000, -1001, 1_795_000_000_123, 253_402_300_799_999, 253_402_300_800_000, 8.64e15, -8.64e15];
    for (const ms of edges) expect(isoTimestamp(ms), String(ms)).toBe(new Date(ms).toISOString());
    fc.assert(
      fc.property(fc.oneof(fc.integer({ min: -8.64e15, max: 8.64e15 }), fc.double({ min: -4e12, max: 4e12, noNaN: true })), (ms) => {
        expect(isoTimestamp(ms)).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 20_000 },
    );
  });

  it('stays right when consecutive calls alternate between seconds', () => {
    const now = Date.now();
    for (const ms of [now, now + 1000, now, now - 1, now + 1, now + 999, now - 1000]) expect(isoTimestamp(ms)).toBe(new Date(ms).toISOString());
  });
});

describe('newAuditId', () => {
  it('is a UUIDv7 carrying the millisecond it was made in', () => {
    for (const ms of [0, 1, Date.now(), 2 ** 48 - 1]) {
      const id = newAuditId(ms);
      const m = UUID_V7.exec(id);
      expect(m, id).not.toBeNull();
      expect(parseInt(m![1]! + m![2]!, 16)).toBe(ms);
    }
  });

  it('never repeats, and sorts by millisecond', () => {
    const ids = new Set<string>();
    const base = Date.now();
    let last = '';
    for (let i = 0; i < 50_000; i++) {
      const id = newAuditId(base + Math.floor(i / 100));
      expect(id).toMatch(UUID_V7);
      ids.add(id);
      if (i % 100 === 0) {
        expect(id.slice(0, 13) > last.slice(0, 13)).toBe(true);
        last = id;
      }
    }
    expect(ids.size).toBe(50_000);
  });

  it('spends its random digits evenly: every variant digit and every hex digit appears', () => {
    const variants = new Set<string>();
    const digits = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      const id = newAuditId();
      variants.add(id[19]!);
      for (const c of id.slice(24)) digits.add(c);
    }
    expect([...variants].sort()).toEqual(['8', '9', 'a', 'b']);
    expect(digits.size).toBe(16);
  });
});

describe('entry timestamps', () => {
  it('refuses a day a month does not have, which Date.parse alone rolls over and PostgreSQL refuses', () => {
    const at = (ts: string) => () => assertValidEntry({ ...makeEntry(), ts, id: newAuditId(Date.parse(ts) || 0) });
    // A valid timestamp of the same second first: the check must not take "same second" for "same date".
    expect(at('2026-03-02T00:00:00.000Z')).not.toThrow();
    for (const ts of ['2026-02-30T00:00:00.000Z', '2026-04-31T00:00:00.500Z', '2025-02-29T12:00:00.000Z', '2026-13-01T00:00:00.000Z', '2026-01-01T24:00:00.000Z', '2026-01-01T00:60:00.000Z', '2026-01-01T00:00:60.000Z', '2026-01-01 00:00:00.000Z', '2026-01-01T00:00:00Z']) {
      expect(at(ts), ts).toThrow(/invalid ts/);
    }
    expect(at('2028-02-29T23:59:59.999Z')).not.toThrow();
    expect(at('2028-02-29T23:59:59.001Z')).not.toThrow();
  });

  it('reads a timestamp as the pattern and the round trip through Date do, within a second found valid and outside it', () => {
    const reference = (v: string) => {
      if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(v)) return Number.NaN;
      const ms = Date.parse(v);
      return Number.isNaN(ms) || new Date(ms).toISOString() !== v ? Number.NaN : ms;
    };
    const char = fc.constantFrom('0', '5', '9', 'Z', 'z', '/', ':', ' ', '\u0663', '.', '-');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253_402_300_799_000 }), fc.array(char, { minLength: 0, maxLength: 6 }).map((a) => a.join('')), (ms, tail) => {
        const valid = new Date(ms).toISOString();
        // The valid timestamp first, so the next one shares its second (the fast path), then a variant of it.
        expect(entryTimeMs(valid)).toBe(ms);
        const variant = valid.slice(0, 20) + tail;
        expect(entryTimeMs(variant)).toEqual(reference(variant));
        const elsewhere = valid.slice(0, 19) + tail;
        expect(entryTimeMs(elsewhere)).toEqual(reference(elsewhere));
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses an id that does not hold the entry\'s time (the store finds an entry by it: getAuditEntry)', () => {
    const e = makeEntry({ ts: '2026-11-28T06:30:00.123Z' });
    expect(() => assertValidEntry(e)).not.toThrow();
    expect(() => assertValidEntry({ ...e, id: newAuditId(Date.parse(e.ts) + 1) })).toThrow(/invalid id$/);
    expect(() => assertValidEntry({ ...e, ts: '2026-11-28T06:30:00.122Z' })).toThrow(/invalid id$/);
    expect(() => assertValidEntry({ ...e, id: newAuditId(Date.parse(e.ts) - 86_400_000) })).toThrow(/invalid id$/);
  });
});
