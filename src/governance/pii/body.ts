// Scanning an HTTP body by its media type: every JSON family parsed as JSON (plain, NDJSON, RFC 7464 sequences), text-like types scanned as text in their declared charset, and everything else reported unscannable.
import type { PiiScanner, PiiScanOptions } from './scanner.js';

/** How the scanner reads a body of a given media type. */
export type BodyKind = 'json' | 'json_lines' | 'json_seq' | 'text' | 'unscannable';

// NDJSON / JSON Lines under the names in use (none is registered; `application/x-ndjson` is the most common).
const JSON_LINES_SUBTYPES = new Set(['ndjson', 'x-ndjson', 'jsonl', 'x-jsonl', 'jsonlines', 'x-jsonlines', 'json-lines', 'x-json-lines', 'ldjson', 'x-ldjson', 'json-stream', 'x-json-stream']);
// Text-like application types (text/* and *+xml, *+yaml, *+csv are text by their suffix).
const TEXT_APPLICATION_SUBTYPES = new Set([
  'xml', 'xhtml+xml', 'javascript', 'x-javascript', 'ecmascript', 'x-www-form-urlencoded', 'csv', 'x-csv', 'yaml', 'x-yaml', 'toml', 'x-toml', 'sql',
  'graphql', 'x-sh', 'x-httpd-php', 'rtf', 'x-tex', 'markdown', 'x-markdown',
]);
const TEXT_SUFFIXES = ['+xml', '+yaml', '+csv', '+toml'];

export interface MediaType {
  /** `type/subtype`, lower-case, without parameters ('' when absent or malformed). */
  readonly essence: string;
  /** The `charset` parameter, lower-case, or null. */
  readonly charset: string | null;
}

/** Parses a Content-Type value just far enough: the essence and the charset parameter. */
export function parseMediaType(value: string | undefined): MediaType {
  if (value === undefined) return { essence: '', charset: null };
  const [head, ...params] = value.split(';');
  const essence = head!.trim().toLowerCase();
  let charset: string | null = null;
  for (const p of params) {
    const eq = p.indexOf('=');
    if (eq === -1 || p.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    charset = p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
  }
  return { essence: /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/.test(essence) ? essence : '', charset };
}

/** How a body of this media type is read; an absent, malformed or unknown type is unscannable (fail closed). */
export function bodyKind(media: MediaType): BodyKind {
  const { essence } = media;
  if (essence === '') return 'unscannable';
  const slash = essence.indexOf('/');
  const type = essence.slice(0, slash);
  const subtype = essence.slice(slash + 1);
  if (subtype === 'json-seq' || subtype.endsWith('+json-seq')) return 'json_seq';
  if (JSON_LINES_SUBTYPES.has(subtype)) return 'json_lines';
  if (subtype === 'json' || subtype.endsWith('+json') || subtype === 'x-json') return 'json';
  if (type === 'text') return 'text';
  if (type === 'application' && (TEXT_APPLICATION_SUBTYPES.has(subtype) || TEXT_SUFFIXES.some((s) => subtype.endsWith(s)))) return 'text';
  return 'unscannable';
}

export type BodyScanResult =
  | {
      readonly kind: 'scanned';
      readonly body: Buffer;
      /** The Content-Type to return: the upstream's, with `charset=utf-8` when the body was re-encoded. */
      readonly contentType: string;
      readonly redactions: number;
      readonly failedClosed: boolean;
    }
  | { readonly kind: 'unscannable'; readonly reason: string };

const UTF8 = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii']);

/** Decodes per the declared charset; null when the charset is unknown to the platform (the body cannot be read). */
function decode(body: Buffer, charset: string | null): string | null {
  if (charset === null || UTF8.has(charset)) return body.toString('utf8');
  try {
    return new TextDecoder(charset).decode(body);
  } catch {
    return null;
  }
}

/**
 * Whether the scanned text is byte for byte the body it came from, so the body itself can be returned without a copy:
 * UTF-8 (no re-encode), decoded without a replacement character (nothing lossy), and the scan's output the same text.
 */
function unchanged(media: MediaType, text: string, out: string): boolean {
  return out === text && (media.charset === null || UTF8.has(media.charset)) && !text.includes('\uFFFD');
}

/** The Content-Type after a re-encode to UTF-8: its charset parameter (if any) replaced. */
function utf8ContentType(contentType: string, media: MediaType): string {
  if (media.charset === null || UTF8.has(media.charset)) return contentType;
  return contentType.replace(/charset\s*=\s*("[^"]*"|[^;\s]*)/i, 'charset=utf-8');
}

/**
 * Scans one response body for personal data by its Content-Type (spec §4 proxy rule 8). JSON families are parsed
 * record by record; a record that does not parse is scanned as text (never passed unscanned). Pure; never throws.
 */
export function scanBody(pii: PiiScanner, body: Buffer, contentType: string | undefined, opts: PiiScanOptions): BodyScanResult {
  const media = parseMediaType(contentType);
  const kind = bodyKind(media);
  if (kind === 'unscannable') return { kind, reason: media.essence === '' ? 'no content type' : media.essence };
  const text = decode(body, media.charset);
  if (text === null) return { kind: 'unscannable', reason: `charset ${media.charset}` };
  const acc = { redactions: 0, failedClosed: false };
  let out: string;
  if (kind === 'json') out = scanJsonText(pii, text, opts, acc);
  else if (kind === 'json_lines') out = scanRecords(pii, text.split('\n'), '\n', opts, acc);
  else if (kind === 'json_seq') out = scanJsonSeq(pii, text, opts, acc);
  else out = scanTextPart(pii, text, opts, acc);
  return { kind: 'scanned', body: unchanged(media, text, out) ? body : Buffer.from(out, 'utf8'), contentType: utf8ContentType(contentType ?? '', media), ...acc };
}

interface Acc {
  redactions: number;
  failedClosed: boolean;
}

function scanTextPart(pii: PiiScanner, text: string, opts: PiiScanOptions, acc: Acc): string {
  const r = pii.scanText(text, opts);
  acc.redactions += r.redactions;
  acc.failedClosed ||= r.failedClosed;
  return r.text;
}

/** One JSON text: parsed and scanned structurally, or scanned as text when it does not parse. */
function scanJsonText(pii: PiiScanner, text: string, opts: PiiScanOptions, acc: Acc): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return scanTextPart(pii, text, opts, acc);
  }
  const r = pii.scanJson(value, opts);
  acc.redactions += r.redactions;
  acc.failedClosed ||= r.failedClosed;
  return JSON.stringify(r.value);
}

/** Records joined by `sep`; blank records (a trailing newline, `\r` of CRLF aside) keep their place. */
function scanRecords(pii: PiiScanner, records: string[], sep: string, opts: PiiScanOptions, acc: Acc): string {
  return records
    .map((record) => {
      const cr = record.endsWith('\r') ? '\r' : '';
      const line = cr === '' ? record : record.slice(0, -1);
      return line.trim() === '' ? record : scanJsonText(pii, line, opts, acc) + cr;
    })
    .join(sep);
}

/** RFC 7464: each record starts with RS (0x1E) and ends with LF; text before the first RS is scanned too. */
function scanJsonSeq(pii: PiiScanner, text: string, opts: PiiScanOptions, acc: Acc): string {
  const parts = text.split('\u001e');
  const head = parts.shift()!;
  const out = head.trim() === '' ? head : scanTextPart(pii, head, opts, acc);
  return out + parts.map((p) => '\u001e' + (p.trim() === '' ? p : scanJsonText(pii, p.trimEnd(), opts, acc) + p.slice(p.trimEnd().length))).join('');
}
