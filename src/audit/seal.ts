// Batch seals: a digest of each stored row's canonical text and a hash chained to the previous sealed batch of the same writer chain (tamper evidence, docs/decisions/0024).
import { hash } from 'node:crypto';
import { newAuditId, type AuditEntry } from './entry.js';

/** Bytes kept of each row's SHA-256 (128 bits: a second preimage stays out of reach). */
export const DIGEST_BYTES = 16;
/** The previous hash of a chain's first seal. */
export const GENESIS_HASH: Buffer = Buffer.alloc(32);
const DOMAIN = 'gatehouse-audit-seal-v1';

/** What audit_seals stores for one batch (migration 0017). */
export interface BatchSeal {
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
  /** DIGEST_BYTES per row, in the order of ids: SHA-256 of the row's canonical text (its COPY text line). */
  digests: Buffer;
}

/** The digest of one row's canonical text (auditCopyLine of the entry as stored). */
export function rowDigest(line: string): Buffer {
  return hash('sha256', line, 'buffer').subarray(0, DIGEST_BYTES);
}

/** The seal's hash: its chain position, its link to the previous seal and every row's id and digest. */
export function sealHash(s: Omit<BatchSeal, 'hash' | 'min_ts' | 'max_ts'>): Buffer {
  let text = `${DOMAIN}\n${s.writer_id}\n${s.seq}\n${s.prev_seq}\n${s.prev_hash.toString('hex')}\n${s.row_count}\n`;
  for (let i = 0; i < s.ids.length; i++) text += `${s.ids[i]} ${s.digests.toString('hex', i * DIGEST_BYTES, (i + 1) * DIGEST_BYTES)}\n`;
  return hash('sha256', text, 'buffer');
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

  /** Seals a batch: `lines[i]` is the canonical text of `entries[i]` as it will be stored. */
  seal(entries: readonly AuditEntry[], lines: readonly string[]): BatchSeal {
    const digests = Buffer.allocUnsafe(entries.length * DIGEST_BYTES);
    const ids: string[] = new Array<string>(entries.length);
    let min = entries[0]!.ts;
    let max = min;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      ids[i] = e.id;
      rowDigest(lines[i]!).copy(digests, i * DIGEST_BYTES);
      // Valid timestamps share one fixed-width format: text order is time order.
      if (e.ts < min) min = e.ts;
      if (e.ts > max) max = e.ts;
    }
    const body = { writer_id: this.writerId, seq: this.#nextSeq++, prev_seq: this.#lastSeq, prev_hash: this.#lastHash, row_count: entries.length, ids, digests };
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
    'insert into audit_seals (writer_id, seq, prev_seq, prev_hash, hash, row_count, min_ts, max_ts, ids, digests) values (' +
    `'${s.writer_id}', ${s.seq}, ${s.prev_seq}, ${bytea(s.prev_hash)}, ${bytea(s.hash)}, ${s.row_count}, '${s.min_ts}', '${s.max_ts}', ` +
    `'{${s.ids.join(',')}}', ${bytea(s.digests)})`
  );
}
