// One bounded upstream HTTP exchange through the egress dispatcher: no redirects, capped body on the wire and after decoding, validated content encodings, sanitized errors (spec §4 rules 4, 8, 11).
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { EgressDispatcher } from './agent.js';
import type { PlacedUrl } from '../governance/http-path.js';
import { GatehouseError } from '../errors/registry.js';
import { ResponseTooLargeError, UnsupportedEncodingError, UpstreamError } from './errors.js';
import type { UpstreamFailure } from './errors.js';

export type UpstreamMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface UpstreamRequestOptions {
  dispatcher: EgressDispatcher;
  url: PlacedUrl;
  method: UpstreamMethod;
  /** Already filtered to the request allowlist (spec §4 rule 6) plus the source's credential header. */
  headers: Record<string, string>;
  body?: Buffer | string | null;
  sourceId: string;
  /** Bounds headers, body and the whole exchange. */
  timeoutMs: number;
  /** Bounds the body on the wire and again after decoding. */
  maxResponseBytes: number;
  signal?: AbortSignal;
}

export interface UpstreamResponse {
  status: number;
  /**
   * Upstream headers as received (lower-case names), except that `content-encoding` is always removed (the body
   * is plain) and, when the body was decoded, `content-length` too (it described the encoded bytes). The response allowlist is the caller's.
   */
  headers: Record<string, string | string[]>;
  /** The complete, decoded body. */
  body: Buffer;
  /** Bytes read from the wire (before decoding). */
  wireBytes: number;
  /** Content codings that were removed, in the order the upstream applied them. */
  decoded: string[];
}

/** Codings the gateway can validate; anything else is refused (spec §4 rule 8). */
export const SUPPORTED_ENCODINGS = ['gzip', 'x-gzip', 'deflate', 'br'] as const;
/** More stacked codings than this is not a real server's answer. */
const MAX_STACKED_ENCODINGS = 2;
const ACCEPT_ENCODING = 'gzip, deflate, br';

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);
const inflateRaw = promisify(zlib.inflateRaw);
const brotli = promisify(zlib.brotliDecompress);

/**
 * Sends one request through the source's SSRF-safe dispatcher and buffers the bounded answer.
 * Throws EgressDeniedError (403), ResponseTooLargeError (413), UpstreamError (502); any HTTP status,
 * including 3xx and 5xx, is returned as-is — a bare dispatch never follows redirects and no
 * redirect interceptor is composed into the egress dispatcher.
 */
export async function upstreamRequest(opts: UpstreamRequestOptions): Promise<UpstreamResponse> {
  if (opts.url.protocol !== 'http:' && opts.url.protocol !== 'https:') throw new TypeError('upstream URL must be http(s)');
  if (!Number.isInteger(opts.maxResponseBytes) || opts.maxResponseBytes < 0) throw new TypeError('maxResponseBytes must be a non-negative integer');
  if (!Number.isInteger(opts.timeoutMs) || opts.timeoutMs <= 0) throw new TypeError('timeoutMs must be a positive integer');

  const headers: Record<string, string> = { ...opts.headers };
  if (!Object.keys(headers).some((k) => k.toLowerCase() === 'accept-encoding')) headers['accept-encoding'] = ACCEPT_ENCODING;
  const wire = await new Promise<WireResponse>((resolve, reject) => {
    const exchange = new UpstreamExchange(opts, resolve, reject);
    if (exchange.settled) return;
    try {
      opts.dispatcher.forSource(opts.sourceId).dispatch(
        {
          origin: opts.url.origin,
          path: `${opts.url.pathname}${opts.url.search}`,
          method: opts.method,
          headers,
          body: opts.body ?? null,
          headersTimeout: opts.timeoutMs,
          bodyTimeout: opts.timeoutMs,
        },
        exchange,
      );
    } catch (err) {
      exchange.onResponseError(null, err as Error);
    }
  });
  const resHeaders = wire.headers;
  // The body returned is plain: "no content-encoding" must mean that (`identity` says nothing about the body either).
  delete resHeaders['content-encoding'];
  if (wire.codings.length === 0) return { status: wire.status, headers: resHeaders, body: wire.body, wireBytes: wire.body.length, decoded: [] };
  const body = await decodeBody(wire.body, wire.codings, opts.maxResponseBytes);
  delete resHeaders['content-length'];
  return { status: wire.status, headers: resHeaders, body, wireBytes: wire.body.length, decoded: wire.codings };
}

