// The format of a COPY … TO STDOUT as its options fix it (text, CSV, binary; delimiter, NULL, quote, escape, header), read from the parse tree, and the codec of one text or CSV field.
// @see https://www.postgresql.org/docs/current/sql-copy.html (Parameters, File Formats)

export type CopyFormatKind = 'text' | 'csv' | 'binary';

export interface CopyFormat {
  readonly kind: CopyFormatKind;
  /** One ASCII byte (PostgreSQL accepts a single one-byte character). */
  readonly delimiter: number;
  /** The NULL string as it appears in the stream. */
  readonly null: Buffer;
  /**
   * True when the statement chose its own NULL string. In text format a value equal to it is written the same as a
   * NULL, so such fields are treated as values (scanned, and replaced in a redacted column) instead of being waved
   * through as NULLs; CSV quotes such a value, so there an unquoted NULL string is always a NULL.
   */
  readonly nullChosen: boolean;
  readonly header: boolean;
  readonly quote: number;
  readonly escape: number;
}

/** A COPY option as the parser gives it (a DefElem): its name and its argument node, if any. */
export interface CopyOption {
  readonly name: string;
  readonly arg: unknown;
}

export type CopyFormatResult = { ok: true; format: CopyFormat } | { ok: false; message: string };

const TAB = 0x09;
const COMMA = 0x2c;
const DOUBLE_QUOTE = 0x22;
/** Options that shape what COPY TO writes; any other option is refused rather than guessed at (fail closed). */
const OUTPUT_OPTIONS = new Set(['format', 'delimiter', 'null', 'header', 'quote', 'escape', 'force_quote', 'encoding']);

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The string value of a String/Integer/Float/Boolean argument node, or null for none (PostgreSQL's defGetString). */
function argText(arg: unknown): string | null {
  if (!isObj(arg)) return null;
  if (isObj(arg.String)) return typeof arg.String.sval === 'string' ? arg.String.sval : '';
  if (isObj(arg.Integer)) return String(arg.Integer.ival ?? 0);
  if (isObj(arg.Float)) return String(arg.Float.fval ?? '0');
  if (isObj(arg.Boolean)) return arg.Boolean.boolval === true ? 'true' : 'false';
  return null;
}

/** PostgreSQL's defGetBoolean: no argument is true; 1/0, true/false, on/off, yes/no (prefixes of the words too). */
function argBoolean(arg: unknown): boolean | null {
  if (arg === undefined || arg === null) return true;
  const t = argText(arg)?.toLowerCase();
  if (t === undefined) return null;
  if (t === '1' || t === 'on' || (t.length > 0 && ('true'.startsWith(t) || 'yes'.startsWith(t)))) return true;
  if (t === '0' || t === 'off' || (t.length > 0 && ('false'.startsWith(t) || 'no'.startsWith(t)))) return false;
  return null;
}

function oneByte(name: string, value: string | null): number | string {
  if (value === null || value.length !== 1 || value.charCodeAt(0) > 0x7f) return `COPY ${name} must be a single one-byte character`;
  return value.charCodeAt(0);
}

/** The output format of COPY … TO with these options, or why the gateway will not read it. */
export function copyFormatOf(options: readonly CopyOption[]): CopyFormatResult {
  const seen = new Map<string, unknown>();
  for (const o of options) {
    if (!OUTPUT_OPTIONS.has(o.name)) return { ok: false, message: `COPY option ${o.name.slice(0, 63)} is not supported through the gateway for COPY TO` };
    // PostgreSQL refuses a repeated option (42601); refusing it here keeps the gateway from reading one value while the server reads another.
    if (seen.has(o.name)) return { ok: false, message: `COPY option ${o.name} given more than once` };
    seen.set(o.name, o.arg);
  }
  const formatName = seen.has('format') ? argText(seen.get('format'))?.toLowerCase() : 'text';
  if (formatName !== 'text' && formatName !== 'csv' && formatName !== 'binary') return { ok: false, message: `COPY format ${String(formatName).slice(0, 63)} not recognized` };
  if (seen.has('encoding')) {
    // The gateway reads the stream as UTF-8 (docs/pgwire.md "Login"): another encoding would hide values from the scanner.
    const enc = (argText(seen.get('encoding')) ?? '').toLowerCase().replace(/[^a-z0-9]/g, '');
    if (enc !== 'utf8' && enc !== 'unicode') return { ok: false, message: 'COPY TO through the gateway writes UTF8 only (ENCODING must be UTF8)' };
  }
  const csv = formatName === 'csv';
  const delimiter = seen.has('delimiter') ? oneByte('delimiter', argText(seen.get('delimiter'))) : csv ? COMMA : TAB;
  if (typeof delimiter === 'string') return { ok: false, message: delimiter };
  const quote = seen.has('quote') ? oneByte('quote', argText(seen.get('quote'))) : DOUBLE_QUOTE;
  if (typeof quote === 'string') return { ok: false, message: quote };
  const escape = seen.has('escape') ? oneByte('escape', argText(seen.get('escape'))) : quote;
  if (typeof escape === 'string') return { ok: false, message: escape };
  const header = seen.has('header') ? argBoolean(seen.get('header')) : false;
  if (header === null) return { ok: false, message: 'COPY header requires a Boolean value' };
  const nullText = seen.has('null') ? argText(seen.get('null')) : csv ? '' : '\\N';
  if (nullText === null) return { ok: false, message: 'COPY null requires a string' };
  return {
    ok: true,
    format: { kind: formatName, delimiter, quote, escape, header, null: Buffer.from(nullText, 'utf8'), nullChosen: seen.has('null') },
  };
}

// ---- text format fields ----

const BACKSLASH = 0x5c;
const TEXT_DECODE: Readonly<Record<number, number>> = { 0x62: 0x08, 0x66: 0x0c, 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09, 0x76: 0x0b }; // \b \f \n \r \t \v

function isOctal(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x37;
}

function hexValue(c: number | undefined): number {
  if (c === undefined) return -1;
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/** The value of one text-format field (its raw bytes, the NULL string already told apart), backslash sequences decoded. */
export function decodeTextField(raw: Buffer): string {
  if (raw.indexOf(BACKSLASH) === -1) return raw.toString('utf8');
  const out = Buffer.allocUnsafe(raw.length);
  let n = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c !== BACKSLASH || i + 1 >= raw.length) {
      out[n++] = c;
      continue;
    }
    const d = raw[++i]!;
    if (isOctal(d)) {
      let v = d - 0x30;
      for (let k = 0; k < 2 && isOctal(raw[i + 1]); k++) v = v * 8 + (raw[++i]! - 0x30);
      out[n++] = v & 0xff;
    } else if (d === 0x78 && hexValue(raw[i + 1]) >= 0) {
      let v = hexValue(raw[++i]);
      if (hexValue(raw[i + 1]) >= 0) v = v * 16 + hexValue(raw[++i]);
      out[n++] = v;
    } else out[n++] = TEXT_DECODE[d] ?? d;
  }
  return out.toString('utf8', 0, n);
}

