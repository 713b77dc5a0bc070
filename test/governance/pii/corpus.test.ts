// Corpus evaluation of the fast detectors: prints precision and recall per type and fails below full recall or the precision floor.
import { describe, expect, it } from 'vitest';
import { createPiiScanner } from '../../../src/governance/pii/index.js';
import { CORPUS, NEGATIVE_CASES, POSITIVE_CASES } from './corpus.js';

/** Precision floor, per type and overall; the corpus currently measures 1.0, the floor leaves room for honest additions. */
const PRECISION_FLOOR = 0.95;

interface Tally {
  tp: number;
  fn: number;
  fp: number;
}

function evaluate(): { perType: Map<string, Tally>; misses: string[]; falsePositives: string[] } {
  const scanner = createPiiScanner();
  const perType = new Map<string, Tally>();
  const tally = (t: string): Tally => {
    let v = perType.get(t);
    if (v === undefined) perType.set(t, (v = { tp: 0, fn: 0, fp: 0 }));
    return v;
  };
  const misses: string[] = [];
  const falsePositives: string[] = [];
  for (const c of CORPUS) {
    const found = scanner.detect(c.text, 'fast').map((m) => ({ type: m.type, value: c.text.slice(m.start, m.end) }));
    for (const e of c.expect) {
      if (found.some((f) => f.type === e.type && f.value === e.value)) tally(e.type).tp++;
      else {
        tally(e.type).fn++;
        misses.push(`${e.type}: ${JSON.stringify(e.value)} in ${JSON.stringify(c.text.slice(0, 80))}`);
      }
    }
    for (const f of found) {
      if (!c.expect.some((e) => e.type === f.type && e.value === f.value)) {
        tally(f.type).fp++;
        falsePositives.push(`${f.type}: ${JSON.stringify(f.value)} in ${JSON.stringify(c.text.slice(0, 80))}`);
      }
    }
  }
  return { perType, misses, falsePositives };
}

const ratio = (a: number, b: number): number => (b === 0 ? 1 : a / b);

describe('personal-data corpus', () => {
  const { perType, misses, falsePositives } = evaluate();
  const all: Tally = { tp: 0, fn: 0, fp: 0 };
  const lines: string[] = [];
  for (const [type, t] of [...perType].sort(([a], [b]) => a.localeCompare(b))) {
    all.tp += t.tp;
    all.fn += t.fn;
    all.fp += t.fp;
    lines.push(`${type.padEnd(16)} positives ${String(t.tp + t.fn).padStart(3)}  precision ${ratio(t.tp, t.tp + t.fp).toFixed(3)}  recall ${ratio(t.tp, t.tp + t.fn).toFixed(3)}`);
  }
  lines.push(`${'overall'.padEnd(16)} positives ${String(all.tp + all.fn).padStart(3)}  precision ${ratio(all.tp, all.tp + all.fp).toFixed(3)}  recall ${ratio(all.tp, all.tp + all.fn).toFixed(3)}`);
  lines.push(`(${POSITIVE_CASES.length} positive texts, ${NEGATIVE_CASES.length} near-miss negatives; thresholds: recall 1.000, precision >= ${PRECISION_FLOOR})`);
  console.log(`personal-data corpus (fast detectors)\n${lines.join('\n')}`);
  if (misses.length > 0) console.log(`missed:\n  ${misses.join('\n  ')}`);
  if (falsePositives.length > 0) console.log(`false positives:\n  ${falsePositives.join('\n  ')}`);

  it('has at least ten positives for every detector type', () => {
    const small = [...perType].filter(([, t]) => t.tp + t.fn < 10 && t.tp + t.fn > 0).map(([type]) => type);
    expect(small).toEqual([]);
    expect(perType.size).toBeGreaterThanOrEqual(15);
  });

  it('finds every positive (recall 1.0)', () => {
    expect(misses).toEqual([]);
    for (const [, t] of perType) expect(ratio(t.tp, t.tp + t.fn)).toBe(1);
  });

  it(`keeps precision at or above ${PRECISION_FLOOR} per type and overall`, () => {
    for (const [type, t] of perType) expect({ type, precision: ratio(t.tp, t.tp + t.fp) }).toEqual({ type, precision: expect.toSatisfy((p: number) => p >= PRECISION_FLOOR) });
    expect(ratio(all.tp, all.tp + all.fp)).toBeGreaterThanOrEqual(PRECISION_FLOOR);
  });

  it('redacts every positive through scanText with its typed marker', () => {
    const scanner = createPiiScanner();
    for (const c of POSITIVE_CASES) {
      const r = scanner.scanText(c.text, { mode: 'fast' });
      for (const e of c.expect) {
        expect(r.text).not.toContain(e.value);
        expect(r.text).toContain(`[REDACTED:${e.type}]`);
      }
      expect(r.redactions).toBe(c.expect.length);
    }
  });

  it('leaves every negative unchanged', () => {
    const scanner = createPiiScanner();
    for (const c of NEGATIVE_CASES) expect(scanner.scanText(c.text, { mode: 'fast' }).text).toBe(c.text);
  });
});