interface WireResponse {
  status: number;
  headers: Record<string, string | string[]>;
  codings: string[];
  /** As received, still encoded. */
  body: Buffer;
}

/** What a controller of undici's handler API offers this exchange (`null` when dispatch failed before starting). */
interface ExchangeController {
  abort(reason: Error): void;
}

/**
 * One exchange as an undici dispatch handler that collects the capped body itself. `request()` would wrap every
 * exchange in an async resource, a body stream and its events, a measurable share of the proxy's CPU per miss
 * (docs/decisions/0001). The bounds are the same: the content-length and the bytes read are checked against the
 * cap before anything is kept, the whole exchange has a deadline, and an abort signal ends it.
 */
class UpstreamExchange {
  readonly #max: number;
  readonly #signal: AbortSignal | undefined;
  readonly #resolve: (res: WireResponse) => void;
  readonly #reject: (err: GatehouseError) => void;
  readonly #timer: NodeJS.Timeout;
  #controller: ExchangeController | null = null;
  /** Why this side ended the exchange: undici is told as soon as it has started the request. */
  #ended: GatehouseError | null = null;
  #settled = false;
  #status = 0;
  #headers: Record<string, string | string[]> = {};
  #codings: string[] = [];
  #chunks: Buffer[] = [];
  #total = 0;

