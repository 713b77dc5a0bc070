// COPY binary-format encoding of audit batches: one tuple per entry, the columns of AUDIT_FIELDS in order, each in its type's binary form; the tuple is also a row's canonical bytes for its seal (docs/decisions/0031).
import { AUDIT_FIELDS, canonicalJson, entryTimeMs, type AuditEntry } from './entry.js';
import { rowDigestHex } from './seal.js';

/**
 * The statement a binary batch is streamed into: the partitioned parent, every column named.
 * @see https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4 (File Formats, Binary Format)
 */
export const AUDIT_COPY_BINARY_STATEMENT = `copy audit_entries (${AUDIT_FIELDS.join(', ')}) from stdin with (format binary)`;

/** The file header: the 11-byte signature, flags (no OIDs) and an empty header extension. */
const HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
/** The file trailer: a tuple field count of -1. */
const TRAILER = Buffer.from([0xff, 0xff]);
/** Element type OIDs of the array columns (pg_type): array_recv refuses elements of another type. */
const TEXT_OID = 25;
const INT4_OID = 23;
/** Texts up to this length are written by #ascii when they are plain ASCII. */
const SHORT_TEXT = 128;
/** 2000-01-01T00:00:00Z, PostgreSQL's timestamp epoch, in Unix milliseconds. */
const PG_EPOCH_MS = 946_684_800_000;

/** Hex digit values by character code (-1: not a hex digit). */
const HEX: Int8Array = (() => {
  const t = new Int8Array(128).fill(-1);
  for (let i = 0; i < 16; i++) {
    t['0123456789abcdef'.charCodeAt(i)] = i;
    t['0123456789ABCDEF'.charCodeAt(i)] = i;
  }
  return t;
})();