/** A value written as a text-format field: backslash, newline, carriage return, tab and the delimiter escaped (as PostgreSQL's CopyAttributeOutText does). */
export function encodeTextField(value: string, delimiter: number): Buffer {
  let out = '';
  for (const ch of value) {
    const c = ch.charCodeAt(0);
    if (c === BACKSLASH) out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c === 0x0b) out += '\\v';
    else if (c === delimiter) out += `\\${ch}`;
    else out += ch;
  }
  return Buffer.from(out, 'utf8');
}

// ---- CSV fields ----

/** The value of one CSV field: quoted parts unquoted, escape sequences inside quotes resolved; `quoted` says whether any part was quoted. */
export function decodeCsvField(raw: Buffer, f: CopyFormat): { value: string; quoted: boolean } {
  if (raw.indexOf(f.quote) === -1) return { value: raw.toString('utf8'), quoted: false };
  const out = Buffer.allocUnsafe(raw.length);
  let n = 0;
  let inQuote = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (inQuote && c === f.escape && i + 1 < raw.length && (raw[i + 1] === f.quote || raw[i + 1] === f.escape)) {
      out[n++] = raw[++i]!;
      continue;
    }
    if (c === f.quote) inQuote = !inQuote;
    else out[n++] = c;
  }
  return { value: out.toString('utf8', 0, n), quoted: true };
}

/** A value written as a CSV field, always quoted (so no delimiter, newline or NULL string inside it can be misread). */
export function encodeCsvField(value: string, f: CopyFormat): Buffer {
  const v = Buffer.from(value, 'utf8');
  const out = Buffer.allocUnsafe(v.length * 2 + 2);
  let n = 0;
  out[n++] = f.quote;
  for (const c of v) {
    if (c === f.quote || c === f.escape) out[n++] = f.escape;
    out[n++] = c;
  }
  out[n++] = f.quote;
  return out.subarray(0, n);
}
