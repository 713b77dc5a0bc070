// Batch seals: a digest of each stored row's canonical form, a locator per row, and a hash chained to the previous sealed batch of the same writer chain (tamper evidence, docs/decisions/0024 and 0033).
import { hash } from 'node:crypto';
import { newAuditId, type AuditEntry } from './entry.js';

/** Bytes kept of each row's SHA-256 (128 bits: a second preimage stays out of reach). */
export const DIGEST_BYTES = 16;
/** The previous hash of a chain's first seal. */
export const GENESIS_HASH: Buffer = Buffer.alloc(32);
/**
 * Seal formats (migrations 0021 and 0023, docs/decisions/0031 and 0033). 1: a row's digest is of its COPY text line, the
 * batch's ids stored as uuid[] beside the digests. 2: of its binary COPY tuple, ids stored packed beside the digests.
 * 3 (what the writer seals now): the same digest as 2, but the seal stores only a short locator per row (LOCATOR_BYTES)
 * and a hash of the full digests, which keeps a seal of 500 rows inline (4 kB, no TOAST). Each has its own hash domain.
 */
export type SealFormat = 1 | 2 | 3;
export const SEAL_FORMAT = 3 as const;
const DOMAIN: Record<SealFormat, string> = { 1: 'gatehouse-audit-seal-v1', 2: 'gatehouse-audit-seal-v2', 3: 'gatehouse-audit-seal-v3' };
/**
 * A format-3 row's locator: the last 4 bytes of its id (random bits of the UUIDv7), which find the row among those of
 * the seal's time range, then the first 4 bytes of its digest, which tell an edited row from an intact one.
 */
export const LOCATOR_BYTES = 8;
const LOCATOR_ID_HEX = 8;

/** What audit_seals stores for one batch, whatever its format (migration 0017). */
interface SealHeader {
  writer_id: string;
  seq: number;
  /** The chain's last seal known to be stored when this one was made (0: none); an attempt that failed is skipped. */
  prev_seq: number;
  prev_hash: Buffer;
  hash: Buffer;
  row_count: number;
  min_ts: string;
  max_ts: string;
}

/** Formats 1 and 2: the batch's ids and each row's digest. */
export interface ListedSeal extends SealHeader {
  format: 1 | 2;
  /** The batch's entry ids, in batch order. */
  ids: string[];
  /**
   * DIGEST_BYTES per row, in the order of ids: SHA-256 of the row's canonical form — its binary COPY tuple (format 2,
   * auditTuple) or its COPY text line (format 1, auditCopyLine).
   */
  digests: Buffer;
}

/** Format 3: a locator per row and the SHA-256 of the rows' full digests, both in batch order. */
export interface LocatedSeal extends SealHeader {
  format: 3;
  /** LOCATOR_BYTES per row: rowLocatorHex of each entry and its digest. */
  locators: Buffer;
  /** rowsHash of the batch's packed digests (DIGEST_BYTES per row, of each row's binary COPY tuple). */
  rows_hash: Buffer;
}

export type BatchSeal = ListedSeal | LocatedSeal;

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

/** A format-3 row's locator as hex: its id's end (idLocatorHex), then its digest's first digits. */
export function rowLocatorHex(id: string, digestHex: string): string {
  return idLocatorHex(id) + digestHex.slice(0, LOCATOR_BYTES * 2 - LOCATOR_ID_HEX);
}

/** The locator's id part as hex: what a stored row's id must end with to be the row a locator names. */
export function locatorIdHex(locators: Buffer, k: number): string {
  return locators.toString('hex', k * LOCATOR_BYTES, k * LOCATOR_BYTES + LOCATOR_ID_HEX / 2);
}

/** The locator's digest part: the first bytes a row's digest must have. */
export function locatorDigestPart(locators: Buffer, k: number): Buffer {
  return locators.subarray(k * LOCATOR_BYTES + LOCATOR_ID_HEX / 2, (k + 1) * LOCATOR_BYTES);
}

/** The id part of a row's locator: the last LOCATOR_ID_HEX hex digits of its id. */
export function idLocatorHex(id: string): string {
  return id.slice(-LOCATOR_ID_HEX);
}

