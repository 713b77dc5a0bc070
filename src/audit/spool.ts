// The durable audit spool: append-only, checksummed, fsynced segment files that hold entries while PostgreSQL is unreachable, replayed in order.
import { mkdir, open, readdir, readFile, rm, unlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { assertValidEntry, type AuditEntry } from './entry.js';
import type { AuditLogger } from './context.js';
import { pidAlive } from '../util/pid.js';

/**
 * Record framing (big-endian): u32 payload length, u32 CRC-32 of the payload, payload (UTF-8 JSON
 * of one AuditEntry). A record is valid only if the length is plausible, the bytes are all there
 * and the checksum matches.
 */
const LENGTH_BYTES = 4;
const CRC_BYTES = 4;
export const RECORD_HEADER_BYTES = LENGTH_BYTES + CRC_BYTES;
/** Larger than any valid entry (text fields are capped at 16 KiB each); a bigger length is corruption. */
export const MAX_RECORD_BYTES = 4 * 1024 * 1024;

const SEGMENT_RE = /^segment-(\d{12})\.spool$/;
const LOCK_FILE = 'spool.lock';
/** Spool directories locked by this process: a lock file naming this pid but not listed here is a previous process's (a container restarted with the same pid). */
const lockedHere = new Set<string>();

/** The spool has no room within audit.spool.max_bytes. */
export class SpoolFullError extends Error {
  readonly code = 'spool_full' as const;
  constructor(message = 'audit spool is full') {
    super(message);
    this.name = 'SpoolFullError';
  }
}

/** The spool directory cannot be written (permissions, disk, lock held by another process). */
export class SpoolUnavailableError extends Error {
  readonly code = 'spool_unavailable' as const;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SpoolUnavailableError';
  }
}

/** Another live process holds the spool's lock: two processes must never share one spool. */
export class SpoolLockedError extends SpoolUnavailableError {
  readonly holderPid: number;
  constructor(dir: string, holderPid: number) {
    super(`audit spool ${dir} is in use by process ${holderPid}`);
    this.name = 'SpoolLockedError';
    this.holderPid = holderPid;
  }
}

export interface SpoolOptions {
  dir: string;
  maxBytes: number;
  segmentBytes: number;
  logger: AuditLogger;
}

interface Segment {
  seq: number;
  file: string;
  bytes: number;
  entries: number;
}

interface Pending {
  records: Buffer[];
  bytes: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** One framed record (length, CRC-32, JSON payload): the format of spool segments and of the write-intent journal. */
export function frameRecord(value: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(value), 'utf8');
  const header = Buffer.allocUnsafe(RECORD_HEADER_BYTES);
  header.writeUInt32BE(payload.length, 0);
  header.writeUInt32BE(crc32(payload), LENGTH_BYTES);
  return Buffer.concat([header, payload]);
}

export function encodeRecord(entry: AuditEntry): Buffer {
  return frameRecord(entry);
}

/** A new or deleted file name is durable only once its directory is fsynced (spool segments, intent journal). */
export async function syncDirectory(dir: string): Promise<void> {
  const h = await open(dir, 'r');
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}

export interface DecodedSegment {
  entries: AuditEntry[];
  corrupt: { offset: number; reason: 'truncated' | 'bad_length' | 'bad_checksum' | 'bad_payload' }[];
}

/**
 * Reads every valid record of a segment in order. A bad checksum or payload skips that one record
 * (its length still frames the next); a truncated record or an implausible length ends the segment,
 * since nothing after it can be framed reliably.
 */
export function decodeSegment(buf: Buffer): DecodedSegment {
  const out: DecodedSegment = { entries: [], corrupt: [] };
  let off = 0;
  while (off < buf.length) {
    if (buf.length - off < RECORD_HEADER_BYTES) {
      out.corrupt.push({ offset: off, reason: 'truncated' });
      break;
    }
    const len = buf.readUInt32BE(off);
    if (len === 0 || len > MAX_RECORD_BYTES) {
      out.corrupt.push({ offset: off, reason: 'bad_length' });
      break;
    }
    if (off + RECORD_HEADER_BYTES + len > buf.length) {
      out.corrupt.push({ offset: off, reason: 'truncated' });
      break;
    }
    const payload = buf.subarray(off + RECORD_HEADER_BYTES, off + RECORD_HEADER_BYTES + len);
    if (crc32(payload) !== buf.readUInt32BE(off + LENGTH_BYTES)) {
      out.corrupt.push({ offset: off, reason: 'bad_checksum' });
    } else {
      try {
        const entry = JSON.parse(payload.toString('utf8')) as AuditEntry;
        assertValidEntry(entry);
        out.entries.push(entry);
      } catch {
        out.corrupt.push({ offset: off, reason: 'bad_payload' });
      }
    }
    off += RECORD_HEADER_BYTES + len;
  }
  return out;
}

