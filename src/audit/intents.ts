// The write-intent journal: before a write reaches its upstream, its entry-so-far is fsynced here; the finished entry completes it; on restart, an intent never completed becomes an entry with outcome unknown.
import { open, readdir, readFile, unlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { assertValidEntry, boundedAuditText, type AuditEntry } from './entry.js';
import type { AuditLogger } from './context.js';
import { frameRecord, MAX_RECORD_BYTES, RECORD_HEADER_BYTES, syncDirectory } from './spool.js';

const SEGMENT_RE = /^intents-(\d{12})\.log$/;
/** A segment is closed at this size; it is deleted once every intent in it was completed. */
const SEGMENT_BYTES = 1024 * 1024;

/** The error code of the entry an interrupted write gets: the request reached (or may have reached) its upstream, its answer is unknown. */
export const OUTCOME_UNKNOWN = 'outcome_unknown';
export const OUTCOME_UNKNOWN_REASON = 'audit: the gateway stopped while the write was at its upstream; outcome unknown';

/** One journal record: an intent (the entry as known before the upstream saw the request) or a completion (its id). */
type JournalRecord = { k: 'i'; e: AuditEntry } | { k: 'd'; id: string };

/** Every whole, intact record of a segment; a torn tail (a crash mid-append, completions are not fsynced) ends it. */
export function decodeJournal(buf: Buffer): { records: JournalRecord[]; damaged: number } {
  const records: JournalRecord[] = [];
  let damaged = 0;
  let off = 0;
  while (off + RECORD_HEADER_BYTES <= buf.length) {
    const len = buf.readUInt32BE(off);
    if (len === 0 || len > MAX_RECORD_BYTES || off + RECORD_HEADER_BYTES + len > buf.length) {
      damaged += 1;
      break;
    }
    const payload = buf.subarray(off + RECORD_HEADER_BYTES, off + RECORD_HEADER_BYTES + len);
    off += RECORD_HEADER_BYTES + len;
    if (crc32(payload) !== buf.readUInt32BE(off - len - 4)) {
      damaged += 1;
      continue;
    }
    try {
      const record = JSON.parse(payload.toString('utf8')) as JournalRecord;
      if (record.k === 'i') assertValidEntry(record.e);
      else if (record.k !== 'd' || typeof record.id !== 'string') throw new TypeError('unknown record');
      records.push(record);
    } catch {
      damaged += 1;
    }
  }
  return { records, damaged };
}

/** The entry an intent without completion becomes: what was known before the upstream, outcome unknown. */
export function unknownOutcomeEntry(intent: AuditEntry): AuditEntry {
  const reasons = intent.reasons.length < 16 ? [...intent.reasons, boundedAuditText(OUTCOME_UNKNOWN_REASON)!] : intent.reasons;
  return { ...intent, error_code: OUTCOME_UNKNOWN, reasons };
}

interface Segment {
  seq: number;
  file: string;
  /** Intents of this segment not yet completed. */
  open: Set<string>;
}

interface Waiter {
  id: string;
  record: Buffer;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * Lives in the spool directory and under its lock (one process per spool, so one per journal). Intents are group
 * committed: concurrent intents share one write and one fdatasync, as spool appends do. Completions are written
 * without a sync: a completion lost in a crash turns a finished write into an `outcome_unknown` entry with the same
 * id and ts as its real one, which storage ignores as a duplicate (spec §6.4 "never twice") when the real one was
 * stored; only a write whose real entry never became durable shows up as unknown.
 */
export class IntentJournal {
  readonly dir: string;
  readonly #logger: AuditLogger;
  readonly #segments: Segment[] = [];
  /** Which segment holds each open intent. */
  readonly #openIn = new Map<string, Segment>();
  #active: { seg: Segment; handle: FileHandle; bytes: number } | null = null;
  #nextSeq = 1;
  #queue: Waiter[] = [];
  #completions: Buffer[] = [];
  #writing: Promise<void> | null = null;
  #closed = false;
  /** The segment files `recover()` read, deleted by `discardRecovered()`. */
  #recovered: string[] = [];

  constructor(opts: { dir: string; logger: AuditLogger }) {
    this.dir = path.resolve(opts.dir);
    this.#logger = opts.logger;
  }

  /**
   * Reads what an earlier process left and returns its intents that were never completed, oldest first. The caller
   * stores them as `outcome_unknown` entries and then calls `discardRecovered()`. The spool lock must be held.
   */
  async recover(): Promise<AuditEntry[]> {
    const names = (await readdir(this.dir)).filter((n) => SEGMENT_RE.test(n)).sort();
    const intents = new Map<string, AuditEntry>();
    const done = new Set<string>();
    let damaged = 0;
    for (const name of names) {
      this.#nextSeq = Math.max(this.#nextSeq, Number(SEGMENT_RE.exec(name)![1]) + 1);
      const decoded = decodeJournal(await readFile(path.join(this.dir, name)));
      damaged += decoded.damaged;
      for (const r of decoded.records) {
        if (r.k === 'i') intents.set(r.e.id, r.e);
        else done.add(r.id);
      }
    }
    this.#recovered = names.map((n) => path.join(this.dir, n));
    if (damaged > 0) this.#logger.warn({ spool: this.dir, damaged }, 'audit intent journal ended in a torn or damaged record (a crash mid-append); skipped');
    return [...intents.values()].filter((e) => !done.has(e.id));
  }

  /** Deletes the segments `recover()` read, once their unfinished intents are stored elsewhere. */
  async discardRecovered(): Promise<void> {
    for (const file of this.#recovered.splice(0)) await unlink(file).catch(() => undefined);
    await this.#syncDir();
  }

  /** Durably records an intent: resolves once it is written and fsynced. */
  record(entry: AuditEntry): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('audit intent journal is closed'));
    const record = frameRecord({ k: 'i', e: entry } satisfies JournalRecord);
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ id: entry.id, record, resolve, reject });
      this.#kick();
    });
  }

  /** Marks an intent completed (its finished entry is durable). Not synced; see the class comment. */
  complete(id: string): void {
    const seg = this.#openIn.get(id);
    if (seg === undefined) return;
    this.#openIn.delete(id);
    seg.open.delete(id);
    if (this.#closed) return;
    this.#completions.push(frameRecord({ k: 'd', id } satisfies JournalRecord));
    this.#kick();
  }

  /** Intents recorded and not yet completed (for stats and tests). */
  get open(): number {
    return this.#openIn.size;
  }

  #kick(): void {
    this.#writing ??= this.#drain().finally(() => {
      this.#writing = null;
      if (this.#queue.length > 0 || this.#completions.length > 0) this.#kick();
    });
  }

  async #drain(): Promise<void> {
    const waiters = this.#queue.splice(0);
    const completions = this.#completions.splice(0);
    try {
      if (this.#active === null || this.#active.bytes >= SEGMENT_BYTES) await this.#rotate();
      const active = this.#active!;
      const chunk = Buffer.concat([...completions, ...waiters.map((w) => w.record)]);
      if (chunk.length > 0) await active.handle.write(chunk);
      active.bytes += chunk.length;
      if (waiters.length > 0) await active.handle.datasync();
      for (const w of waiters) {
        active.seg.open.add(w.id);
        this.#openIn.set(w.id, active.seg);
        w.resolve();
      }
      await this.#dropFinished();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'io_error';
      this.#logger.error({ spool: this.dir, err_code: code }, 'audit intent journal write failed');
      // The segment may end in a torn record: later records go to a new one.
      await this.#sealActive().catch(() => undefined);
      const err = new Error(`audit intent journal ${this.dir} write failed: ${code}`, { cause: error });
      for (const w of waiters) w.reject(err);
    }
  }

  async #rotate(): Promise<void> {
    await this.#sealActive();
    const seq = this.#nextSeq++;
    const file = path.join(this.dir, `intents-${String(seq).padStart(12, '0')}.log`);
    const handle = await open(file, 'wx', 0o600);
    const seg: Segment = { seq, file, open: new Set() };
    this.#segments.push(seg);
    this.#active = { seg, handle, bytes: 0 };
    await this.#syncDir();
  }

  async #sealActive(): Promise<void> {
    const active = this.#active;
    if (!active) return;
    this.#active = null;
    await active.handle.close();
  }

  /** Closed segments whose every intent was completed are deleted. */
  async #dropFinished(): Promise<void> {
    for (let i = this.#segments.length - 1; i >= 0; i--) {
      const seg = this.#segments[i]!;
      if (seg === this.#active?.seg || seg.open.size > 0) continue;
      this.#segments.splice(i, 1);
      await unlink(seg.file).catch(() => undefined);
    }
  }

  #syncDir(): Promise<void> {
    return syncDirectory(this.dir);
  }

  /**
   * Stops the journal. Its files stay when intents are open (the next start turns them into `outcome_unknown`
   * entries); with none open, they are deleted.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    while (this.#writing) await this.#writing;
    this.#closed = true;
    const openIntents = this.#openIn.size;
    await this.#sealActive();
    if (openIntents === 0) {
      for (const seg of this.#segments.splice(0)) await unlink(seg.file).catch(() => undefined);
    }
  }
}
