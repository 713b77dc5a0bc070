// COPY text-format encoding of audit batches: one line per entry, the columns of AUDIT_FIELDS in order, escaped exactly as PostgreSQL reads them back.
import { AUDIT_FIELDS, canonicalJson, type AuditEntry } from './entry.js';

/**
 * The statement the encoded batch is streamed into: the partitioned parent, every column named, text format
 * (tab delimiter, `\N` for NULL).
 * @see https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2 (File Formats, Text Format)
 */
export const AUDIT_COPY_STATEMENT = `copy audit_entries (${AUDIT_FIELDS.join(', ')}) from stdin with (format text)`;

/** COPY's NULL marker (the default NULL string of the text format). */
const NULL = '\\N';

/** The characters a context escapes, by character code (undefined: taken literally), and as a list for indexOf. */
interface Escapes {
  readonly byCode: readonly (string | undefined)[];
  readonly chars: readonly string[];
}

function escapes(map: Record<string, string>): Escapes {
  const byCode: (string | undefined)[] = [];
  for (const [ch, seq] of Object.entries(map)) byCode[ch.charCodeAt(0)] = seq;
  return { byCode, chars: Object.keys(map) };
}

/**
 * A text field: backslash, tab, newline and carriage return become backslash sequences. Every other character,
 * control characters included, is taken literally by COPY and needs none.
 */
const TEXT_ESCAPES = escapes({ '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' });

/**
 * One element of a text[] literal, written inside double quotes (so empty strings, `NULL`, braces, commas and
 * whitespace need no further thought): the array literal escapes `"` and `\` with a backslash, then COPY escapes
 * that backslash and the control characters once more.
 * @see https://www.postgresql.org/docs/current/arrays.html#ARRAYS-IO
 */
const ARRAY_ELEMENT_ESCAPES = escapes({ '\\': '\\\\\\\\', '"': '\\\\"', '\t': '\\t', '\n': '\\n', '\r': '\\r' });

/** The escaping slow path from index `from` on (the characters before it need none). */
function escapeFrom(s: string, from: number, e: Escapes): string {
  let out = s.slice(0, from);
  let last = from;
  for (let i = from; i < s.length; i++) {
    const seq = e.byCode[s.charCodeAt(i)];
    if (seq === undefined) continue;
    out += s.slice(last, i) + seq;
    last = i + 1;
  }
  return out + s.slice(last);
}

/**
 * Strings at least this long are searched with indexOf (native, several characters per step: 4 searches of a
 * 140-character statement cost a fifth of a charCodeAt loop); shorter ones with the loop, which has no call overhead.
 */
const SHORT = 16;

/** `s` escaped for its context. Most values (ids, paths, fingerprints, normalized SQL) need none and are returned as they are. */
function escaped(s: string, e: Escapes): string {
  if (s.length >= SHORT) {
    for (let k = 0; k < e.chars.length; k++) if (s.indexOf(e.chars[k]!) !== -1) return escapeFrom(s, 0, e);
    return s;
  }
  for (let i = 0; i < s.length; i++) if (e.byCode[s.charCodeAt(i)] !== undefined) return escapeFrom(s, i, e);
  return s;
}

function text(s: string): string {
  return escaped(s, TEXT_ESCAPES);
}

function textOrNull(s: string | null): string {
  return s === null || s === undefined ? NULL : text(s);
}

function intOrNull(n: number | null): string {
  return n === null || n === undefined ? NULL : String(n);
}

function textArray(a: readonly string[]): string {
  if (a.length === 0) return '{}';
  let out = '{"' + escaped(a[0]!, ARRAY_ELEMENT_ESCAPES);
  for (let i = 1; i < a.length; i++) out += '","' + escaped(a[i]!, ARRAY_ELEMENT_ESCAPES);
  return out + '"}';
}

/** Safe integers print as plain digits with an optional minus sign: nothing to quote or escape. */
function intArray(a: readonly number[]): string {
  return a.length === 0 ? '{}' : '{' + a.join(',') + '}';
}