export class AuditSpool {
  readonly dir: string;
  readonly maxBytes: number;
  readonly segmentBytes: number;
  readonly #logger: AuditLogger;
  #segments: Segment[] = [];
  #active: { seg: Segment; handle: FileHandle } | null = null;
  #nextSeq = 1;
  #bytes = 0;
  #entries = 0;
  #corrupt = 0;
  /** An append was refused for lack of room; cleared when an append fits again or replay frees space. */
  #refusedFull = false;
  #initialized = false;
  #lastError: string | null = null;
  #pending: Pending[] = [];
  #draining: Promise<void> | null = null;
  #lock: Promise<unknown> = Promise.resolve();
  #replaying: Promise<number> | null = null;
  #closed = false;

  constructor(opts: SpoolOptions) {
    if (!Number.isInteger(opts.maxBytes) || opts.maxBytes < 1) throw new TypeError('spool maxBytes must be a positive integer');
    if (!Number.isInteger(opts.segmentBytes) || opts.segmentBytes < 1) throw new TypeError('spool segmentBytes must be a positive integer');
    this.dir = path.resolve(opts.dir);
    this.maxBytes = opts.maxBytes;
    this.segmentBytes = opts.segmentBytes;
    this.#logger = opts.logger;
  }

  get bytes(): number {
    return this.#bytes;
  }
  get entries(): number {
    return this.#entries;
  }
  get corruptRecords(): number {
    return this.#corrupt;
  }
  /** The last I/O failure, null once an append succeeded again. */
  get lastError(): string | null {
    return this.#lastError;
  }
  get full(): boolean {
    return this.#bytes >= this.maxBytes;
  }
  /** Whether an append of a small record would be attempted (not known broken, not full). */
  get available(): boolean {
    return this.#lastError === null && !this.full && !this.#refusedFull;
  }