/** A growing buffer of big-endian fields; `unstorable` is set when a text holds what PostgreSQL's text types refuse. */
class Writer {
  buf: Buffer;
  off = 0;
  unstorable = false;
  /** The earliest and latest time written (ms), over every entry of a batch. */
  minMs = Number.POSITIVE_INFINITY;
  maxMs = Number.NEGATIVE_INFINITY;
  /** The time of the entry written last (ms). */
  lastMs = Number.NaN;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  ensure(n: number): void {
    if (this.off + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.off + n));
    this.buf.copy(next, 0, 0, this.off);
    this.buf = next;
  }

  int16(v: number): void {
    this.ensure(2);
    this.buf[this.off++] = (v >>> 8) & 0xff;
    this.buf[this.off++] = v & 0xff;
  }

  int32(v: number): void {
    this.ensure(4);
    const b = this.buf;
    let o = this.off;
    b[o++] = (v >>> 24) & 0xff;
    b[o++] = (v >>> 16) & 0xff;
    b[o++] = (v >>> 8) & 0xff;
    b[o++] = v & 0xff;
    this.off = o;
  }

  /** A safe integer as int64: the high word by division (two's complement for negatives), the low word as what remains. */
  int64(v: number): void {
    const hi = Math.floor(v / 4_294_967_296);
    this.int32(hi);
    this.int32(v - hi * 4_294_967_296);
  }

  null(): void {
    this.int32(-1);
  }

  /** A field of the text type: its length, then its UTF-8 bytes. */
  text(s: string): void {
    this.ensure(4 + s.length * 3);
    const start = this.off + 4;
    if (s.length <= SHORT_TEXT && this.#ascii(s, start)) {
      this.int32(s.length);
      this.off = start + s.length;
      return;
    }
    const n = this.buf.write(s, start, 'utf8');
    // ASCII writes one byte per character; anything else may hold a lone surrogate (written as U+FFFD). A NUL has no
    // place in text at all. Such an entry is left to storableEntry (insert.ts).
    if (s.includes('\0') || (n !== s.length && !s.isWellFormed())) this.unstorable = true;
    this.int32(n);
    this.off = start + n;
  }

  /**
   * Writes a short text's characters at `at` when every one is ASCII other than NUL (its UTF-8 is its characters), and
   * answers whether it did; otherwise nothing written is used and the caller encodes it. A loop here costs less than
   * a call into the encoder for the short texts most fields hold (ids, names, the normalized statement).
   */
  #ascii(s: string, at: number): boolean {
    const b = this.buf;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c === 0 || c > 0x7f) return false;
      b[at + i] = c;
    }
    return true;
  }

  textOrNull(s: string | null): void {
    if (s === null || s === undefined) this.null();
    else this.text(s);
  }

  int4OrNull(v: number | null): void {
    if (v === null || v === undefined) this.null();
    else this.int4(v);
  }

  int4(v: number): void {
    this.int32(4);
    this.int32(v);
  }

  int8(v: number): void {
    this.int32(8);
    this.int64(v);
  }

  /** float8 as its IEEE 754 bits; -0 is written as 0, as its decimal text would store it. */
  float8(v: number): void {
    this.int32(8);
    this.ensure(8);
    this.buf.writeDoubleBE(v === 0 ? 0 : v, this.off);
    this.off += 8;
  }

  /** A UUID written `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (assertValidEntry): its 16 bytes. */
  uuid(s: string): void {
    if (s.length !== 36) throw new TypeError(`audit entry id is not a UUID: ${s}`);
    this.int32(16);
    this.ensure(16);
    const b = this.buf;
    let o = this.off;
    for (let i = 0; i < 36; i += 2) {
      if (i === 8 || i === 13 || i === 18 || i === 23) i += 1;
      const hi = HEX[s.charCodeAt(i)] ?? -1;
      const lo = HEX[s.charCodeAt(i + 1)] ?? -1;
      if (hi < 0 || lo < 0) throw new TypeError(`audit entry id is not a UUID: ${s}`);
      b[o++] = (hi << 4) | lo;
    }
    this.off = o;
  }

  /** timestamptz as int64 microseconds since 2000-01-01 UTC. */
  timestamp(iso: string): void {
    this.int32(8);
    const ms = entryTimeMs(iso);
    if (Number.isNaN(ms)) throw new TypeError(`audit entry ts is not an ISO timestamp: ${iso}`);
    this.sawTime(ms);
    this.int64((ms - PG_EPOCH_MS) * 1000);
  }

  /** Counts an entry's time (ms) into the batch's range. */
  sawTime(ms: number): void {
    this.lastMs = ms;
    if (ms < this.minMs) this.minMs = ms;
    if (ms > this.maxMs) this.maxMs = ms;
  }

  /** A one-dimensional array without NULLs: header, then each element as a field. */
  #arrayHeader(length: number, oid: number): void {
    this.int32(length === 0 ? 0 : 1); // dimensions (an empty array has none)
    this.int32(0); // no NULL elements
    this.int32(oid);
    if (length > 0) {
      this.int32(length);
      this.int32(1); // lower bound
    }
  }

  textArray(a: readonly string[]): void {
    const lengthAt = this.#reserve();
    this.#arrayHeader(a.length, TEXT_OID);
    for (let i = 0; i < a.length; i++) this.text(a[i]!);
    this.#fill(lengthAt);
  }

  int4Array(a: readonly number[]): void {
    const lengthAt = this.#reserve();
    this.#arrayHeader(a.length, INT4_OID);
    for (let i = 0; i < a.length; i++) this.int4(a[i]!);
    this.#fill(lengthAt);
  }

  /** jsonb: format version 1, then the canonical JSON text (keys sorted, unstorable characters replaced: canonicalJson). */
  jsonbOrNull(v: unknown): void {
    const json = v === null || v === undefined ? undefined : canonicalJson(v);
    if (json === undefined) return this.null();
    const lengthAt = this.#reserve();
    this.ensure(1 + json.length * 3);
    this.buf[this.off++] = 1;
    this.off += this.buf.write(json, this.off, 'utf8');
    this.#fill(lengthAt);
  }

  /** Room for a field's length, written by #fill once the field is. */
  #reserve(): number {
    this.int32(0);
    return this.off;
  }

  #fill(dataAt: number): void {
    this.buf.writeInt32BE(this.off - dataAt, dataAt - 4);
  }
}

