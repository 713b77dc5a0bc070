// PostgreSQL protocol v3 codec of the wire listener: bounded frame reading, frontend message parsing and backend message serialization.
/** @see https://www.postgresql.org/docs/current/protocol-message-formats.html */

export const PROTOCOL_V3 = 196608;
export const SSL_REQUEST_CODE = 80877103;
export const GSSENC_REQUEST_CODE = 80877104;
export const CANCEL_REQUEST_CODE = 80877102;
const LENGTH_BYTES = 4;
const HEADER_BYTES = 5;
/** Startup packets carry at least the length and the code. */
const MIN_STARTUP_BYTES = 8;

/** Frontend message type bytes (after startup). */
export const enum Frontend {
  Query = 0x51, // 'Q'
  Parse = 0x50, // 'P'
  Bind = 0x42, // 'B'
  Describe = 0x44, // 'D'
  Execute = 0x45, // 'E'
  Sync = 0x53, // 'S'
  Flush = 0x48, // 'H'
  Close = 0x43, // 'C'
  Terminate = 0x58, // 'X'
  Password = 0x70, // 'p' (also SASLInitialResponse / SASLResponse)
  CopyData = 0x64, // 'd'
  CopyDone = 0x63, // 'c'
  CopyFail = 0x66, // 'f'
  FunctionCall = 0x46, // 'F'
}

/** Backend message type bytes the listener inspects or writes. */
export const enum Backend {
  Authentication = 0x52, // 'R'
  ParameterStatus = 0x53, // 'S'
  BackendKeyData = 0x4b, // 'K'
  ReadyForQuery = 0x5a, // 'Z'
  RowDescription = 0x54, // 'T'
  DataRow = 0x44, // 'D'
  CommandComplete = 0x43, // 'C'
  EmptyQueryResponse = 0x49, // 'I'
  PortalSuspended = 0x73, // 's'
  ErrorResponse = 0x45, // 'E'
  NoticeResponse = 0x4e, // 'N'
  NotificationResponse = 0x41, // 'A'
  ParseComplete = 0x31, // '1'
  BindComplete = 0x32, // '2'
  CloseComplete = 0x33, // '3'
  ParameterDescription = 0x74, // 't'
  NoData = 0x6e, // 'n'
  CopyInResponse = 0x47, // 'G'
  CopyOutResponse = 0x48, // 'H'
  CopyBothResponse = 0x57, // 'W'
}

export class ProtocolViolation extends Error {
  readonly code = 'protocol_violation';
  readonly sqlstate = '08P01';
}

/** A piece of a streamed CopyData message (FrameReader's `streamCopyData`): raw bytes to relay, not a message. */
export const COPY_DATA_PART = 0x100;
/** PostgreSQL's own bound on a message it reads whole (PQ_LARGE_MESSAGE_LIMIT, 1 GiB − 1). */
const MAX_COPY_DATA_BYTES = 0x3fffffff;

export interface Frame {
  /** Message type byte; 0 for startup-phase packets, which have none. */
  readonly type: number;
  /** The whole message, header included (relayed upstream byte for byte). */
  readonly raw: Buffer;
  /** The body after the header. */
  readonly body: Buffer;
}

/**
 * Splits a byte stream into frames without ever buffering more than one capped message: the length is
 * checked before the body is awaited, so an oversized claim is refused at once (STYLE §7).
 */
export class FrameReader {
  #chunks: Buffer[] = [];
  /** Bytes of the first chunk already returned as frames (a view of the rest is made only when a frame is taken). */
  #at = 0;
  #buffered = 0;
  /** Bytes of a streamed CopyData message still to come (see COPY_DATA_PART). */
  #streamLeft = 0;
  startup = true;

