// A fake Slack on loopback: records every request (headers and body) and answers as scripted — ok, 500, a hang past the notifier's timeout, or a Web API refusal.
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export type SlackMode = 'ok' | 'fail500' | 'hang' | 'api_error';

export interface SlackRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface FakeSlack {
  port: number;
  url: string;
  mode: SlackMode;
  requests: SlackRequest[];
  /** Waits until at least `n` requests arrived (or throws after `ms`). */
  waitFor(n: number, ms?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeSlack(): Promise<FakeSlack> {
  const requests: SlackRequest[] = [];
  const state = { mode: 'ok' as SlackMode };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (state.mode === 'hang') return; // never answers; the notifier's timeout must end the attempt
      if (state.mode === 'fail500') return void res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
      if (state.mode === 'api_error') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":false,"error":"channel_not_found"}');
      const isApi = (req.url ?? '').endsWith('/chat.postMessage');
      res.writeHead(200, { 'content-type': isApi ? 'application/json' : 'text/plain' }).end(isApi ? '{"ok":true}' : 'ok');
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    get mode() {
      return state.mode;
    },
    set mode(m: SlackMode) {
      state.mode = m;
    },
    requests,
    async waitFor(n, ms = 5_000) {
      const deadline = Date.now() + ms;
      while (requests.length < n) {
        if (Date.now() > deadline) throw new Error(`fake Slack: expected ${n} requests, got ${requests.length}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
