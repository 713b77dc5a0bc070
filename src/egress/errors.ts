// Typed egress errors: what the gateway may say about a refused or failed upstream call (client-safe message) and what only logs may see (address, cause).
import { GatehouseError } from '../errors/registry.js';

/**
 * The target resolves to (or is) an address outside the egress policy (spec §4 rule 5).
 * `message` never names the address; `range`, `hostname` and `address` are for logs and audit only.
 */
export class EgressDeniedError extends GatehouseError {
  readonly range: string;
  readonly hostname: string;
  readonly address: string;

  constructor(info: { range: string; hostname: string; address: string }) {
    super('egress_denied');
    this.name = 'EgressDeniedError';
    this.range = info.range;
    this.hostname = info.hostname;
    this.address = info.address;
  }
}

/** What a connection test says when the egress rules refuse its target: the same words for every connector. */
export const EGRESS_DENIED_TEXT = 'target address not allowed (private, loopback or reserved; see gateway.egress.allow_private_sources)';

/** Safe, fixed descriptions of upstream failures; the original error stays in `cause`. */
export type UpstreamFailure =
  | 'connection refused'
  | 'host not found'
  | 'host unreachable'
  | 'timed out'
  | 'connection closed'
  | 'TLS negotiation failed'
  | 'invalid response'
  | 'invalid content encoding'
  | 'unsupported content encoding'
  | 'request failed';

/** An upstream connection or protocol failure (502). `reason` is safe to show; the cause is not. */
export class UpstreamError extends GatehouseError {
  readonly reason: UpstreamFailure;

  constructor(reason: UpstreamFailure, cause?: unknown) {
    super('upstream_failed', undefined, { cause, details: { reason } });
    this.name = 'UpstreamError';
    this.reason = reason;
  }

  /** Timeouts and connection failures count against the source's circuit; bad encodings do not. */
  get countsAsCircuitFailure(): boolean {
    return this.reason !== 'unsupported content encoding' && this.reason !== 'invalid content encoding';
  }
}

/** The upstream sent a content encoding the gateway cannot validate (spec §4 rule 8: rejected). */
export class UnsupportedEncodingError extends UpstreamError {
  readonly encoding: string;

  constructor(encoding: string) {
    super('unsupported content encoding');
    this.name = 'UnsupportedEncodingError';
    this.encoding = encoding;
  }
}

/** The upstream response (on the wire or decoded) passed the configured byte limit (413). */
export class ResponseTooLargeError extends GatehouseError {
  readonly limitBytes: number;

  constructor(limitBytes: number, stage: 'content-length' | 'body' | 'decoded') {
    super('payload_too_large', 'The upstream response exceeds the configured size limit.', { details: { stage } });
    this.name = 'ResponseTooLargeError';
    this.limitBytes = limitBytes;
  }
}

/** The source's circuit is open (or half-open with its probe in flight): 503 without calling upstream. */
export class CircuitOpenError extends GatehouseError {
  readonly sourceId: string;

  constructor(sourceId: string, retryAfterSeconds: number, cause?: unknown) {
    super('unavailable', 'The upstream is temporarily unavailable.', { cause, retryAfterSeconds });
    this.name = 'CircuitOpenError';
    this.sourceId = sourceId;
  }
}
