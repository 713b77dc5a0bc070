// Scanning one string: the combined pre-filter, running the gated detectors, resolving overlapping matches and writing typed markers.
import type { PiiDetector, PiiMatch } from './detectors.js';

/** The marker that replaces a redacted value. */
export function marker(type: string): string {
  return `[REDACTED:${type}]`;
}

export const SCAN_FAILED = 'scan_failed';
export const COLUMN = 'column';

// Shortest value any detector accepts (`a@b.co`); shorter strings skip scanning entirely.
const MIN_CANDIDATE_LENGTH = 6;
const DIGIT_GATE = /\d[\d .()/-]{5}/;
const SECRET_GATE = /A(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|PKA|ROA|SCA)|gh[pousr]_|github_pat_|xox[abpr]-|AIza|-----BEGIN|eyJ|k_(?:live|test)_|[Bb]earer\s|[Ss]ecret|SECRET/;

/** What the pre-filter found: a bit per gate, so each string is tested once per gate at most. */
const enum Gate {
  At = 1,
  Digits = 2,
  Colon = 4,
  Secret = 8,
  Always = 16,
}

function gatesOf(text: string): number {
  let g = Gate.Always;
  if (text.indexOf('@') !== -1) g |= Gate.At;
  if (text.indexOf(':') !== -1) g |= Gate.Colon;
  if (DIGIT_GATE.test(text)) g |= Gate.Digits;
  if (SECRET_GATE.test(text)) g |= Gate.Secret;
  return g;
}

const GATE_BITS: Record<string, number> = { at: Gate.At, digits: Gate.Digits, colon: Gate.Colon, secret: Gate.Secret, always: Gate.Always };

export function gateBit(d: PiiDetector): number {
  return GATE_BITS[d.gate ?? 'always'] ?? Gate.Always;
}

/** A detector list prepared for scanning: gate bits computed once. */
export interface DetectorSet {
  readonly detectors: readonly PiiDetector[];
  readonly bits: readonly number[];
  /** Union of gates other than `always`: when none of them pass and no detector is `always`, the string is clean. */
  readonly anyAlways: boolean;
}

export function detectorSet(detectors: readonly PiiDetector[]): DetectorSet {
  const bits = detectors.map(gateBit);
  return { detectors, bits, anyAlways: bits.some((b) => b === Gate.Always) };
}

/** All matches of the set in `text`, overlaps resolved (earliest start wins, then the longest, then detector order). */
export function findMatches(text: string, set: DetectorSet, keyHint?: string): PiiMatch[] {
  if (text.length < MIN_CANDIDATE_LENGTH && !set.anyAlways) return [];
  const gates = gatesOf(text);
  if (gates === Gate.Always && !set.anyAlways) return [];
  const found: PiiMatch[] = [];
  const { detectors, bits } = set;
  for (let i = 0; i < detectors.length; i++) {
    if ((gates & bits[i]!) !== 0) detectors[i]!.find(text, found, keyHint);
  }
  return found.length > 1 ? resolveOverlaps(found) : found;
}

function resolveOverlaps(found: PiiMatch[]): PiiMatch[] {
  // Stable sort keeps detector order for identical spans.
  const sorted = found.map((m, i) => ({ m, i })).sort((a, b) => a.m.start - b.m.start || b.m.end - a.m.end || a.i - b.i);
  const out: PiiMatch[] = [];
  let lastEnd = -1;
  for (const { m } of sorted) {
    if (m.end <= m.start) continue;
    if (m.start >= lastEnd) {
      out.push(m);
      lastEnd = m.end;
    }
  }
  return out;
}

/** Replaces each match with its marker and counts by type into `byType`; returns the new text. */
export function applyMatches(text: string, matches: readonly PiiMatch[], byType: Record<string, number>): string {
  let out = '';
  let pos = 0;
  for (const m of matches) {
    out += text.slice(pos, m.start) + marker(m.type);
    pos = m.end;
    byType[m.type] = (byType[m.type] ?? 0) + 1;
  }
  return out + text.slice(pos);
}

/** UTF-8 length without encoding when the bound is clearly met or clearly exceeded. */
export function exceedsBytes(text: string, maxBytes: number): boolean {
  if (text.length > maxBytes) return true;
  if (text.length * 3 <= maxBytes) return false;
  return Buffer.byteLength(text, 'utf8') > maxBytes;
}
