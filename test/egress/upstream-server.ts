// A real HTTP upstream on loopback for egress tests: scripted routes, a hit log, and cleanup through `await using`.
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Route = (req: IncomingMessage, res: ServerResponse) => void;

export interface TestUpstream extends AsyncDisposable {
  port: number;
  /** Every request received, as `METHOD path` with the Host header. */
  hits: { method: string; path: string; host: string }[];
  close(): Promise<void>;
}

export async function startUpstream(routes: Record<string, Route>, host = '127.0.0.1'): Promise<TestUpstream> {
  const hits: TestUpstream['hits'] = [];
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    hits.push({ method: req.method ?? '', path, host: req.headers.host ?? '' });
    const route = routes[path];
    if (route === undefined) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, path }));
      return;
    }
    route(req, res);
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, host, () => resolve()));
  const close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { port: (server.address() as AddressInfo).port, hits, close, [Symbol.asyncDispose]: close };
}
