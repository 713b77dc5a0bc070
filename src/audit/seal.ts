// Batch seals: a digest of each stored row's canonical text and a hash chained to the previous sealed batch of the same writer chain (tamper evidence, docs/decisions/0024).
import { hash } from 'node:crypto';
import { newAuditId, type AuditEntry } from './entry.js';

/** Bytes kept of each row's SHA-256 (128 bits: a second preimage stays out of reach). */
export const DIGEST_BYTES = 16;
/** The previous hash of a chain's first seal. */
export const GENESIS_HASH: Buffer = Buffer.alloc(32);
/**
 * Seal formats (migration 0021, docs/decisions/0031). 1: a row's digest is of its COPY text line, ids stored as uuid[].
 * 2 (what the writer seals now): of its binary COPY tuple, ids stored packed. Each has its own hash domain.
 */
export type SealFormat = 1 | 2;
export const SEAL_FORMAT: SealFormat = 2;
const DOMAIN: Record<SealFormat, string> = { 1: 'gatehouse-audit-seal-v1', 2: 'gatehouse-audit-seal-v2' };

/** What audit_seals stores for one batch (migration 0017). */
export interface BatchSeal {
  format: SealFormat;
  writer_id: string;
  seq: number;
  /** The chain's last seal known to be stored when this one was made (0: none); an attempt that failed is skipped. */
  prev_seq: number;
  prev_hash: Buffer;
  hash: Buffer;
  row_count: number;
  min_ts: string;
  max_ts: string;
  /** The batch's entry ids, in batch order. */
  ids: string[];
  /**
   * DIGEST_BYTES per row, in the order of ids: SHA-256 of the row's canonical form — its binary COPY tuple (format 2,
   * auditTuple) or its COPY text line (format 1, auditCopyLine).
   */
  digests: Buffer;
}

/**
 * The digest of one row's canonical form, its binary tuple (format 2) or its text line (format 1), as DIGEST_BYTES * 2
 * hex digits. Hex is `hash()`'s fast case: asked for a Buffer, Node lower-cases the encoding's name twice per call
 * (ICU's toLowerCase), which cost more than the SHA-256 of a row (docs/decisions/0032).
 */
export function rowDigestHex(canonical: Uint8Array | string): string {
  return hash('sha256', canonical, 'hex').slice(0, DIGEST_BYTES * 2);
}

/** rowDigestHex as bytes. */
export function rowDigest(canonical: Uint8Array | string): Buffer {
  return Buffer.from(rowDigestHex(canonical), 'hex');
}

/** The seal's hash: its format, chain position, its link to the previous seal and every row's id and digest. */
export function sealHash(s: Omit<BatchSeal, 'hash' | 'min_ts' | 'max_ts'>): Buffer {
  let text = `${DOMAIN[s.format]}\n${s.writer_id}\n${s.seq}\n${s.prev_seq}\n${s.prev_hash.toString('hex')}\n${s.row_count}\n`;
  // One hex conversion for all the digests, sliced per row: a conversion per row cost more than the rest of the loop.
  const hex = s.digests.toString('hex');
  const width = DIGEST_BYTES * 2;
  for (let i = 0; i < s.ids.length; i++) text += `${s.ids[i]} ${hex.slice(i * width, (i + 1) * width)}\n`;
  return Buffer.from(hash('sha256', text, 'hex'), 'hex');
}

/**
 * One chain of seals: one batch at a time (the writer gives each batch in flight its own chain). A seal links to the
 * last seal of the chain known to be stored; a batch that failed keeps its sequence number, and the next seal names
 * the one before it, so the verifier can tell a skipped attempt from a removed batch.
 */
export class SealChain {
  readonly writerId: string;
  #nextSeq = 1;
  #lastSeq = 0;
  #lastHash: Buffer = GENESIS_HASH;

  constructor(writerId: string = newAuditId()) {
    this.writerId = writerId;
  }

  /** Seals a batch (format 2): `tuples[i]` is the binary COPY tuple of `entries[i]` as it will be stored. */
  seal(entries: readonly AuditEntry[], tuples: readonly Uint8Array[]): BatchSeal {
    return this.sealDigests(entries, tuples.map((t) => rowDigestHex(t)));
  }

