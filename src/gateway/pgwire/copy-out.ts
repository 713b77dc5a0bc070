// The CopyData stream of a COPY … TO STDOUT, redacted as it passes: rows found in text, CSV or binary format whatever the message boundaries, each value through the same row redactor as a DataRow, each row bounded in size.
import { decodeCsvField, decodeTextField, encodeCsvField, encodeTextField, type CopyFormat } from './copy-format.js';

/** The row redactor of the statement's plan (governance/pii rowRedactor): same columns, same rules as a DataRow. */
export type CopyRowRedactor = (values: readonly (string | null)[]) => { values: (string | null)[]; redactions: number };

/** A stream the gateway will not pass on: a row above the bound, or bytes that are not the announced format. */
export class CopyOutError extends Error {
  constructor(
    readonly reason: 'row_too_long' | 'malformed',
    message: string,
  ) {
    super(message);
  }
}

export interface CopyOutOptions {
  readonly format: CopyFormat;
  /** Column count, from the statement's description; every row must have exactly this many fields. */
  readonly columns: number;
  /** Per column, whether a binary value is UTF-8 text the redactor may read (text and CSV values always are). */
  readonly textColumns: readonly boolean[];
  readonly redact: CopyRowRedactor;
  /** Bytes one row may take; a longer row ends the statement (nothing is buffered past it). */
  readonly maxRowBytes: number;
}

const LF = 0x0a;
const BACKSLASH = 0x5c;
/** PGCOPY\n\377\r\n\0, then int32 flags and int32 header-extension length. @see https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4 */
const BINARY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const BINARY_FIXED_HEADER = BINARY_SIGNATURE.length + 8;
const BINARY_TRAILER = -1;

/**
 * One COPY TO stream. `push` takes each CopyData payload and returns the bytes to relay (complete rows, redacted;
 * possibly none), keeping at most one partial row; `end` at CopyDone checks nothing is left over.
 */
export class CopyOutRedactor {
  /** Data rows seen (a header line and the binary header and trailer are not rows). */
  rows = 0;
  redactions = 0;
  readonly #o: CopyOutOptions;
  #parts: Buffer[] = [];
  #partBytes = 0;
  #headerLine: boolean;
  /** Text: the previous byte was an unescaped backslash. CSV: inside quotes; the previous byte was the escape. */
  #escaped = false;
  #inQuote = false;
  #binaryHeader = false;
  #trailer = false;

  constructor(options: CopyOutOptions) {
    if (options.textColumns.length !== options.columns) throw new TypeError('textColumns must name every column');
    this.#o = options;
    this.#headerLine = options.format.kind !== 'binary' && options.format.header;
  }

  push(chunk: Buffer): Buffer {
    return this.#o.format.kind === 'binary' ? this.#pushBinary(chunk) : this.#pushLines(chunk);
  }