  /**
   * `streamCopyData`: a CopyData message above `messageBytes` is not refused but streamed, as PostgreSQL accepts rows
   * of up to 1 GiB in COPY FROM STDIN: its header comes as a CopyData frame with an empty body, the rest as
   * COPY_DATA_PART frames of what has arrived, each relayed upstream as is. Nothing of it is buffered whole.
   */
  constructor(private readonly limits: { startupBytes: number; messageBytes: number; streamCopyData?: boolean }) {}

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
  }

  /** Bytes received but not yet returned as frames. */
  get buffered(): number {
    return this.#buffered;
  }

  /** The first chunk, holding at least `n` bytes from `#at` (read #at after this call: joining chunks resets it). */
  #peek(n: number): Buffer {
    const head = this.#chunks[0]!;
    if (head.length - this.#at < n) {
      this.#chunks[0] = head.subarray(this.#at);
      this.#chunks = [Buffer.concat(this.#chunks)];
      this.#at = 0;
    }
    return this.#chunks[0]!;
  }

  #take(n: number): Buffer {
    const head = this.#peek(n);
    const at = this.#at;
    const out = head.subarray(at, at + n);
    if (head.length === at + n) {
      this.#chunks.shift();
      this.#at = 0;
    } else this.#at = at + n;
    this.#buffered -= n;
    return out;
  }

  /** The next complete frame, or null when more bytes are needed. Throws ProtocolViolation on a bad length. */
  next(): Frame | null {
    if (this.startup) {
      if (this.#buffered < LENGTH_BYTES) return null;
      // A Terminate in the startup phase (node-postgres sends one when a client ends before its socket connected, ahead
      // of the startup packet): no startup packet can start with its byte, whose length would exceed any cap.
      if (this.#peek(1)[this.#at] === Frontend.Terminate) {
        if (this.#buffered < HEADER_BYTES) return null;
        if (this.#peek(HEADER_BYTES).readInt32BE(this.#at + 1) === LENGTH_BYTES) {
          const raw = this.#take(HEADER_BYTES);
          return { type: Frontend.Terminate, raw, body: raw.subarray(HEADER_BYTES) };
        }
      }
      const length = this.#peek(LENGTH_BYTES).readInt32BE(this.#at);
      if (length < MIN_STARTUP_BYTES || length > this.limits.startupBytes) throw new ProtocolViolation('invalid startup packet length');
      if (this.#buffered < length) return null;
      const raw = this.#take(length);
      return { type: 0, raw, body: raw.subarray(LENGTH_BYTES) };
    }
    if (this.#streamLeft > 0) {
      if (this.#buffered === 0) return null;
      const raw = this.#take(Math.min(this.#streamLeft, this.#buffered, this.#chunks[0]!.length - this.#at));
      this.#streamLeft -= raw.length;
      return { type: COPY_DATA_PART, raw, body: raw };
    }
    if (this.#buffered < HEADER_BYTES) return null;
    const head = this.#peek(HEADER_BYTES);
    const length = head.readInt32BE(this.#at + 1);
    if (this.limits.streamCopyData && head[this.#at] === Frontend.CopyData && length + 1 > this.limits.messageBytes && length <= MAX_COPY_DATA_BYTES) {
      const raw = this.#take(HEADER_BYTES);
      this.#streamLeft = length - LENGTH_BYTES;
      return { type: Frontend.CopyData, raw, body: raw.subarray(HEADER_BYTES) };
    }
    if (length < LENGTH_BYTES || length + 1 > this.limits.messageBytes) throw new ProtocolViolation('invalid message length');
    if (this.#buffered < length + 1) return null;
    const raw = this.#take(length + 1);
    return { type: raw[0]!, raw, body: raw.subarray(HEADER_BYTES) };
  }
}

/**
 * Messages as one buffer for one write: a view of the bytes they were read from when each starts where the one before
 * ends in the same memory (a client's batch or an upstream answer relayed unchanged), otherwise a copy of them.
 */
export function joinMessages(parts: readonly Buffer[], bytes: number): Buffer {
  const first = parts[0]!;
  if (parts.length === 1) return first;
  const memory = first.buffer;
  let end = first.byteOffset + first.length;
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i]!;
    if (p.buffer !== memory || p.byteOffset !== end) return Buffer.concat(parts, bytes);
    end += p.length;
  }
  return Buffer.from(memory, first.byteOffset, end - first.byteOffset);
}

/** Bytes BodyReader.cstring scans itself before it asks indexOf for the end of a longer text. */
const SHORT_CSTRING = 64;

/** Reads NUL-terminated strings and integers from a message body; every read is bounds-checked. */
export class BodyReader {
  offset = 0;
  constructor(private readonly buf: Buffer) {}

  cstring(): string {
    const buf = this.buf;
    const start = this.offset;
    // Names are short (a portal's is usually empty): a loop finds their end for less than a call into indexOf, which
    // takes the rest of a longer text.
    const near = Math.min(buf.length, start + SHORT_CSTRING);
    let end = start;
    while (end < near && buf[end] !== 0) end++;
    if (end === near) end = near < buf.length ? buf.indexOf(0, near) : -1;
    if (end < 0) throw new ProtocolViolation('unterminated string in message');
    this.offset = end + 1;
    return end === start ? '' : buf.toString('utf8', start, end);
  }

  /** A text of `n` bytes (a Bind parameter's value), read in place. */
  text(n: number): string {
    if (n < 0 || this.offset + n > this.buf.length) throw new ProtocolViolation('message too short');
    const s = n === 0 ? '' : this.buf.toString('utf8', this.offset, this.offset + n);
    this.offset += n;
    return s;
  }

  int16(): number {
    if (this.offset + 2 > this.buf.length) throw new ProtocolViolation('message too short');
    const v = this.buf.readInt16BE(this.offset);
    this.offset += 2;
    return v;
  }

  int32(): number {
    if (this.offset + 4 > this.buf.length) throw new ProtocolViolation('message too short');
    const v = this.buf.readInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  bytes(n: number): Buffer {
    if (n < 0 || this.offset + n > this.buf.length) throw new ProtocolViolation('message too short');
    const v = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return v;
  }

  byte(): number {
    return this.bytes(1)[0]!;
  }

  get remaining(): number {
    return this.buf.length - this.offset;
  }
}

export type StartupPacket =
  | { kind: 'ssl' }
  | { kind: 'gssenc' }
  | { kind: 'cancel'; pid: number; secret: number }
  | { kind: 'startup'; params: Record<string, string> };

const MAX_STARTUP_PARAMS = 64;

export function parseStartup(frame: Frame): StartupPacket {
  const r = new BodyReader(frame.body);
  const code = r.int32();
  if (code === SSL_REQUEST_CODE) return { kind: 'ssl' };
  if (code === GSSENC_REQUEST_CODE) return { kind: 'gssenc' };
  if (code === CANCEL_REQUEST_CODE) return { kind: 'cancel', pid: r.int32(), secret: r.int32() };
  if (code !== PROTOCOL_V3) throw new ProtocolViolation('unsupported frontend protocol');
  const params: Record<string, string> = Object.create(null) as Record<string, string>;
  for (let i = 0; i <= MAX_STARTUP_PARAMS; i++) {
    const name = r.cstring();
    if (name === '') return { kind: 'startup', params };
    params[name] = r.cstring();
  }
  throw new ProtocolViolation('too many startup parameters');
}

export interface ParseMessage {
  name: string;
  sql: string;
}

export function parseParse(body: Buffer): ParseMessage {
  const r = new BodyReader(body);
  return { name: r.cstring(), sql: r.cstring() };
}

export interface BindMessage {
  portal: string;
  statement: string;
  /** Text parameters as strings, binary ones as `{ binary: <base64> }` (how an approval stores them), nulls as null. */
  params: unknown[];
  resultFormats: number[];
}

export function parseBind(body: Buffer): BindMessage {
  const r = new BodyReader(body);
  const portal = r.cstring();
  const statement = r.cstring();
  const nFormats = r.int16();
  const formats: number[] = [];
  for (let i = 0; i < nFormats; i++) formats.push(r.int16());
  const nParams = r.int16();
  const params: unknown[] = [];
  for (let i = 0; i < nParams; i++) {
    const len = r.int32();
    if (len === -1) {
      params.push(null);
      continue;
    }
    const format = nFormats === 0 ? 0 : nFormats === 1 ? formats[0]! : (formats[i] ?? 0);
    params.push(format === 1 ? { binary: r.bytes(len).toString('base64') } : r.text(len));
  }
  const nResults = r.int16();
  const resultFormats: number[] = [];
  for (let i = 0; i < nResults; i++) resultFormats.push(r.int16());
  return { portal, statement, params, resultFormats };
}

export function parseDescribeOrClose(body: Buffer): { target: 'S' | 'P'; name: string } {
  const r = new BodyReader(body);
  const t = r.byte();
  if (t !== 0x53 && t !== 0x50) throw new ProtocolViolation('invalid describe/close target');
  return { target: t === 0x53 ? 'S' : 'P', name: r.cstring() };
}

export function parseExecute(body: Buffer): { portal: string; maxRows: number } {
  const r = new BodyReader(body);
  return { portal: r.cstring(), maxRows: r.int32() };
}

export function parseQuery(body: Buffer): string {
  return new BodyReader(body).cstring();
}

/** RowDescription: column names and their format codes. */
export function parseRowDescription(body: Buffer): { names: string[]; formats: number[]; typeOids: number[] } {
  const r = new BodyReader(body);
  const n = r.int16();
  const names: string[] = [];
  const formats: number[] = [];
  const typeOids: number[] = [];
  for (let i = 0; i < n; i++) {
    names.push(r.cstring());
    r.bytes(4 + 2); // table oid, attnum
    typeOids.push(r.int32());
    r.bytes(2 + 4); // typlen, typmod
    formats.push(r.int16());
  }
  return { names, formats, typeOids };
}

/** RowDescription's names and origins (table OID and attnum; 0 for a computed column), for redaction by provenance. */
export function parseRowOrigins(body: Buffer): { name: string; tableOid: number; attnum: number }[] {
  const r = new BodyReader(body);
  const n = r.int16();
  const out: { name: string; tableOid: number; attnum: number }[] = [];
  for (let i = 0; i < n; i++) {
    const name = r.cstring();
    const tableOid = r.int32() >>> 0;
    const attnum = r.int16();
    r.bytes(4 + 2 + 4 + 2); // type oid, typlen, typmod, format
    out.push({ name, tableOid, attnum });
  }
  return out;
}

/** DataRow values (null for SQL NULL), as raw buffers. */
export function parseDataRow(body: Buffer): (Buffer | null)[] {
  const r = new BodyReader(body);
  const n = r.int16();
  const out: (Buffer | null)[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const len = r.int32();
    out[i] = len === -1 ? null : r.bytes(len);
  }
  return out;
}

/** Error/notice fields by their one-byte code. */
export function parseErrorFields(body: Buffer): Map<string, string> {
  const r = new BodyReader(body);
  const fields = new Map<string, string>();
  while (r.remaining > 0) {
    const code = r.byte();
    if (code === 0) break;
    fields.set(String.fromCharCode(code), r.cstring());
  }
  return fields;
}

// ---- backend serialization ----

export function message(type: number, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + body.length);
  out[0] = type;
  out.writeInt32BE(body.length + LENGTH_BYTES, 1);
  body.copy(out, HEADER_BYTES);
  return out;
}

const cstr = (s: string) => Buffer.from(`${s}\0`, 'utf8');

function int32(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeInt32BE(v, 0);
  return b;
}

export function authentication(code: number, extra: Buffer = Buffer.alloc(0)): Buffer {
  return message(Backend.Authentication, Buffer.concat([int32(code), extra]));
}

export const AUTH_OK = 0;
export const AUTH_CLEARTEXT = 3;
export const AUTH_SASL = 10;
export const AUTH_SASL_CONTINUE = 11;
export const AUTH_SASL_FINAL = 12;

export function parameterStatus(name: string, value: string): Buffer {
  return message(Backend.ParameterStatus, Buffer.concat([cstr(name), cstr(value)]));
}

export function backendKeyData(pid: number, secret: number): Buffer {
  return message(Backend.BackendKeyData, Buffer.concat([int32(pid), int32(secret)]));
}

export function readyForQuery(status: number): Buffer {
  return message(Backend.ReadyForQuery, Buffer.from([status]));
}

export interface ErrorFields {
  severity?: 'ERROR' | 'FATAL';
  sqlstate: string;
  message: string;
  detail?: string;
  hint?: string;
}

export function errorResponse(e: ErrorFields): Buffer {
  const severity = e.severity ?? 'ERROR';
  const parts = [cstr(`S${severity}`), cstr(`V${severity}`), cstr(`C${e.sqlstate}`), cstr(`M${e.message}`)];
  if (e.detail) parts.push(cstr(`D${e.detail}`));
  if (e.hint) parts.push(cstr(`H${e.hint}`));
  parts.push(Buffer.from([0]));
  return message(Backend.ErrorResponse, Buffer.concat(parts));
}

/** Re-serializes error/notice fields (after sanitizing), keeping their order. */
export function fieldsMessage(type: number, fields: Map<string, string>): Buffer {
  const parts: Buffer[] = [];
  for (const [k, v] of fields) parts.push(cstr(k + v));
  parts.push(Buffer.from([0]));
  return message(type, Buffer.concat(parts));
}

export function dataRow(values: readonly (Buffer | null)[]): Buffer {
  let size = 2;
  for (const v of values) size += 4 + (v === null ? 0 : v.length);
  const body = Buffer.allocUnsafe(size);
  body.writeInt16BE(values.length, 0);
  let o = 2;
  for (const v of values) {
    if (v === null) {
      body.writeInt32BE(-1, o);
      o += 4;
    } else {
      body.writeInt32BE(v.length, o);
      v.copy(body, o + 4);
      o += 4 + v.length;
    }
  }
  return message(Backend.DataRow, body);
}

export function emptyQueryResponse(): Buffer {
  return message(Backend.EmptyQueryResponse, Buffer.alloc(0));
}

// ---- frontend serialization (the upstream side speaks as a client) ----

export function queryMessage(sql: string): Buffer {
  return message(Frontend.Query, cstr(sql));
}

export function syncMessage(): Buffer {
  return message(Frontend.Sync, Buffer.alloc(0));
}

export function describePortal(name: string): Buffer {
  return message(Frontend.Describe, Buffer.concat([Buffer.from('P'), cstr(name)]));
}

export function parseMessage(name: string, sql: string): Buffer {
  return message(Frontend.Parse, Buffer.concat([cstr(name), cstr(sql), Buffer.from([0, 0])]));
}

/** A Bind with text results; string parameters go as text, Buffers as binary. */
export function bindMessage(portal: string, statement: string, params: readonly (string | Buffer | null)[]): Buffer {
  const formats = Buffer.allocUnsafe(2 + 2 * params.length);
  formats.writeInt16BE(params.length, 0);
  params.forEach((p, i) => formats.writeInt16BE(Buffer.isBuffer(p) ? 1 : 0, 2 + 2 * i));
  const parts: Buffer[] = [cstr(portal), cstr(statement), formats];
  const n = Buffer.allocUnsafe(2);
  n.writeInt16BE(params.length, 0);
  parts.push(n);
  for (const p of params) {
    if (p === null) parts.push(int32(-1));
    else {
      const v = Buffer.isBuffer(p) ? p : Buffer.from(p, 'utf8');
      parts.push(int32(v.length), v);
    }
  }
  parts.push(Buffer.from([0, 0]));
  return message(Frontend.Bind, Buffer.concat(parts));
}

export function executeMessage(portal: string, maxRows: number): Buffer {
  return message(Frontend.Execute, Buffer.concat([cstr(portal), int32(maxRows)]));
}

export function cancelRequest(pid: number, secret: number): Buffer {
  const b = Buffer.allocUnsafe(16);
  b.writeInt32BE(16, 0);
  b.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  b.writeInt32BE(pid, 8);
  b.writeInt32BE(secret, 12);
  return b;
}
