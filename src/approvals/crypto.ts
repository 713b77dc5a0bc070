// Encryption at rest of stored approval requests: AES-256-GCM under a key derived from approvals.encryption_key_ref, with a version byte for key rotation.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Binds ciphertexts to their purpose, so a payload cannot be replayed into another encrypted column. */
const AAD = Buffer.from('gatehouse:approval-request:v1');

export class PayloadCipher {
  readonly #key: Buffer;

  constructor(secret: string) {
    if (secret.length === 0) throw new TypeError('approval encryption secret is empty');
    // The configured secret is text of any length; hashing gives the 32 bytes AES-256 needs.
    this.#key = createHash('sha256').update('gatehouse approvals key').update(secret).digest();
  }

  encrypt(plaintext: Buffer): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(AAD);
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
  }

  /** Throws when the payload was altered or encrypted under another key. */
  decrypt(payload: Buffer): Buffer {
    if (payload.length < 1 + IV_BYTES + TAG_BYTES || payload[0] !== VERSION) throw new Error('approval payload has an unknown format');
    const iv = payload.subarray(1, 1 + IV_BYTES);
    const tag = payload.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', this.#key, iv);
    decipher.setAAD(AAD);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(payload.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]);
  }
}