/** A format-3 seal's rows_hash: the SHA-256 of the rows' digests packed in batch order. */
export function rowsHash(packedDigests: Buffer): Buffer {
  return Buffer.from(hash('sha256', packedDigests, 'hex'), 'hex');
}

type SealBody = Omit<ListedSeal, 'hash' | 'min_ts' | 'max_ts'> | Omit<LocatedSeal, 'hash' | 'min_ts' | 'max_ts'>;

/**
 * The seal's hash: its format, chain position, its link to the previous seal, and every row's id and digest (formats 1
 * and 2) or every row's locator and the hash of the rows' digests (format 3).
 */
export function sealHash(s: SealBody): Buffer {
  let text = `${DOMAIN[s.format]}\n${s.writer_id}\n${s.seq}\n${s.prev_seq}\n${s.prev_hash.toString('hex')}\n${s.row_count}\n`;
  if (s.format === 3) {
    text += `${s.locators.toString('hex')}\n${s.rows_hash.toString('hex')}\n`;
  } else {
    // One hex conversion for all the digests, sliced per row: a conversion per row cost more than the rest of the loop.
    const hex = s.digests.toString('hex');
    const width = DIGEST_BYTES * 2;
    for (let i = 0; i < s.ids.length; i++) text += `${s.ids[i]} ${hex.slice(i * width, (i + 1) * width)}\n`;
  }
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

  /** Seals a batch (format 3): `tuples[i]` is the binary COPY tuple of `entries[i]` as it will be stored. */
  seal(entries: readonly AuditEntry[], tuples: readonly Uint8Array[]): LocatedSeal {
    return this.sealDigests(entries, tuples.map((t) => rowDigestHex(t)));
  }

  /** Seals a batch (format 3) whose rows are digested already: `digests[i]` is rowDigestHex of `entries[i]`'s tuple. */
  sealDigests(entries: readonly AuditEntry[], digests: readonly string[]): LocatedSeal {
    if (digests.length !== entries.length || digests.some((d) => d.length !== DIGEST_BYTES * 2)) throw new TypeError('a seal needs one digest of DIGEST_BYTES per entry');
    // One conversion for the batch: the digests' hex joined is the packed digests' hex.
    const packed = Buffer.from(digests.join(''), 'hex');
    if (packed.length !== entries.length * DIGEST_BYTES) throw new TypeError('a row digest is not hex');
    let locators = '';
    let min = entries[0]!.ts;
    let max = min;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      locators += rowLocatorHex(e.id, digests[i]!);
      // Valid timestamps share one fixed-width format: text order is time order.
      if (e.ts < min) min = e.ts;
      if (e.ts > max) max = e.ts;
    }
    const body = {
      format: SEAL_FORMAT, writer_id: this.writerId, seq: this.#nextSeq++, prev_seq: this.#lastSeq, prev_hash: this.#lastHash, row_count: entries.length,
      locators: Buffer.from(locators, 'hex'), rows_hash: rowsHash(packed),
    };
    // Ids are validated UUIDs (assertValidEntry): every locator is LOCATOR_BYTES of hex.
    if (body.locators.length !== entries.length * LOCATOR_BYTES) throw new TypeError('an entry id is not a UUID');
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

/** The columns a format-3 seal is inserted with, in sealInsertSql's order. */
export const SEAL_INSERT_COLUMNS = 'format, writer_id, seq, prev_seq, prev_hash, hash, row_count, min_ts, max_ts, locators, rows_hash';

/**
 * The seal as one INSERT statement of literals, sent after the batch's COPY in the same simple query: one implicit
 * transaction, so the seal is stored exactly when the rows are, with no extra round trip. Every value is generated
 * here or validated (timestamps by format: assertValidEntry), so none needs quoting beyond this.
 */
export function sealInsertSql(s: LocatedSeal): string {
  return (
    `insert into audit_seals (${SEAL_INSERT_COLUMNS}) values (` +
    `${s.format}, '${s.writer_id}', ${s.seq}, ${s.prev_seq}, ${bytea(s.prev_hash)}, ${bytea(s.hash)}, ${s.row_count}, '${s.min_ts}', '${s.max_ts}', ` +
    `${bytea(s.locators)}, ${bytea(s.rows_hash)})`
  );
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