  constructor(opts: UpstreamRequestOptions, resolve: (res: WireResponse) => void, reject: (err: GatehouseError) => void) {
    this.#max = opts.maxResponseBytes;
    this.#resolve = resolve;
    this.#reject = reject;
    // A timer cleared when the exchange ends, not AbortSignal.timeout: that one's timer and signal stay alive for
    // the whole timeout after every request (tens of thousands at proxy rates), surviving young GCs into old space.
    this.#timer = setTimeout(() => this.#end(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), opts.timeoutMs);
    this.#timer.unref();
    this.#signal = opts.signal;
    if (this.#signal?.aborted) this.#end(this.#signal.reason);
    else this.#signal?.addEventListener('abort', this);
  }

  get settled(): boolean {
    return this.#settled;
  }

  /** The abort signal's listener (an EventListener object: no closure per exchange). */
  handleEvent(): void {
    this.#end(this.#signal?.reason);
  }

  onRequestStart(controller: ExchangeController): void {
    this.#controller = controller;
    if (this.#ended !== null) controller.abort(this.#ended);
  }

  onResponseStart(_controller: ExchangeController, statusCode: number, headers: Record<string, string | string[]>): void {
    // Informational answers (1xx) precede the real one; request() did not show them either.
    if (statusCode < 200 || this.#settled) return;
    this.#status = statusCode;
    // undici parses a fresh object per response: it is this exchange's to edit.
    this.#headers = headers;
    try {
      this.#codings = parseContentEncoding(headers['content-encoding']);
    } catch (err) {
      this.#end(err);
      return;
    }
    const declared = headers['content-length'];
    if (typeof declared === 'string' && /^\d+$/.test(declared) && Number(declared) > this.#max) this.#end(new ResponseTooLargeError(this.#max, 'content-length'));
  }

  onResponseData(_controller: ExchangeController, chunk: Buffer): void {
    if (this.#settled) return;
    this.#total += chunk.length;
    if (this.#total > this.#max) {
      this.#end(new ResponseTooLargeError(this.#max, 'body'));
      return;
    }
    this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    this.#finish();
    const body = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#total);
    this.#resolve({ status: this.#status, headers: this.#headers, codings: this.#codings, body });
  }

  onResponseError(_controller: ExchangeController | null, err: Error): void {
    if (this.#settled) return;
    this.#finish();
    this.#reject(translateUpstreamError(err));
  }

  /**
   * Ends the exchange from this side (deadline, abort signal, a refused encoding or size): the caller is answered
   * at once, even while the request still waits for a connection, and undici aborts the request as soon as it can.
   */
  #end(reason: unknown): void {
    if (this.#settled) return;
    this.#ended = translateUpstreamError(reason);
    this.#finish();
    this.#chunks = [];
    this.#reject(this.#ended);
    this.#controller?.abort(this.#ended);
  }

  #finish(): void {
    this.#settled = true;
    clearTimeout(this.#timer);
    this.#signal?.removeEventListener('abort', this);
  }
}

/** `Content-Encoding` as the ordered list of codings applied; `identity` is dropped. */
export function parseContentEncoding(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  const joined = Array.isArray(value) ? value.join(',') : value;
  const codings = joined
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  for (const c of codings) if (!(SUPPORTED_ENCODINGS as readonly string[]).includes(c)) throw new UnsupportedEncodingError(c.slice(0, 32));
  if (codings.length > MAX_STACKED_ENCODINGS) throw new UnsupportedEncodingError(codings.join(',').slice(0, 64));
  return codings;
}

/**
 * Removes the codings (last applied first). Each step runs with zlib's `maxOutputLength`, which stops
 * inflating as soon as the output passes the cap: a decompression bomb costs at most the cap in memory.
 */
export async function decodeBody(body: Buffer, codings: string[], max: number): Promise<Buffer> {
  let out = body;
  for (const coding of [...codings].reverse()) {
    const limit = { maxOutputLength: Math.max(1, max) };
    try {
      if (coding === 'gzip' || coding === 'x-gzip') out = await gunzip(out, limit);
      else if (coding === 'br') out = await brotli(out, limit);
      else out = await inflateDeflate(out, limit);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') throw new ResponseTooLargeError(max, 'decoded');
      throw new UpstreamError('invalid content encoding', err);
    }
    if (out.length > max) throw new ResponseTooLargeError(max, 'decoded');
  }
  return out;
}

/** HTTP "deflate" is zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send raw deflate: accept both. */
async function inflateDeflate(buf: Buffer, limit: zlib.ZlibOptions): Promise<Buffer> {
  // A zlib stream starts with CMF 0x?8 and a header whose 16-bit value is a multiple of 31.
  const zlibWrapped = buf.length >= 2 && (buf[0]! & 0x0f) === 8 && ((buf[0]! << 8) | buf[1]!) % 31 === 0;
  return zlibWrapped ? inflate(buf, limit) : inflateRaw(buf, limit);
}

/** Maps undici/net/tls errors to a safe UpstreamError; deliberate Gatehouse errors (egress denial) pass through. */
export function translateUpstreamError(err: unknown): GatehouseError {
  if (err instanceof GatehouseError) return err;
  return new UpstreamError(describeFailure(err), err);
}

function describeFailure(err: unknown, depth = 0): UpstreamFailure {
  const e = err as { code?: unknown; name?: unknown; cause?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  const name = typeof e?.name === 'string' ? e.name : '';
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'ENODATA') return 'host not found';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'ETIMEDOUT') return 'timed out';
  if (name === 'TimeoutError' || name === 'AbortError' || code === 'UND_ERR_ABORTED') return 'timed out';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED') return 'connection closed';
  if (code.startsWith('ERR_TLS') || code.includes('CERT') || code.startsWith('ERR_SSL')) return 'TLS negotiation failed';
  if (code.startsWith('HPE_') || code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH' || code === 'UND_ERR_INFO') return 'invalid response';
  if (depth < 4 && e?.cause !== undefined && e.cause !== err) return describeFailure(e.cause, depth + 1);
  return 'request failed';
}