/**
 * jsonb: canonical JSON (keys sorted at every level: canonicalJson, with NUL and lone surrogates, which jsonb refuses as
 * escapes, replaced), then text-escaped (its own escapes are backslashes). jsonb keeps no key order, so the sorted text
 * is also what an entry read back encodes to: the row's seal digest covers it (seal.ts).
 */
function jsonOrNull(v: unknown): string {
  if (v === null || v === undefined) return NULL;
  const json = canonicalJson(v);
  return json === undefined ? NULL : text(json);
}

/**
 * One entry's COPY text line, newline included: the row's canonical text. Numbers print with String(), the same
 * shortest round-trip form JSON.stringify gives the insert path, so both paths hand PostgreSQL the same digits, and an
 * entry read back from PostgreSQL encodes to the same line (the seal verifier relies on it). Fields in AUDIT_FIELDS
 * order (test/audit/copy.test.ts checks the order against the statement and the stored rows against the insert path).
 */
export function auditCopyLine(e: AuditEntry): string {
  return (
    `${text(e.id)}\t${text(e.ts)}\t${text(e.request_id)}\t${text(e.channel)}\t${intOrNull(e.identity_id)}\t` +
    `${intOrNull(e.admin_user_id)}\t${textOrNull(e.source_id)}\t${textOrNull(e.operation)}\t${textOrNull(e.method)}\t` +
    `${textOrNull(e.path)}\t${textOrNull(e.sql_fingerprint)}\t${textOrNull(e.sql_normalized)}\t${textArray(e.tables)}\t` +
    `${text(e.decision)}\t${textArray(e.reasons)}\t${intArray(e.policy_ids)}\t${intOrNull(e.approval_id)}\t${e.status}\t` +
    `${intOrNull(e.upstream_status)}\t${textOrNull(e.cache)}\t${e.redactions}\t${e.bytes_in}\t${e.bytes_out}\t` +
    `${e.duration_ms}\t${textOrNull(e.client_ip)}\t${textOrNull(e.action)}\t${jsonOrNull(e.target)}\t` +
    `${jsonOrNull(e.changes)}\t${textOrNull(e.error_code)}\n`
  );
}

/** The COPY text of a batch: its entries' lines. */
export function auditCopyText(entries: readonly AuditEntry[]): string {
  let out = '';
  for (let i = 0; i < entries.length; i++) out += auditCopyLine(entries[i]!);
  return out;
}

/** U+FFFD in UTF-8: what encoding turns a lone surrogate into. */
const REPLACEMENT_CHARACTER = Buffer.from([0xef, 0xbf, 0xbd]);

/** A batch ready for COPY: its rows' lines (the seal's canonical texts) and the UTF-8 bytes of their concatenation. */
export interface AuditCopyBatch {
  lines: string[];
  bytes: Buffer;
}

/**
 * The COPY data of a batch as UTF-8 bytes with its lines, or null when COPY cannot carry the batch unchanged: a lone
 * surrogate would be stored as U+FFFD (where the insert path's JSON escape of it is refused), and a NUL has no escape in
 * the text format. Such a batch is left to the insert path, so PostgreSQL judges it exactly as before. The checks search
 * the bytes natively (encoding flattens the string once anyway); the exact surrogate check runs only when a U+FFFD shows.
 */
export function auditCopyBatch(entries: readonly AuditEntry[]): AuditCopyBatch | null {
  const lines = entries.map(auditCopyLine);
  const text = lines.join('');
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.includes(0)) return null;
  if (bytes.includes(REPLACEMENT_CHARACTER) && !text.isWellFormed()) return null;
  return { lines, bytes };
}

/** The COPY data of a batch as UTF-8 bytes, or null when COPY cannot carry it unchanged (auditCopyBatch). */
export function auditCopyData(entries: readonly AuditEntry[]): Buffer | null {
  return auditCopyBatch(entries)?.bytes ?? null;
}
