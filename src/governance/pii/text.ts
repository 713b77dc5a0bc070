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
// Shortest secret any secret detector accepts (an AWS key id is 20 characters).
const MIN_SECRET_LENGTH = 20;
const SECRET_GATE = /A(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|PKA|ROA|SCA)|gh[pousr]_|github_pat_|xox[abpr]-|AIza|-----BEGIN|eyJ|k_(?:live|test)_|[Bb]earer\s|[Ss]ecret|SECRET/;
// A whole ISO 8601 date or timestamp (the most common digit-heavy string in API data) holds no personal data by itself.
const ISO_DATETIME = /^\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:[.,]\d{1,9})?)?(?:Z|[+-]\d\d(?::?\d\d)?)?)?$/;

/** Pre-filter bits: each detector runs only when its gate bit is set. */
const AT = 1;
const DIGITS = 2;
const PLUS = 4;
const DOTS = 8;
const COLON = 16;
const SECRET = 32;
const ALWAYS = 64;

/**
 * The combined pre-filter: one pass over the characters counts what the
 * detectors need (`@`, digits, `+`, dots, colons), then at most two anchored
 * regex tests. Returns the gate bits; the digit count goes to `prefilterDigits`.
 */
let prefilterDigits = 0;
function prefilter(text: string): number {
  let digits = 0;
  let dots = 0;
  let colons = 0;
  let at = false;
  let plus = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) digits++;
    else if (c === 46) dots++;
    else if (c === 58) colons++;
    else if (c === 64) at = true;
    else if (c === 43) plus = true;
  }
  prefilterDigits = digits;
  let g = ALWAYS;
  if (at) g |= AT;
  if (colons >= 2) g |= COLON;
  if (digits >= 4) {
    if (digits >= 8 && text.length <= 35 && ISO_DATETIME.test(text)) return g;
    g |= DIGITS;
    if (plus) g |= PLUS;
    if (dots >= 3) g |= DOTS;
  }
  if (text.length >= MIN_SECRET_LENGTH && SECRET_GATE.test(text)) g |= SECRET;
  return g;
}

const GATE_BITS: Record<string, number> = { at: AT, digits: DIGITS, plus: PLUS, dots: DOTS, colon: COLON, secret: SECRET, always: ALWAYS };

export function gateBit(d: PiiDetector): number {
  return GATE_BITS[d.gate ?? 'always'] ?? ALWAYS;
}

/** A detector list prepared for scanning: gate bits and digit minimums read once. */
export interface DetectorSet {
  readonly detectors: readonly PiiDetector[];
  readonly bits: readonly number[];
  readonly minDigits: readonly number[];
  /** Whether a detector runs on every string (then no string may skip the detectors wholesale). */
  readonly anyAlways: boolean;
}

export function detectorSet(detectors: readonly PiiDetector[]): DetectorSet {
  const bits = detectors.map(gateBit);
  return { detectors, bits, minDigits: detectors.map((d) => d.minDigits ?? 0), anyAlways: bits.some((b) => b === ALWAYS) };
}

/**
 * All matches of the set in `text`, overlaps resolved (earliest start wins, then the longest, then detector order).
 * Percent-encoded text (`email=jane.doe%40example.com`, `%2B44%2020%207946%200958`) is also read decoded, up to
 * two levels, with each match mapped back onto the escapes it came from.
 */
export function findMatches(text: string, set: DetectorSet, keyHint?: string): PiiMatch[] {
  const found = findPlain(text, set, keyHint);
  if (text.length >= MIN_CANDIDATE_LENGTH && text.includes('%')) findEncoded(text, set, keyHint, found, PERCENT_LEVELS);
  return found.length > 1 ? resolveOverlaps(found) : found;
}

/** How many percent-decoding levels a string is read at (a URL inside a query parameter is the common second level). */
const PERCENT_LEVELS = 2;

function findEncoded(text: string, set: DetectorSet, keyHint: string | undefined, found: PiiMatch[], levels: number): void {
  const decoded = percentDecoded(text);
  if (decoded === null) return;
  const inner = findPlain(decoded.text, set, keyHint);
  if (levels > 1 && decoded.text.includes('%')) findEncoded(decoded.text, set, keyHint, inner, levels - 1);
  for (const m of inner) found.push({ start: decoded.map[m.start]!, end: decoded.map[m.end]!, type: m.type });
}

const isHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);

/**
 * `text` with every escape of a printable ASCII character decoded, and `map[i]` the offset in `text` where decoded
 * character `i` starts (`map[length]` is `text.length`); null when nothing was decoded.
 */
function percentDecoded(text: string): { text: string; map: number[] } | null {
  let out = '';
  const map: number[] = [];
  let any = false;
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) === 37 && i + 2 < text.length && isHex(text.charCodeAt(i + 1)) && isHex(text.charCodeAt(i + 2))) {
      const byte = Number.parseInt(text.slice(i + 1, i + 3), 16);
      if (byte >= 0x20 && byte <= 0x7e) {
        map.push(i);
        out += String.fromCharCode(byte);
        i += 2;
        any = true;
        continue;
      }
    }
    map.push(i);
    out += text[i];
  }
  map.push(text.length);
  return any ? { text: out, map } : null;
}

function findPlain(text: string, set: DetectorSet, keyHint: string | undefined): PiiMatch[] {
  if (text.length < MIN_CANDIDATE_LENGTH && !set.anyAlways) return [];
  const gates = prefilter(text);
  if (gates === ALWAYS && !set.anyAlways) return [];
  const digits = prefilterDigits;
  const found: PiiMatch[] = [];
  const { detectors, bits, minDigits } = set;
  for (let i = 0; i < detectors.length; i++) {
    if ((gates & bits[i]!) !== 0 && digits >= minDigits[i]!) detectors[i]!.find(text, found, keyHint);
  }
  return found;
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
