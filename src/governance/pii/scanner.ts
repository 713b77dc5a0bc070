// The personal-data scanner: bounded, iterative redaction of JSON values, text bodies and SQL result rows in off, fast and deep modes, failing closed.
import { CONTEXT_DETECTORS, FAST_DETECTORS, keyedType } from './detectors.js';
import type { PiiDetector } from './detectors.js';
import { FreeTextMatcher, keyContextType, NameMatcher, normalizeKey } from './keys.js';
import type { PathState } from './keys.js';
import { applyMatches, COLUMN, detectorSet, exceedsBytes, findMatches, marker, SCAN_FAILED } from './text.js';
import type { DetectorSet } from './text.js';

export type PiiMode = 'off' | 'fast' | 'deep';

export interface PiiScanOptions {
  mode: PiiMode;
  /** Column or key names (globs, case-insensitive) whose values are replaced whole by `[REDACTED:column]`, in every mode. */
  redactColumns?: readonly string[];
  /** Rows only: result columns replaced whole whatever their name (redaction by provenance, governance/sql/result-columns.ts). */
  forceColumns?: readonly boolean[];
}

export interface PiiScannerOptions {
  /** `pii.fast_enabled`: when false, a request for fast mode scans nothing (column redaction still applies). */
  fastEnabled?: boolean;
  /** `pii.deep_enabled`: when false, a request for deep mode runs fast mode. */
  deepEnabled?: boolean;
  /** `pii.free_text_fields`: key globs or JSON paths scanned with every detector in deep mode. */
  freeTextFields?: readonly string[];
  /** Deepest container nesting scanned (root = 0); a deeper container is replaced. Default 64. */
  maxDepth?: number;
  /** Values visited per JSON document; past it the whole document is replaced. Default 100,000. */
  maxNodes?: number;
  /** UTF-8 bytes per string value; a longer string is replaced. Default 1 MiB. */
  maxStringLength?: number;
  /** UTF-8 bytes per text body in `scanText`; a longer body is replaced. Default 10 MiB. */
  maxTextBytes?: number;
  /** Additional detectors, run in fast and deep mode after the built-in ones. */
  detectors?: readonly PiiDetector[];
}

interface Counts {
  redactions: number;
  byType: Record<string, number>;
  failedClosed: boolean;
  failures: string[];
}

export interface JsonScanResult extends Counts {
  /** A redacted deep copy; the input is never mutated. */
  value: unknown;
  /** The mode that ran after applying the scanner's enablement. */
  mode: PiiMode;
}

export interface TextScanResult extends Counts {
  text: string;
  mode: PiiMode;
}

export interface RowScanResult extends Counts {
  values: (string | null)[];
  mode: PiiMode;
}

export interface PiiScanner {
  scanJson(value: unknown, opts: PiiScanOptions): JsonScanResult;
  scanText(text: string, opts: PiiScanOptions): TextScanResult;
  redactRow(columns: readonly string[], values: readonly (string | null)[], opts: PiiScanOptions): RowScanResult;
  /** Compiles the per-column plan once for a result set, then redacts each row with it. */
  rowRedactor(columns: readonly string[], opts: PiiScanOptions): (values: readonly (string | null)[]) => RowScanResult;
  /** The mode a request for `mode` runs after the scanner's enablement (`pii.fast_enabled`, `pii.deep_enabled`). */
  effectiveMode(mode: PiiMode): PiiMode;
  /** The matches the scanner would redact in `text` (for corpus evaluation and dry runs). */
  detect(text: string, mode: Exclude<PiiMode, 'off'>): { start: number; end: number; type: string }[];
}

export interface PiiConfigSection {
  fast_enabled?: boolean;
  deep_enabled?: boolean;
  free_text_fields?: readonly string[];
  max_depth?: number;
  max_nodes?: number;
  max_string_bytes?: number;
}

/** Maps the `pii` configuration section onto scanner options. */
export function piiOptionsFromConfig(section: PiiConfigSection): PiiScannerOptions {
  const o: PiiScannerOptions = {};
  if (section.fast_enabled !== undefined) o.fastEnabled = section.fast_enabled;
  if (section.deep_enabled !== undefined) o.deepEnabled = section.deep_enabled;
  if (section.free_text_fields !== undefined) o.freeTextFields = section.free_text_fields;
  if (section.max_depth !== undefined) o.maxDepth = section.max_depth;
  if (section.max_nodes !== undefined) o.maxNodes = section.max_nodes;
  if (section.max_string_bytes !== undefined) o.maxStringLength = section.max_string_bytes;
  return o;
}

const MIB = 1024 * 1024;
// Card numbers stored as JSON numbers: 13+ digits is past any count or id range worth sparing.
const CARD_NUMBER_MIN = 1e12;

