// One bounded upstream HTTP exchange through the egress dispatcher: no redirects, capped body on the wire and after decoding, validated content encodings, sanitized errors (spec §4 rules 4, 8, 11).
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { request } from 'undici';
import type { Dispatcher } from 'undici';
import type { EgressDispatcher } from './agent.js';
import { GatehouseError } from '../errors/registry.js';
import { ResponseTooLargeError, UnsupportedEncodingError, UpstreamError } from './errors.js';
import type { UpstreamFailure } from './errors.js';

export type UpstreamMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface UpstreamRequestOptions {
  dispatcher: EgressDispatcher;
  url: URL;
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
 * including 3xx and 5xx, is returned as-is — undici's request() never follows redirects and no
 * redirect interceptor is composed into the egress dispatcher.
 */
export async function upstreamRequest(opts: UpstreamRequestOptions): Promise<UpstreamResponse> {
  if (opts.url.protocol !== 'http:' && opts.url.protocol !== 'https:') throw new TypeError('upstream URL must be http(s)');
  if (!Number.isInteger(opts.maxResponseBytes) || opts.maxResponseBytes < 0) throw new TypeError('maxResponseBytes must be a non-negative integer');
  if (!Number.isInteger(opts.timeoutMs) || opts.timeoutMs <= 0) throw new TypeError('timeoutMs must be a positive integer');

  const headers: Record<string, string> = { ...opts.headers };
  if (!Object.keys(headers).some((k) => k.toLowerCase() === 'accept-encoding')) headers['accept-encoding'] = ACCEPT_ENCODING;
  // A timer cleared when the exchange ends, not AbortSignal.timeout: that one's timer and signal stay alive for the
  // whole timeout after every request (tens of thousands at proxy rates), surviving young-generation GCs into old space.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), opts.timeoutMs);
  timer.unref();
  const signal = opts.signal === undefined ? deadline.signal : AbortSignal.any([deadline.signal, opts.signal]);
  try {
    return await exchange(opts, headers, signal);
  } finally {
    clearTimeout(timer);
  }
}

async function exchange(opts: UpstreamRequestOptions, headers: Record<string, string>, signal: AbortSignal): Promise<UpstreamResponse> {
  let res: Dispatcher.ResponseData;
  try {
    res = await request(opts.url, {
      dispatcher: opts.dispatcher.forSource(opts.sourceId),
      method: opts.method,
      headers,
      body: opts.body ?? null,
      signal,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
  } catch (err) {
    throw translateUpstreamError(err);
  }

  const resHeaders = { ...(res.headers as Record<string, string | string[]>) };
  let codings: string[];
  try {
    codings = parseContentEncoding(resHeaders['content-encoding']);
  } catch (err) {
    discard(res);
    throw err;
  }
  const wire = await readCapped(res, opts.maxResponseBytes);
  // `identity` says nothing about the body; dropping it keeps "no content-encoding" meaning "body is plain".
  if (codings.length === 0) delete resHeaders['content-encoding'];
  if (codings.length === 0) return { status: res.statusCode, headers: resHeaders, body: wire, wireBytes: wire.length, decoded: [] };

  const body = await decodeBody(wire, codings, opts.maxResponseBytes);
  delete resHeaders['content-encoding'];
  delete resHeaders['content-length'];
  return { status: res.statusCode, headers: resHeaders, body, wireBytes: wire.length, decoded: codings };
}

/** Drops an unread body: destroying emits an abort error that nobody else listens for. */
function discard(res: Dispatcher.ResponseData): void {
  res.body.on('error', () => undefined);
  res.body.destroy();
}

/** Reads the body, refusing by content-length first and counting while reading; never buffers past the cap. */
async function readCapped(res: Dispatcher.ResponseData, max: number): Promise<Buffer> {
  const declared = res.headers['content-length'];
  if (typeof declared === 'string' && /^\d+$/.test(declared) && Number(declared) > max) {
    discard(res);
    throw new ResponseTooLargeError(max, 'content-length');
  }
  // Stream events rather than `for await`: the async iterator cost a promise, a tick and its bookkeeping per chunk
  // and per response, a visible share of the proxy's allocations.
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const body = res.body;
    const fail = (err: GatehouseError) => {
      if (settled) return;
      settled = true;
      reject(err);
    };
    body.on('data', (chunk: Buffer) => {
      if (settled) return;
      total += chunk.length;
      if (total > max) {
        fail(new ResponseTooLargeError(max, 'body'));
        discard(res);
        return;
      }
      chunks.push(chunk);
    });
    body.once('end', () => {
      if (settled) return;
      settled = true;
      resolve(Buffer.concat(chunks, total));
    });
    body.once('error', (err: unknown) => fail(translateUpstreamError(err)));
    // A body that closes without `end` or `error` (destroyed underneath) must not leave the request hanging.
    body.once('close', () => {
      if (!settled) fail(translateUpstreamError(new Error('response body closed before its end')));
    });
  });
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
