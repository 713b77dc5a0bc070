// The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it, against the identity's stored verifier.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ParsedScramVerifier } from '../../identity/keys.js';

export const SCRAM_MECHANISM = 'SCRAM-SHA-256';
const NONCE_BYTES = 18;
const PRINTABLE = /^[\x21-\x2b\x2d-\x7e]+$/;

export class ScramFailure extends Error {
  readonly code = 'scram_failed';
}

/**
 * One SCRAM exchange. Channel binding is not offered (no SCRAM-SHA-256-PLUS), so a client asking for it
 * ("p=") is refused; "y" (client could bind, believes the server cannot) is accepted per RFC 5802 §6.
 */
export class ScramServer {
  #clientFirstBare = '';
  #serverFirst = '';
  #gs2Header = '';
  #nonce = '';

  constructor(private readonly verifier: ParsedScramVerifier) {}

  /** Handles client-first-message; returns server-first-message. */
  first(clientFirst: string): string {
    const m = /^([ny]),(a=[^,]*)?,(.*)$/.exec(clientFirst);
    if (!m) throw new ScramFailure('malformed SCRAM client-first-message (channel binding is not supported)');
    this.#gs2Header = `${m[1]},${m[2] ?? ''},`;
    this.#clientFirstBare = m[3]!;
    const attrs = this.#clientFirstBare.split(',');
    const r = attrs.find((a) => a.startsWith('r='));
    if (!attrs[0]?.startsWith('n=') || !r || r.length < 3 || !PRINTABLE.test(r.slice(2))) throw new ScramFailure('malformed SCRAM client-first-message');
    this.#nonce = r.slice(2) + randomBytes(NONCE_BYTES).toString('base64');
    this.#serverFirst = `r=${this.#nonce},s=${this.verifier.salt.toString('base64')},i=${this.verifier.iterations}`;
    return this.#serverFirst;
  }

  /** Handles client-final-message; returns server-final-message, or throws ScramFailure when the proof is wrong. */
  final(clientFinal: string): string {
    const proofAt = clientFinal.lastIndexOf(',p=');
    if (proofAt < 0) throw new ScramFailure('malformed SCRAM client-final-message');
    const withoutProof = clientFinal.slice(0, proofAt);
    const attrs = withoutProof.split(',');
    const c = attrs.find((a) => a.startsWith('c='));
    const r = attrs.find((a) => a.startsWith('r='));
    if (c !== `c=${Buffer.from(this.#gs2Header).toString('base64')}`) throw new ScramFailure('SCRAM channel binding mismatch');
    if (r !== `r=${this.#nonce}`) throw new ScramFailure('SCRAM nonce mismatch');
    const proof = Buffer.from(clientFinal.slice(proofAt + 3), 'base64');
    const authMessage = `${this.#clientFirstBare},${this.#serverFirst},${withoutProof}`;
    const signature = createHmac('sha256', this.verifier.storedKey).update(authMessage).digest();
    if (proof.length !== signature.length) throw new ScramFailure('password authentication failed');
    const clientKey = Buffer.alloc(proof.length);
    for (let i = 0; i < proof.length; i++) clientKey[i] = proof[i]! ^ signature[i]!;
    const stored = createHash('sha256').update(clientKey).digest();
    if (!timingSafeEqual(stored, this.verifier.storedKey)) throw new ScramFailure('password authentication failed');
    const serverSignature = createHmac('sha256', this.verifier.serverKey).update(authMessage).digest();
    return `v=${serverSignature.toString('base64')}`;
  }
}

/**
 * A stand-in verifier for unknown wire users: the exchange runs to the end and fails like a wrong password,
 * with a salt stable per user name, so the answer does not reveal which names exist.
 */
export function decoyVerifier(secret: Buffer, user: string): ParsedScramVerifier {
  const salt = createHmac('sha256', secret).update(`salt:${user}`).digest().subarray(0, 16);
  return { iterations: 4096, salt, storedKey: randomBytes(32), serverKey: randomBytes(32) };
}