/** One entry's tuple: the field count, then AUDIT_FIELDS in order (test/audit/copy.test.ts checks it against PostgreSQL). */
function tuple(w: Writer, e: AuditEntry): void {
  w.int16(AUDIT_FIELDS.length);
  w.uuid(e.id);
  w.timestamp(e.ts);
  w.text(e.request_id);
  w.text(e.channel);
  w.int4OrNull(e.identity_id);
  w.int4OrNull(e.admin_user_id);
  w.textOrNull(e.source_id);
  w.textOrNull(e.operation);
  w.textOrNull(e.method);
  w.textOrNull(e.path);
  w.textOrNull(e.sql_fingerprint);
  w.textOrNull(e.sql_normalized);
  w.textArray(e.tables);
  w.text(e.decision);
  w.textArray(e.reasons);
  w.int4Array(e.policy_ids);
  w.int4OrNull(e.approval_id);
  w.int4(e.status);
  w.int4OrNull(e.upstream_status);
  w.textOrNull(e.cache);
  w.int4(e.redactions);
  w.int8(e.bytes_in);
  w.int8(e.bytes_out);
  w.float8(e.duration_ms);
  w.textOrNull(e.client_ip);
  w.textOrNull(e.action);
  w.jsonbOrNull(e.target);
  w.jsonbOrNull(e.changes);
  w.textOrNull(e.error_code);
}

/** A batch ready for binary COPY: the whole COPY data, and each row's tuple within it (the seal's canonical bytes). */
export interface AuditBinaryBatch {
  bytes: Buffer;
  tuples: Buffer[];
  /** The earliest and latest entry time of the batch (ms). */
  minMs: number;
  maxMs: number;
}

/** A batch's COPY data being encoded, entry by entry, into one buffer. */
export class BinaryBatchEncoder {
  readonly #w: Writer;
  readonly #starts: number[] = [];

