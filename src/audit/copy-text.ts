// An entry's COPY text line (the columns of AUDIT_FIELDS in order, escaped exactly as PostgreSQL reads them back): the canonical form of rows under format-1 seals, which audit verify still checks (docs/decisions/0031); batches are stored in the binary format since (copy-binary.ts).
import { canonicalJson, type AuditEntry } from './entry.js';

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
