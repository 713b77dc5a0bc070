// upstreamRequest against a real loopback upstream: redirects are returned, never followed; bodies are capped on the wire and after decoding; gzip/deflate/br decode; bombs and unknown codings are refused; failures are sanitized.
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEgressDispatcher } from '../../src/egress/agent.js';
import { ResponseTooLargeError, UnsupportedEncodingError, UpstreamError } from '../../src/egress/errors.js';
import { upstreamRequest } from '../../src/egress/request.js';
import type { UpstreamRequestOptions } from '../../src/egress/request.js';
import { startUpstream } from './upstream-server.js';
import { waitFor } from '../support/wait.js';
import type { TestUpstream } from './upstream-server.js';

const SOURCE = 'loopback-src';
const CAP = 1000;
const json = Buffer.from(JSON.stringify({ items: Array.from({ length: 20 }, (_, i) => ({ id: i, name: `item ${i}` })) }));
const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });

let up: TestUpstream;
const closedWatches: number[] = [];
const dispatcher = createEgressDispatcher({ allowPrivate: (id) => id === SOURCE, connectTimeoutMs: 1000 });

beforeAll(async () => {
  up = await startUpstream({
    '/redirect': (_req, res) => res.writeHead(302, { location: `http://127.0.0.1:${up.port}/target` }).end(),
    '/redirect-301': (_req, res) => res.writeHead(301, { location: '/target' }).end(),
    '/target': (_req, res) => res.end('you should not be here'),
    '/big-cl': (_req, res) => res.writeHead(200, { 'content-length': String(CAP + 1) }).end(Buffer.alloc(CAP + 1, 97)),
    '/exact-cl': (_req, res) => res.writeHead(200, { 'content-length': String(CAP) }).end(Buffer.alloc(CAP, 97)),
    '/big-chunked': (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      let n = 0;
      const tick = () => {
        if (res.destroyed) return;
        if (n++ >= 40) return void res.end();
        res.write(Buffer.alloc(100, 98), () => setImmediate(tick));
      };
      tick();
    },
    '/gzip': (_req, res) => res.writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'application/json' }).end(gzipSync(json)),
    '/br': (_req, res) => res.writeHead(200, { 'content-encoding': 'br', 'content-type': 'application/json' }).end(brotliCompressSync(json)),
    '/deflate': (_req, res) => res.writeHead(200, { 'content-encoding': 'deflate' }).end(deflateSync(json)),
    '/deflate-raw': (_req, res) => res.writeHead(200, { 'content-encoding': 'deflate' }).end(deflateRawSync(json)),
    '/stacked': (_req, res) => res.writeHead(200, { 'content-encoding': 'gzip, br' }).end(brotliCompressSync(gzipSync(json))),
    '/identity': (_req, res) => res.writeHead(200, { 'content-encoding': 'identity' }).end(json),
    '/bomb': (_req, res) => res.writeHead(200, { 'content-encoding': 'gzip' }).end(bomb),
    '/zstd': (_req, res) => res.writeHead(200, { 'content-encoding': 'zstd' }).end('whatever'),
    '/corrupt': (_req, res) => res.writeHead(200, { 'content-encoding': 'gzip' }).end(Buffer.from('this is not gzip at all')),
    '/slow': () => undefined,
    // Never idle long enough for a headers or body timeout: only the bound on the whole exchange stops it.
    '/trickle': (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const tick = setInterval(() => (res.destroyed ? clearInterval(tick) : res.write('.')), 50);
      res.on('close', () => clearInterval(tick));
    },
    '/reset': (req) => req.socket.destroy(),
    '/echo': (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ method: req.method, headers: req.headers, body: Buffer.concat(chunks).toString() })));
    },
    '/fail': (_req, res) => res.writeHead(503).end('down'),
    '/url': (req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(req.url),
    // Answers nothing and records when the gateway hangs up: an ended exchange must not leave its request running.
    '/watch': (req) => void req.socket.once('close', () => closedWatches.push(performance.now())),
  });
});
afterAll(async () => {
  await dispatcher.close();
  await up.close();
});

function call(path: string, extra: Partial<UpstreamRequestOptions> = {}) {
  return upstreamRequest({ dispatcher, url: new URL(`http://127.0.0.1:${up.port}${path}`), method: 'GET', headers: {}, sourceId: SOURCE, timeoutMs: 2000, maxResponseBytes: CAP, ...extra });
}
const hitsOf = (path: string) => up.hits.filter((h) => h.path === path).length;

describe('redirects are never followed', () => {
  it('passes a 302 back with its Location and never requests the target', async () => {
    const res = await call('/redirect');
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe(`http://127.0.0.1:${up.port}/target`);
    const res2 = await call('/redirect-301', { method: 'POST', body: 'x' });
    expect(res2.status).toBe(301);
    expect(hitsOf('/target')).toBe(0);
  });
});

describe('response body cap', () => {
  it('refuses by content-length before reading', async () => {
    const err = await call('/big-cl').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ResponseTooLargeError);
    expect(err).toMatchObject({ code: 'payload_too_large', details: { stage: 'content-length' } });
  });

  it('accepts a body exactly at the cap', async () => {
    expect((await call('/exact-cl')).body.length).toBe(CAP);
  });

  it('counts a chunked body while reading and stops past the cap', async () => {
    const err = await call('/big-chunked').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'payload_too_large', details: { stage: 'body' } });
    // Under a generous cap the same stream is read whole: the cap, not the route, caused the refusal.
    expect((await call('/big-chunked', { maxResponseBytes: 10_000 })).body.length).toBe(4000);
  });
});