function positiveInt(name: string, v: number | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || v < 0) throw new TypeError(`createPiiScanner: ${name} must be a non-negative integer`);
  return v;
}

/** Per-container work item of the iterative traversal; `parent` and `key` rebuild a path only when one is needed. */
interface Task {
  src: object;
  holder: Record<string | number, unknown>;
  holderKey: string | number;
  depth: number;
  parent: Task | null;
  key: string | number;
  /** Free-text path automaton state at this container (deep mode with path patterns only). */
  path: PathState | null;
}

function pathOf(task: Task, last?: string | number): string {
  if (task.parent === null) return '$'; // the pseudo-container holding the root value
  const segs = segmentsOf(task);
  if (last !== undefined) segs.push(last);
  let s = '$';
  for (const k of segs) s += typeof k === 'number' ? `[${k}]` : /^[A-Za-z_$][\w$]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`;
  return s;
}

/** Keys from the root value down to `task` (the root value itself has no key). */
function segmentsOf(task: Task): (string | number)[] {
  const segs: (string | number)[] = [];
  for (let t: Task = task; t.parent !== null && t.parent.parent !== null; t = t.parent) segs.push(t.key);
  return segs.reverse();
}

export function createPiiScanner(options: PiiScannerOptions = {}): PiiScanner {
  const fastEnabled = options.fastEnabled ?? true;
  const deepEnabled = options.deepEnabled ?? true;
  const maxDepth = positiveInt('maxDepth', options.maxDepth, 64);
  const maxNodes = positiveInt('maxNodes', options.maxNodes, 100_000);
  const maxStringLength = positiveInt('maxStringLength', options.maxStringLength, MIB);
  const maxTextBytes = positiveInt('maxTextBytes', options.maxTextBytes, 10 * MIB);
  const extra = options.detectors ?? [];
  const fastSet = detectorSet([...FAST_DETECTORS, ...extra]);
  const fullSet = detectorSet([...FAST_DETECTORS, ...CONTEXT_DETECTORS, ...extra]);
  const freeText = new FreeTextMatcher(options.freeTextFields ?? []);
  const cardOnly = detectorSet(FAST_DETECTORS.filter((d) => d.type === 'card'));
  const keyedOnly = detectorSet(FAST_DETECTORS.filter((d) => d.type === 'keyed'));

  // Keys repeat across records: what the detectors find in each key name is worked out once (null: nothing).
  const keyScans = new Map<string, { key: string; types: string[] } | null>();
  /** A key holding personal data itself (`{"jane@example.com": {...}}`) gets the marker in its place; a key that cannot be scanned fails closed. */
  const scanKey = (key: string): { key: string; types: string[] } | null => {
    let r = keyScans.get(key);
    if (r === undefined) {
      if (exceedsBytes(key, maxStringLength)) r = { key: marker(SCAN_FAILED), types: [SCAN_FAILED] };
      else {
        try {
          const matches = findMatches(key, fastSet);
          if (matches.length === 0) r = null;
          else {
            const byType: Record<string, number> = {};
            r = { key: applyMatches(key, matches, byType), types: matches.map((m) => m.type) };
          }
        } catch {
          r = { key: marker(SCAN_FAILED), types: [SCAN_FAILED] };
        }
      }
      if (keyScans.size > 50_000) keyScans.clear();
      keyScans.set(key, r);
    }
    return r;
  };

  // Key names repeat across records: normalize and classify each once.
  const keyInfo = new Map<string, { norm: string; type: string | null }>();
  const infoOf = (key: string): { norm: string; type: string | null } => {
    let info = keyInfo.get(key);
    if (info === undefined) {
      const norm = normalizeKey(key);
      info = { norm, type: keyContextType(norm) };
      if (keyInfo.size > 50_000) keyInfo.clear();
      keyInfo.set(key, info);
    }
    return info;
  };

  const columnMatchers = new Map<string, NameMatcher>();
  const columnsOf = (globs: readonly string[] | undefined): NameMatcher | null => {
    if (globs === undefined || globs.length === 0) return null;
    const id = globs.join('\u0000');
    let m = columnMatchers.get(id);
    if (m === undefined) {
      m = new NameMatcher(globs);
      if (columnMatchers.size > 1_000) columnMatchers.clear();
      columnMatchers.set(id, m);
    }
    return m;
  };

  function effectiveMode(requested: PiiMode): PiiMode {
    if (requested === 'deep') return deepEnabled ? 'deep' : fastEnabled ? 'fast' : 'off';
    if (requested === 'fast') return fastEnabled ? 'fast' : 'off';
    if (requested !== 'off') throw new TypeError(`pii scan: unknown mode ${String(requested)}`);
    return 'off';
  }

  function newCounts(): Counts {
    return { redactions: 0, byType: {}, failedClosed: false, failures: [] };
  }

  function count(c: Counts, type: string): void {
    c.redactions++;
    c.byType[type] = (c.byType[type] ?? 0) + 1;
  }

  function failField(c: Counts, where: string, reason: string): string {
    count(c, SCAN_FAILED);
    c.failedClosed = true;
    if (c.failures.length < 100) c.failures.push(`${where}: ${reason}`);
    return marker(SCAN_FAILED);
  }

  // Why the last scanString call returned null; read by the caller, which knows where the string sits.
  let failure = '';

  /** Scans one string with `set`; null when a bound is hit or a detector throws (the caller fails the field closed). */
  function scanString(s: string, set: DetectorSet, keyHint: string | undefined, c: Counts): string | null {
    if (exceedsBytes(s, maxStringLength)) {
      failure = `string exceeds maxStringLength (${maxStringLength} bytes)`;
      return null;
    }
    let matches;
    try {
      matches = findMatches(s, set, keyHint);
    } catch (err) {
      failure = `detector failed (${err instanceof Error ? err.name : 'error'})`;
      return null;
    }
    if (matches.length === 0) return s;
    c.redactions += matches.length;
    return applyMatches(s, matches, c.byType);
  }

  function scanNumber(n: number, c: Counts, keyHint: string | undefined): unknown {
    // A bare number under a telling name (`"ssn": 123456789`, `"phone": 4155552671`) is read like its string form.
    if (keyHint !== undefined && Number.isSafeInteger(n) && n > 0 && keyedType(keyHint) !== null) {
      const keyed = findMatches(String(n), keyedOnly, keyHint);
      if (keyed.length > 0) {
        count(c, keyed[0]!.type);
        return marker(keyed[0]!.type);
      }
    }
    if (!(n >= CARD_NUMBER_MIN || n <= -CARD_NUMBER_MIN) || !Number.isSafeInteger(n)) return n;
    const digits = String(Math.abs(n));
    if (findMatches(digits, cardOnly).length === 0) return n;
    count(c, 'card');
    return marker('card');
  }

  /** The key a value is written under: the key itself, or its redacted form made unique among the keys already written. */
  function outputKey(key: string, dst: Record<string, unknown>, c: Counts): string {
    const scanned = scanKey(key);
    if (scanned === null) return key;
    for (const t of scanned.types) {
      if (t === SCAN_FAILED) c.failedClosed = true;
      count(c, t);
    }
    let out = scanned.key;
    for (let n = 2; Object.hasOwn(dst, out); n++) out = `${scanned.key} (${n})`;
    return out;
  }

  function scanJson(input: unknown, opts: PiiScanOptions): JsonScanResult {
    const mode = effectiveMode(opts.mode);
    const c = newCounts();
    const columns = columnsOf(opts.redactColumns);
    const deep = mode === 'deep';
    const scanning = mode !== 'off';
    const root: Record<string, unknown> = { v: input };
    let nodes = 0;

    /** Handles one value in a container; containers are queued, primitives are done here. */
    const visit = (child: unknown, holder: Record<string | number, unknown>, key: string | number, parent: Task, stack: Task[], keyHint: string | undefined, freeTextKey: boolean): void => {
      nodes++;
      if (typeof child === 'string') {
        if (!scanning || child.length === 0) {
          holder[key] = child;
          return;
        }
        const free = deep && (freeTextKey || (parent.path !== null && parent.path.step(String(key)).accept));
        holder[key] = scanString(child, free ? fullSet : fastSet, keyHint, c) ?? failField(c, pathOf(parent, key), failure);
      } else if (typeof child === 'object' && child !== null) {
        holder[key] = null; // keeps key order; the queued task fills it in
        let path = parent.path === null ? null : parent.path.step(String(key));
        if (path !== null && path.dead) path = null;
        stack.push({ src: child, holder, holderKey: key, depth: parent.depth + 1, parent, key, path });
      } else if (typeof child === 'number' && scanning) {
        holder[key] = scanNumber(child, c, keyHint);
      } else {
        holder[key] = child;
      }
    };

    const rootTask: Task = { src: root, holder: root, holderKey: 'v', depth: -1, parent: null, key: '$', path: null };
    const stack: Task[] = [];
    visit(input, root, 'v', rootTask, stack, undefined, false);
    if (stack.length === 1 && deep) stack[0]!.path = freeText.pathStart;

    while (stack.length > 0) {
      const task = stack.pop()!;
      if (nodes > maxNodes) break;
      if (task.depth > maxDepth) {
        task.holder[task.holderKey] = failField(c, pathOf(task), `nesting exceeds maxDepth (${maxDepth})`);
        continue;
      }
      const src = task.src;
      if (Array.isArray(src)) {
        const dst: unknown[] = new Array(src.length);
        task.holder[task.holderKey] = dst;
        const holder = dst as unknown as Record<number, unknown>;
        for (let i = 0; i < src.length && nodes <= maxNodes; i++) visit(src[i], holder, i, task, stack, undefined, false);
        continue;
      }
      const dst: Record<string, unknown> = {};
      task.holder[task.holderKey] = dst;
      const obj = src as Record<string, unknown>;
      for (const key of Object.keys(obj)) {
        if (nodes > maxNodes) break;
        const child = obj[key];
        const out = scanning ? outputKey(key, dst, c) : key;
        // JSON.parse makes `__proto__` an own key; an own data property keeps later writes from reaching the prototype setter.
        if (out === '__proto__') Object.defineProperty(dst, out, { value: null, writable: true, enumerable: true, configurable: true });
        if (columns !== null && columns.matches(key)) {
          nodes++;
          dst[out] = marker(COLUMN);
          count(c, COLUMN);
          continue;
        }
        if (!scanning) {
          visit(child, dst, out, task, stack, undefined, false);
          continue;
        }
        const info = infoOf(key);
        if (deep && info.type !== null && holdsData(child)) {
          nodes++;
          dst[out] = marker(info.type);
          count(c, info.type);
          continue;
        }
        visit(child, dst, out, task, stack, info.norm, deep && freeText.keys.matches(key));
      }
    }

    if (nodes > maxNodes) {
      const r = newCounts();
      failField(r, '$', `document exceeds maxNodes (${maxNodes})`);
      return { value: marker(SCAN_FAILED), mode, ...r };
    }
    return { value: root.v, mode, ...c };
  }

  function scanText(text: string, opts: PiiScanOptions): TextScanResult {
    const mode = effectiveMode(opts.mode);
    const c = newCounts();
    if (mode === 'off') return { text, mode, ...c };
    if (exceedsBytes(text, maxTextBytes)) {
      failField(c, 'body', `text exceeds maxTextBytes (${maxTextBytes} bytes)`);
      return { text: marker(SCAN_FAILED), mode, ...c };
    }
    let matches;
    try {
      matches = findMatches(text, mode === 'deep' ? fullSet : fastSet);
    } catch (err) {
      failField(c, 'body', `detector failed (${err instanceof Error ? err.name : 'error'})`);
      return { text: marker(SCAN_FAILED), mode, ...c };
    }
    c.redactions += matches.length;
    return { text: matches.length === 0 ? text : applyMatches(text, matches, c.byType), mode, ...c };
  }

  function rowRedactor(columns: readonly string[], opts: PiiScanOptions): (values: readonly (string | null)[]) => RowScanResult {
    const mode = effectiveMode(opts.mode);
    const redact = columnsOf(opts.redactColumns);
    // One plan per column: 'column' marker, a key-context type, or a detector set (null = leave as is).
    const plan = columns.map((name, i) => {
      if (opts.forceColumns?.[i] === true || (redact !== null && redact.matches(name))) return { kind: 'column' as const, type: COLUMN, hint: undefined, set: null };
      if (mode === 'off') return { kind: 'keep' as const, type: '', hint: undefined, set: null };
      const info = infoOf(name);
      if (mode === 'deep' && info.type !== null) return { kind: 'column' as const, type: info.type, hint: info.norm, set: null };
      const set = mode === 'deep' && freeText.keys.matches(name) ? fullSet : fastSet;
      return { kind: 'scan' as const, type: '', hint: info.norm, set };
    });
    return (values) => {
      if (values.length !== columns.length) throw new TypeError(`redactRow: ${values.length} values for ${columns.length} columns`);
      const c = newCounts();
      const out: (string | null)[] = new Array(values.length);
      for (let i = 0; i < values.length; i++) {
        const v = values[i]!;
        const p = plan[i]!;
        if (v === null || v === '' || p.kind === 'keep') out[i] = v;
        else if (p.kind === 'column') {
          out[i] = marker(p.type);
          count(c, p.type);
        } else out[i] = scanString(v, p.set!, p.hint, c) ?? failField(c, `column ${JSON.stringify(columns[i])}`, failure);
      }
      return { values: out, mode, ...c };
    };
  }

  return {
    effectiveMode,
    scanJson,
    scanText,
    rowRedactor,
    redactRow: (columns, values, opts) => rowRedactor(columns, opts)(values),
    detect: (text, mode) => findMatches(text, mode === 'deep' ? fullSet : fastSet),
  };
}

/** A value that carries data worth hiding under a personal-data key (not null, empty or a flag). */
function holdsData(v: unknown): boolean {
  if (v === null || v === undefined || v === '' || typeof v === 'boolean') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}