  /** Seals a batch (format 2) whose rows are digested already: `digests[i]` is rowDigestHex of `entries[i]`'s tuple. */
  sealDigests(entries: readonly AuditEntry[], digests: readonly string[]): BatchSeal {
    if (digests.length !== entries.length || digests.some((d) => d.length !== DIGEST_BYTES * 2)) throw new TypeError('a seal needs one digest of DIGEST_BYTES per entry');
    // One conversion for the batch: the digests' hex joined is the packed column's hex.
    const packed = Buffer.from(digests.join(''), 'hex');
    if (packed.length !== entries.length * DIGEST_BYTES) throw new TypeError('a row digest is not hex');
    const ids: string[] = new Array<string>(entries.length);
    let min = entries[0]!.ts;
    let max = min;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      ids[i] = e.id;
      // Valid timestamps share one fixed-width format: text order is time order.
      if (e.ts < min) min = e.ts;
      if (e.ts > max) max = e.ts;
    }
    const body = { format: SEAL_FORMAT, writer_id: this.writerId, seq: this.#nextSeq++, prev_seq: this.#lastSeq, prev_hash: this.#lastHash, row_count: entries.length, ids, digests: packed };
    return { ...body, hash: sealHash(body), min_ts: min, max_ts: max };
  }

  /** The seal is stored (committed with its rows): the chain's next seal links to it. */
  stored(seal: BatchSeal): void {
    if (seal.writer_id !== this.writerId || seal.seq <= this.#lastSeq) return;
    this.#lastSeq = seal.seq;
    this.#lastHash = seal.hash;
  }
}

/** Chains for the batches a writer has in flight: each batch takes a free chain and gives it back when settled. */
export class SealChains {
  readonly #free: SealChain[] = [];

  take(): SealChain {
    return this.#free.pop() ?? new SealChain();
  }

  release(chain: SealChain): void {
    this.#free.push(chain);
  }
}

const bytea = (b: Buffer): string => `'\\x${b.toString('hex')}'`;

/**
 * The seal as one INSERT statement of literals, sent after the batch's COPY in the same simple query: one implicit
 * transaction, so the seal is stored exactly when the rows are, with no extra round trip. Every value is generated
 * here or validated (ids by UUID pattern, timestamps by format: assertValidEntry), so none needs quoting beyond this.
 */
export function sealInsertSql(s: BatchSeal): string {
  return (
    'insert into audit_seals (format, writer_id, seq, prev_seq, prev_hash, hash, row_count, min_ts, max_ts, id_bytes, digests) values (' +
    `${s.format}, '${s.writer_id}', ${s.seq}, ${s.prev_seq}, ${bytea(s.prev_hash)}, ${bytea(s.hash)}, ${s.row_count}, '${s.min_ts}', '${s.max_ts}', ` +
    `'\\x${packedIdsHex(s.ids)}', ${bytea(s.digests)})`
  );
}

/**
 * The ids as stored by format 2: 16 bytes each, in batch order, here as hex (a UUID's hex digits without its dashes).
 * PostgreSQL decodes hex bytea for ≈ a third of what it spends parsing as many uuid[] elements (docs/decisions/0031).
 */
export function packedIdsHex(ids: readonly string[]): string {
  let hex = '';
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    hex += id.slice(0, 8) + id.slice(9, 13) + id.slice(14, 18) + id.slice(19, 23) + id.slice(24);
  }
  return hex;
}

/** A format-2 seal's packed ids as UUID text, in batch order. */
export function unpackIds(bytes: Uint8Array): string[] {
  const hex = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
  const ids: string[] = new Array<string>(bytes.byteLength >> 4);
  for (let i = 0, o = 0; i < ids.length; i++, o += 32) {
    ids[i] = `${hex.slice(o, o + 8)}-${hex.slice(o + 8, o + 12)}-${hex.slice(o + 12, o + 16)}-${hex.slice(o + 16, o + 20)}-${hex.slice(o + 20, o + 32)}`;
  }
  return ids;
}