  /** Creates the directory, takes the lock and counts what earlier processes left. Safe to retry. */
  async init(): Promise<void> {
    if (this.#initialized) return;
    try {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      await this.#takeLock();
      const names = (await readdir(this.dir)).filter((n) => SEGMENT_RE.test(n)).sort();
      for (const name of names) {
        const file = path.join(this.dir, name);
        const buf = await readFile(file);
        const seg: Segment = { seq: Number(SEGMENT_RE.exec(name)![1]), file, bytes: buf.length, entries: decodeSegment(buf).entries.length };
        this.#segments.push(seg);
        this.#bytes += seg.bytes;
        this.#entries += seg.entries;
        this.#nextSeq = Math.max(this.#nextSeq, seg.seq + 1);
      }
      this.#initialized = true;
      this.#lastError = null;
      if (names.length > 0) this.#logger.info({ spool: this.dir, segments: names.length, entries: this.#entries, bytes: this.#bytes }, 'audit spool holds entries from an earlier run');
    } catch (error) {
      this.#lastError = (error as NodeJS.ErrnoException).code ?? (error instanceof Error ? error.message : 'error');
      throw error instanceof SpoolUnavailableError ? error : new SpoolUnavailableError(`audit spool ${this.dir} unavailable: ${this.#lastError}`, { cause: error });
    }
  }

  /** One process per spool: a second one could replay and delete a segment the first is still writing. */
  async #takeLock(): Promise<void> {
    const lockPath = path.join(this.dir, LOCK_FILE);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const h = await open(lockPath, 'wx', 0o600);
        await h.writeFile(String(process.pid));
        await h.close();
        lockedHere.add(this.dir);
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const pid = Number.parseInt(await readFile(lockPath, 'utf8').catch(() => ''), 10);
      const held = pid === process.pid ? lockedHere.has(this.dir) : Number.isInteger(pid) && pidAlive(pid);
      if (held) throw new SpoolLockedError(this.dir, pid);
      await rm(lockPath, { force: true });
    }
    throw new SpoolUnavailableError(`audit spool ${this.dir}: cannot take the lock`);
  }

  /**
   * Appends entries durably: resolves once they are written and fsynced. Concurrent appends are
   * written together with one fsync (group commit). Rejects with SpoolFullError when max_bytes
   * would be exceeded (nothing of that call is written) or SpoolUnavailableError on I/O failure.
   */
  append(entries: readonly AuditEntry[]): Promise<void> {
    if (this.#closed) return Promise.reject(new SpoolUnavailableError('audit spool is closed'));
    if (entries.length === 0) return Promise.resolve();
    const records = entries.map(encodeRecord);
    const bytes = records.reduce((n, r) => n + r.length, 0);
    return new Promise<void>((resolve, reject) => {
      this.#pending.push({ records, bytes, resolve, reject });
      this.#draining ??= this.#drain();
    });
  }

  /** Clears #draining in the same tick it sees the queue empty, so no append is left unwritten. */
  async #drain(): Promise<void> {
    try {
      while (this.#pending.length > 0) {
        const batch = this.#pending.splice(0);
        await this.#exclusive(() => this.#writeBatch(batch));
      }
    } finally {
      this.#draining = null;
    }
  }

  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn);
    this.#lock = run.catch(() => undefined);
    return run;
  }

  async #writeBatch(batch: Pending[]): Promise<void> {
    try {
      await this.init();
    } catch (error) {
      for (const p of batch) p.reject(error as Error);
      return;
    }
    const accepted: Pending[] = [];
    let planned = this.#bytes;
    for (const p of batch) {
      if (planned + p.bytes > this.maxBytes) {
        this.#refusedFull = true;
        p.reject(new SpoolFullError(`audit spool is full (${this.#bytes} of ${this.maxBytes} bytes)`));
      } else {
        accepted.push(p);
        planned += p.bytes;
      }
    }
    if (accepted.length === 0) return;
    try {
      let chunk: Buffer[] = [];
      let chunkBytes = 0;
      const writeChunk = async (): Promise<void> => {
        if (chunk.length === 0) return;
        await this.#active!.handle.write(Buffer.concat(chunk, chunkBytes));
        chunk = [];
        chunkBytes = 0;
      };
      for (const p of accepted) {
        for (const rec of p.records) {
          if (!this.#active || (this.#active.seg.bytes > 0 && this.#active.seg.bytes + rec.length > this.segmentBytes)) {
            await writeChunk();
            if (this.#active) await this.#active.handle.datasync();
            await this.#rotate();
          }
          chunk.push(rec);
          chunkBytes += rec.length;
          this.#active!.seg.bytes += rec.length;
          this.#active!.seg.entries += 1;
          this.#bytes += rec.length;
          this.#entries += 1;
        }
      }
      await writeChunk();
      await this.#active!.handle.datasync();
      this.#lastError = null;
      this.#refusedFull = false;
      for (const p of accepted) p.resolve();
    } catch (error) {
      this.#lastError = (error as NodeJS.ErrnoException).code ?? 'io_error';
      this.#logger.error({ spool: this.dir, err_code: this.#lastError }, 'audit spool write failed');
      // The segment may now end in a torn record: close it so later appends start a clean one.
      await this.#sealActive().catch(() => undefined);
      const err = new SpoolUnavailableError(`audit spool ${this.dir} write failed: ${this.#lastError}`, { cause: error });
      for (const p of accepted) p.reject(err);
    }
  }

  async #rotate(): Promise<void> {
    await this.#sealActive();
    const seq = this.#nextSeq++;
    const file = path.join(this.dir, `segment-${String(seq).padStart(12, '0')}.spool`);
    const handle = await open(file, 'wx', 0o600);
    const seg: Segment = { seq, file, bytes: 0, entries: 0 };
    this.#segments.push(seg);
    this.#active = { seg, handle };
    await this.#syncDir();
  }

  async #sealActive(): Promise<void> {
    const active = this.#active;
    if (!active) return;
    this.#active = null;
    await active.handle.close();
  }

  #syncDir(): Promise<void> {
    return syncDirectory(this.dir);
  }

  /**
   * Feeds every spooled entry, oldest segment first, to `consume` in batches; a segment is deleted
   * only after all its entries were consumed. If `consume` throws, replay stops and the segment
   * stays (consume must be idempotent by entry id: a crash mid-segment replays it again).
   * Returns the number of entries consumed.
   */
  replay(consume: (batch: AuditEntry[]) => Promise<void>, batchSize: number): Promise<number> {
    this.#replaying ??= this.#replay(consume, batchSize);
    return this.#replaying;
  }

  async #replay(consume: (batch: AuditEntry[]) => Promise<void>, batchSize: number): Promise<number> {
    try {
      return await this.#replaySegments(consume, batchSize);
    } finally {
      this.#replaying = null;
    }
  }

  async #replaySegments(consume: (batch: AuditEntry[]) => Promise<void>, batchSize: number): Promise<number> {
    await this.init();
    // Seal the segment being written so replay only reads files no one appends to.
    const segments = await this.#exclusive(async () => {
      await this.#sealActive();
      return [...this.#segments];
    });
    let consumed = 0;
    for (const seg of segments) {
      const decoded = decodeSegment(await readFile(seg.file));
      for (const c of decoded.corrupt) {
        this.#corrupt += 1;
        this.#logger.error({ spool: this.dir, segment: path.basename(seg.file), offset: c.offset, reason: c.reason }, 'audit spool record corrupted; skipped');
      }
      for (let i = 0; i < decoded.entries.length; i += batchSize) {
        const batch = decoded.entries.slice(i, i + batchSize);
        await consume(batch);
        consumed += batch.length;
      }
      await this.#exclusive(async () => {
        await unlink(seg.file);
        await this.#syncDir();
        this.#segments = this.#segments.filter((s) => s !== seg);
        this.#bytes -= seg.bytes;
        this.#entries -= seg.entries;
        this.#refusedFull = false;
      });
    }
    return consumed;
  }

  get segmentCount(): number {
    return this.#segments.length;
  }

  /** Waits for pending appends, closes the active segment and releases the lock. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#draining;
    await this.#replaying?.catch(() => undefined);
    await this.#exclusive(() => this.#sealActive());
    if (this.#initialized) {
      await rm(path.join(this.dir, LOCK_FILE), { force: true });
      lockedHere.delete(this.dir);
    }
  }
}
