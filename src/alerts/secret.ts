// Per-rule webhook signing secrets: generated once, shown once, kept encrypted at rest (AES-256-GCM under approvals.encryption_key_ref), and the HMAC signature of a delivery (docs/alerts.md "Webhook").
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Binds ciphertexts to this column, so an approval payload cannot be replayed as a webhook secret or back. */
const AAD = Buffer.from('gatehouse:alert-webhook-secret:v1');

/** `whsec_` and 32 random bytes, base64url. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export class WebhookSecretBox {
  readonly #key: Buffer;

  constructor(secret: string) {
    if (secret.length === 0) throw new TypeError('encryption secret is empty');
    // A key of its own, derived under another label than the approval payload key.
    this.#key = createHash('sha256').update('gatehouse alert webhook secrets').update(secret).digest();
  }

  seal(plaintext: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(AAD);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
  }

  /** Throws when the value was altered or sealed under another key. */
  open(sealed: Buffer): string {
    if (sealed.length < 1 + IV_BYTES + TAG_BYTES || sealed[0] !== VERSION) throw new Error('webhook secret has an unknown format');
    const decipher = createDecipheriv('aes-256-gcm', this.#key, sealed.subarray(1, 1 + IV_BYTES));
    decipher.setAAD(AAD);
    decipher.setAuthTag(sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}

/** `v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`: the receiver recomputes it over the raw body and the timestamp header. */
export function signWebhook(secret: string, timestamp: string, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}
