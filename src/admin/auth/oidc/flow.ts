// One-time sign-in flow state (spec §5.4): PKCE verifier, nonce and `next` under the state value in the coordination store for flow_ttl_seconds, consumed atomically exactly once.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Coordination } from '../../../coord/index.js';

export interface FlowRecord {
  verifier: string;
  nonce: string;
  next: string;
  created_at: number;
  /** SHA-256 of the browser binding: the random value the starting browser holds in its flow cookie. */
  binding: string;
}

/** What a state value looks like (43 base64url characters, 256 random bits); anything else is refused before a lookup. */
const STATE_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export class OidcFlows {
  constructor(
    private readonly coord: Coordination,
    private readonly ttlSeconds: number,
  ) {}

  /**
   * A new flow: fresh state, nonce and PKCE verifier, stored for flow_ttl_seconds, and the browser binding to set as the
   * starting browser's flow cookie (only its hash is stored). A callback must come from that browser: otherwise a
   * provider redirect captured in one browser (the attacker's own sign-in) would sign in whoever is sent to it.
   */
  async start(next: string): Promise<{ state: string; browserBinding: string } & FlowRecord> {
    const state = randomBytes(32).toString('base64url');
    const browserBinding = randomBytes(32).toString('base64url');
    const record: FlowRecord = { verifier: randomBytes(32).toString('base64url'), nonce: randomBytes(32).toString('base64url'), next, created_at: Date.now(), binding: bindingHash(browserBinding) };
    const stored = await this.coord.setIfAbsent(key(state), JSON.stringify(record), { ttlMs: this.ttlSeconds * 1000 });
    if (!stored) throw new Error('state collision');
    return { state, browserBinding, ...record };
  }

  /**
   * Takes the flow of a state value, deleting it in the same step (GETDEL): of a replayed or concurrent callback, exactly
   * one gets the record; the others, and tampered or expired states, get null.
   */
  async consume(state: unknown): Promise<FlowRecord | null> {
    if (typeof state !== 'string' || !STATE_PATTERN.test(state)) return null;
    const raw = await this.coord.getDel(key(state));
    if (raw === null) return null;
    try {
      const r = JSON.parse(raw) as FlowRecord;
      return typeof r.verifier === 'string' && typeof r.nonce === 'string' && typeof r.next === 'string' && typeof r.binding === 'string' ? r : null;
    } catch {
      return null;
    }
  }
}

/** Whether the browser's flow cookie holds the binding of this flow; a missing or foreign cookie never does. */
export function sameBrowser(record: FlowRecord, cookieValue: unknown): boolean {
  if (typeof cookieValue !== 'string' || !STATE_PATTERN.test(cookieValue)) return false;
  const a = Buffer.from(bindingHash(cookieValue));
  const b = Buffer.from(record.binding);
  return a.length === b.length && timingSafeEqual(a, b);
}

function bindingHash(binding: string): string {
  return createHash('sha256').update(binding).digest('base64url');
}

function key(state: string): string {
  return `oidc:flow:${state}`;
}