  end(): void {
    if (this.#partBytes > 0) throw new CopyOutError('malformed', 'the COPY stream ended inside a row');
    if (this.#o.format.kind === 'binary' && !this.#trailer) throw new CopyOutError('malformed', 'the binary COPY stream ended without its trailer');
  }

  #keep(part: Buffer): void {
    if (part.length === 0) return;
    this.#partBytes += part.length;
    if (this.#partBytes > this.#o.maxRowBytes) throw new CopyOutError('row_too_long', `a COPY row exceeds the gateway's row bound (${this.#o.maxRowBytes} bytes)`);
    this.#parts.push(part);
  }

  #take(last: Buffer): Buffer {
    if (this.#parts.length === 0) return last;
    const row = Buffer.concat([...this.#parts, last], this.#partBytes + last.length);
    this.#parts = [];
    this.#partBytes = 0;
    return row;
  }

  // ---- text and CSV: rows end at a newline that is neither escaped (text) nor quoted (CSV) ----

  #pushLines(chunk: Buffer): Buffer {
    const f = this.#o.format;
    const csv = f.kind === 'csv';
    const out: Buffer[] = [];
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]!;
      if (this.#escaped) {
        this.#escaped = false;
        continue;
      }
      if (csv) {
        if (this.#inQuote && c === f.escape && f.escape !== f.quote) this.#escaped = true;
        else if (c === f.quote) this.#inQuote = !this.#inQuote;
        else if (c === LF && !this.#inQuote) {
          out.push(this.#line(this.#take(chunk.subarray(start, i + 1))));
          start = i + 1;
        }
      } else if (c === BACKSLASH) this.#escaped = true;
      else if (c === LF) {
        out.push(this.#line(this.#take(chunk.subarray(start, i + 1))));
        start = i + 1;
      }
      if (i + 1 - start > this.#o.maxRowBytes - this.#partBytes) throw new CopyOutError('row_too_long', `a COPY row exceeds the gateway's row bound (${this.#o.maxRowBytes} bytes)`);
    }
    this.#keep(chunk.subarray(start));
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  /** One complete line (its newline included): the header as it is, a data row through the redactor. */
  #line(line: Buffer): Buffer {
    if (this.#headerLine) {
      this.#headerLine = false;
      return line;
    }
    this.rows++;
    const f = this.#o.format;
    const csv = f.kind === 'csv';
    const fields = csv ? splitCsv(line, f) : splitText(line, f.delimiter);
    if (fields.length !== this.#o.columns) throw new CopyOutError('malformed', `a COPY row has ${fields.length} fields for ${this.#o.columns} columns`);
    const values: (string | null)[] = new Array(fields.length);
    for (let k = 0; k < fields.length; k++) {
      const raw = fields[k]!;
      if (csv) {
        const d = decodeCsvField(raw, f);
        // PostgreSQL quotes a value equal to the NULL string in CSV, so an unquoted one is always a NULL.
        values[k] = !d.quoted && raw.equals(f.null) ? null : d.value;
      } else values[k] = !f.nullChosen && raw.equals(f.null) ? null : decodeTextField(raw);
    }
    const r = this.#redact(values);
    if (r === null) return line;
    const rebuilt: Buffer[] = [];
    for (let k = 0; k < fields.length; k++) {
      if (k > 0) rebuilt.push(Buffer.of(f.delimiter));
      const v = r[k];
      if (v === values[k]) rebuilt.push(fields[k]!);
      else if (v === null || v === undefined) rebuilt.push(f.null);
      else rebuilt.push(csv ? encodeCsvField(v, f) : encodeTextField(v, f.delimiter));
    }
    rebuilt.push(Buffer.of(LF));
    return Buffer.concat(rebuilt);
  }

  /** The redacted values, or null when the row is unchanged (relayed byte for byte). */
  #redact(values: (string | null)[]): (string | null)[] | null {
    const r = this.#o.redact(values);
    if (r.redactions === 0) return null;
    this.redactions += r.redactions;
    return r.values;
  }

  // ---- binary: a fixed header, then tuples (int16 field count, per field int32 length and bytes), then -1 ----

  #pushBinary(chunk: Buffer): Buffer {
    let buf = this.#take(chunk);
    const out: Buffer[] = [];
    let at = 0;
    for (;;) {
      if (this.#trailer) {
        if (at < buf.length) throw new CopyOutError('malformed', 'bytes after the binary COPY trailer');
        break;
      }
      const used = this.#binaryHeader ? this.#tuple(buf, at, out) : this.#header(buf, at, out);
      if (used === 0) break;
      at += used;
    }
    buf = buf.subarray(at);
    this.#keep(buf);
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  /** Bytes of the file header when complete (relayed as is), else 0. */
  #header(buf: Buffer, at: number, out: Buffer[]): number {
    if (buf.length - at < BINARY_FIXED_HEADER) return 0;
    if (!buf.subarray(at, at + BINARY_SIGNATURE.length).equals(BINARY_SIGNATURE)) throw new CopyOutError('malformed', 'not a binary COPY stream');
    // Bit 16 (OIDs included) is gone from PostgreSQL since 12; any critical bit set is a format the gateway cannot read.
    if ((buf.readUInt32BE(at + BINARY_SIGNATURE.length) & 0xffff0000) !== 0) throw new CopyOutError('malformed', 'binary COPY header with unknown critical flags');
    const extension = buf.readInt32BE(at + BINARY_SIGNATURE.length + 4);
    if (extension < 0) throw new CopyOutError('malformed', 'binary COPY header extension length is negative');
    const total = BINARY_FIXED_HEADER + extension;
    if (buf.length - at < total) return 0;
    this.#binaryHeader = true;
    out.push(buf.subarray(at, at + total));
    return total;
  }

  /** Bytes of one complete tuple or the trailer, redacted onto `out`, else 0 (it continues in a later chunk). */
  #tuple(buf: Buffer, at: number, out: Buffer[]): number {
    if (buf.length - at < 2) return 0;
    const count = buf.readInt16BE(at);
    if (count === BINARY_TRAILER) {
      this.#trailer = true;
      out.push(buf.subarray(at, at + 2));
      return 2;
    }
    if (count !== this.#o.columns) throw new CopyOutError('malformed', `a binary COPY tuple has ${count} fields for ${this.#o.columns} columns`);
    const starts: number[] = new Array(count);
    const lengths: number[] = new Array(count);
    let p = at + 2;
    for (let k = 0; k < count; k++) {
      if (buf.length - p < 4) return 0;
      const len = buf.readInt32BE(p);
      if (len < -1) throw new CopyOutError('malformed', 'a binary COPY field has a negative length');
      starts[k] = p + 4;
      lengths[k] = len;
      p += 4 + Math.max(len, 0);
      if (p - at > this.#o.maxRowBytes) throw new CopyOutError('row_too_long', `a COPY row exceeds the gateway's row bound (${this.#o.maxRowBytes} bytes)`);
      if (p > buf.length) return 0;
    }
    this.rows++;
    const values: (string | null)[] = new Array(count);
    for (let k = 0; k < count; k++) values[k] = lengths[k] === -1 || !this.#o.textColumns[k] ? null : buf.toString('utf8', starts[k], starts[k]! + lengths[k]!);
    const r = this.#redact(values);
    if (r === null) {
      out.push(buf.subarray(at, p));
      return p - at;
    }
    const rebuilt: Buffer[] = [buf.subarray(at, at + 2)];
    for (let k = 0; k < count; k++) {
      const v = r[k];
      if (v === values[k]) {
        rebuilt.push(buf.subarray(starts[k]! - 4, starts[k]! + Math.max(lengths[k]!, 0)));
        continue;
      }
      const len = Buffer.allocUnsafe(4);
      if (v === null || v === undefined) {
        len.writeInt32BE(-1, 0);
        rebuilt.push(len);
      } else {
        const bytes = Buffer.from(v, 'utf8');
        len.writeInt32BE(bytes.length, 0);
        rebuilt.push(len, bytes);
      }
    }
    out.push(Buffer.concat(rebuilt));
    return p - at;
  }
}

/** Text-format fields of one line (its newline excluded): split at delimiters no backslash escapes. */
function splitText(line: Buffer, delimiter: number): Buffer[] {
  const end = line.length - 1;
  const fields: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < end; i++) {
    const c = line[i]!;
    if (c === BACKSLASH) i++;
    else if (c === delimiter) {
      fields.push(line.subarray(start, i));
      start = i + 1;
    }
  }
  fields.push(line.subarray(start, end));
  return fields;
}

/** CSV fields of one line (its newline excluded): split at delimiters outside quotes. */
function splitCsv(line: Buffer, f: CopyFormat): Buffer[] {
  const end = line.length - 1;
  const fields: Buffer[] = [];
  let start = 0;
  let inQuote = false;
  for (let i = 0; i < end; i++) {
    const c = line[i]!;
    if (inQuote && c === f.escape && f.escape !== f.quote) i++;
    else if (c === f.quote) inQuote = !inQuote;
    else if (c === f.delimiter && !inQuote) {
      fields.push(line.subarray(start, i));
      start = i + 1;
    }
  }
  fields.push(line.subarray(start, end));
  return fields;
}