describe('content encodings', () => {
  it.each(['/gzip', '/br', '/deflate', '/deflate-raw', '/stacked', '/identity'])('decodes %s and drops the stale headers', async (path) => {
    const res = await call(path, { maxResponseBytes: 10_000 });
    expect(res.body.equals(json)).toBe(true);
    expect(res.headers['content-encoding']).toBeUndefined();
    if (path !== '/identity') expect(res.wireBytes).toBeLessThan(json.length + 64);
  });

  it('caps the decoded size too (the wire size alone would pass)', async () => {
    const res = await call('/gzip', { maxResponseBytes: json.length });
    expect(res.body.length).toBe(json.length);
    const err = await call('/gzip', { maxResponseBytes: json.length - 1 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'payload_too_large', details: { stage: 'decoded' } });
  });

  it('refuses a decompression bomb without inflating it', async () => {
    const before = process.memoryUsage().arrayBuffers;
    const err = await call('/bomb', { maxResponseBytes: 1 << 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ResponseTooLargeError);
    expect(err).toMatchObject({ details: { stage: 'decoded' } });
    // 64 MiB of zeros were never materialized.
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(32 * 1024 * 1024);
  });

  it('refuses unknown and corrupt encodings as sanitized upstream failures', async () => {
    const unknown = await call('/zstd').catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(UnsupportedEncodingError);
    expect(unknown).toMatchObject({ code: 'upstream_failed', encoding: 'zstd' });
    const corrupt = await call('/corrupt').catch((e: unknown) => e);
    expect(corrupt).toBeInstanceOf(UpstreamError);
    expect(corrupt).toMatchObject({ code: 'upstream_failed', reason: 'invalid content encoding' });
  });

  it('advertises the codings it can validate unless the caller chose', async () => {
    const res = await call('/echo', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello', maxResponseBytes: 10_000 });
    expect(res.status).toBe(201);
    const seen = JSON.parse(res.body.toString()) as { method: string; headers: Record<string, string>; body: string };
    expect(seen).toMatchObject({ method: 'POST', body: 'hello', headers: { 'accept-encoding': 'gzip, deflate, br', 'content-type': 'text/plain' } });
  });
});

describe('failures are sanitized', () => {
  it('times out a silent upstream', async () => {
    const started = performance.now();
    await expect(call('/slow', { timeoutMs: 300 })).rejects.toMatchObject({ code: 'upstream_failed', reason: 'timed out' });
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('bounds the whole exchange, not only the gaps: a body that keeps trickling is cut at the timeout', async () => {
    const started = performance.now();
    await expect(call('/trickle', { timeoutMs: 400 })).rejects.toMatchObject({ code: 'upstream_failed', reason: 'timed out' });
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('reports refused connections and resets without internal addresses', async () => {
    const closed = await startUpstream({});
    const port = closed.port;
    await closed.close();
    const refused = await upstreamRequest({ dispatcher, url: new URL(`http://127.0.0.1:${port}/`), method: 'GET', headers: {}, sourceId: SOURCE, timeoutMs: 1000, maxResponseBytes: CAP }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'upstream_failed', reason: 'connection refused', message: 'The upstream request failed.' });
    expect((refused as Error).message).not.toContain('127.0.0.1');
    await expect(call('/reset')).rejects.toMatchObject({ code: 'upstream_failed', reason: 'connection closed' });
  });

  it('an abort signal ends the exchange at once and hangs up on the upstream', async () => {
    const stop = new AbortController();
    const pending = call('/watch', { signal: stop.signal, timeoutMs: 10_000 });
    await waitFor(() => hitsOf('/watch') === 1, 2000, 'the upstream to receive the request');
    const before = closedWatches.length;
    const started = performance.now();
    stop.abort(new DOMException('stopping', 'AbortError'));
    await expect(pending).rejects.toMatchObject({ code: 'upstream_failed' });
    expect(performance.now() - started).toBeLessThan(500);
    await waitFor(() => closedWatches.length === before + 1, 2000, 'the upstream to see the connection closed');
  });

  it('a signal aborted before the exchange sends nothing upstream', async () => {
    const hits = hitsOf('/watch');
    await expect(call('/watch', { signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'upstream_failed' });
    await new Promise((r) => setTimeout(r, 100));
    expect(hitsOf('/watch')).toBe(hits);
  });

  it('a timed-out exchange hangs up on the upstream too', async () => {
    const before = closedWatches.length;
    await expect(call('/watch', { timeoutMs: 200 })).rejects.toMatchObject({ code: 'upstream_failed', reason: 'timed out' });
    await waitFor(() => closedWatches.length === before + 1, 2000, 'the upstream to see the connection closed');
  });

  it('sends the path with its query string as given', async () => {
    const res = await call('/url?b=2&a=%2F');
    expect(res.body.toString()).toBe('/url?b=2&a=%2F');
  });

  it('passes 5xx answers through as answers', async () => {
    const res = await call('/fail');
    expect(res.status).toBe(503);
    expect(res.body.toString()).toBe('down');
  });

  it('refuses non-http(s) URLs as caller misuse', async () => {
    await expect(upstreamRequest({ dispatcher, url: new URL('file:///etc/passwd'), method: 'GET', headers: {}, sourceId: SOURCE, timeoutMs: 1000, maxResponseBytes: CAP })).rejects.toBeInstanceOf(TypeError);
  });
});