  constructor(expected: number) {
    this.#w = new Writer(HEADER.length + 2 + expected * 512);
    HEADER.copy(this.#w.buf, 0);
    this.#w.off = HEADER.length;
  }

  /** Adds an entry: the row made when it was accepted (encodeAccepted) when there is one, else encoded now. */
  add(e: AuditEntry, accepted: AcceptedRow | null = null): void {
    const w = this.#w;
    this.#starts.push(w.off);
    if (accepted === null) return tuple(w, e);
    // Its bytes, as tuple() would write them again.
    const { bytes, ms } = accepted;
    w.ensure(bytes.length);
    bytes.copy(w.buf, w.off);
    w.off += bytes.length;
    w.sawTime(ms);
  }

  /** The batch, or null when a text field of an entry holds a NUL or a lone surrogate (auditBinaryBatch). */
  finish(): AuditBinaryBatch | null {
    const w = this.#w;
    if (w.unstorable) return null;
    const starts = this.#starts;
    const n = starts.length;
    starts.push(w.off);
    w.ensure(TRAILER.length);
    TRAILER.copy(w.buf, w.off);
    w.off += TRAILER.length;
    const bytes = w.buf.subarray(0, w.off);
    const tuples = new Array<Buffer>(n);
    for (let i = 0; i < n; i++) tuples[i] = bytes.subarray(starts[i]!, starts[i + 1]!);
    return { bytes, tuples, minMs: w.minMs, maxMs: w.maxMs };
  }
}

/**
 * The binary COPY data of a batch of valid entries (assertValidEntry), or null when a text field holds a NUL or a lone
 * surrogate, which PostgreSQL's text refuses and UTF-8 would silently turn into U+FFFD: such a batch is stored with
 * those characters replaced (storableEntry), as the insert path stores it.
 */
export function auditBinaryBatch(entries: readonly AuditEntry[], accepted?: AcceptedRows): AuditBinaryBatch | null {
  const encoder = new BinaryBatchEncoder(entries.length);
  for (let i = 0; i < entries.length; i++) encoder.add(entries[i]!, accepted?.[i]);
  return encoder.finish();
}

/**
 * The batch as COPY data of at most `maxRows` rows each, the rows in order and spread evenly (each part its own header
 * and trailer); the batch's own bytes when it fits one part.
 */
export function binaryParts(batch: AuditBinaryBatch, maxRows: number): Buffer[] {
  const { bytes, tuples } = batch;
  const n = tuples.length;
  if (n <= maxRows) return [bytes];
  const count = Math.ceil(n / maxRows);
  const offset = (t: Buffer): number => t.byteOffset - bytes.byteOffset;
  const parts: Buffer[] = [];
  for (let p = 0, a = 0; p < count; p++) {
    const b = Math.round(((p + 1) * n) / count);
    const last = tuples[b - 1]!;
    parts.push(Buffer.concat([HEADER, bytes.subarray(offset(tuples[a]!), offset(last) + last.length), TRAILER]));
    a = b;
  }
  return parts;
}

/**
 * An entry's row made when the audit writer accepted it (encodeAccepted): its tuple, its time and its seal digest
 * (rowDigestHex of the tuple). The writer keeps it beside its entry, and the batch that stores the entry copies it.
 */
export interface AcceptedRow {
  readonly bytes: Buffer;
  readonly ms: number;
  readonly digestHex: string;
}

/** The rows of a batch's entries, one per entry in order (null: none was made, the entry is encoded with its batch). */
export type AcceptedRows = readonly (AcceptedRow | null)[];

/**
 * Encodes and digests a valid entry (assertValidEntry) the writer has just accepted, for the batch that will store it,
 * or answers null for one PostgreSQL's text would refuse (a NUL, a lone surrogate), which its batch stores with those
 * characters replaced (storableEntry). A batch used to encode and digest its 500 entries when it was stored: ≈ 2 µs
 * each, in slices of 64 that each held the event loop for ≈ 0.2 ms, and the requests that arrived meanwhile waited
 * them out (the slow statements of the wire's unqueued probe came in bursts, one burst per stored batch). Encoded as
 * accepted, each request pays for its own entry and the batch copies bytes (docs/decisions/0029, "Encoded as
 * accepted"). The entry must not change afterwards: its row is what was accepted.
 */
export function encodeAccepted(e: AuditEntry): AcceptedRow | null {
  // Rows are written one after another into a shared slab, each kept as a view of it: a buffer of its own per entry
  // cost more than the encoding saved. A slab nearly full is left to the rows that view it.
  if (slab.off > SLAB_BYTES - SLAB_ROOM) slab = new Writer(SLAB_BYTES);
  const w = slab;
  const start = w.off;
  w.unstorable = false;
  try {
    tuple(w, e);
  } catch (error) {
    w.off = start;
    throw error;
  }
  if (w.unstorable) {
    w.off = start;
    return null;
  }
  const bytes = w.buf.subarray(start, w.off);
  return { bytes, ms: w.lastMs, digestHex: rowDigestHex(bytes) };
}

/** The slab accepted rows are written into (encodeAccepted), and the room a row is expected to fit in. */
const SLAB_BYTES = 64 * 1024;
const SLAB_ROOM = 4 * 1024;
let slab = new Writer(SLAB_BYTES);

/** One entry's tuple bytes, its canonical form for the seal (verify.ts encodes rows read back with it). */
export function auditTuple(e: AuditEntry): Buffer {
  const w = new Writer(512);
  tuple(w, e);
  return w.buf.subarray(0, w.off);
}
