// The benchmark's platform floor, case (e): a bare reverse proxy on the miss path's building blocks (node:http in, an undici Agent dispatch handler out, the whole body buffered and answered with type and length) with nothing else, run as gateway.processes processes sharing one port.
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent } from 'undici';

// Usage: proxy-bare.ts <upstream port> <port> [processes]. Run by bench/proxy.ts, as a plain node script (type stripping), like proxy-upstream.ts.
const upstreamPort = Number(process.argv[2]);
const port = Number(process.argv[3]);
const processes = Number(process.argv[4] ?? 1);
/** Set in the copies this process spawns: they serve and never spawn copies of their own. */
const COPY_ENV = 'GH_BENCH_BARE_COPY';
const LISTENING = 'listening';

const origin = `http://127.0.0.1:${upstreamPort}`;
// One Agent per process with undici's defaults, as the egress dispatcher has per source: keep-alive, unbounded connections.
const agent = new Agent();

interface Controller {
  abort(reason: Error): void;
}

/**
 * One exchange as an undici dispatch handler, the way src/egress/request.ts reads the upstream (no request() body
 * stream), so the floor is not made higher by a slower client than Gatehouse's.
 */
class Exchange {
  readonly #res: ServerResponse;
  #status = 502;
  #contentType = 'application/octet-stream';
  #chunks: Buffer[] = [];
  #total = 0;

  constructor(res: ServerResponse) {
    this.#res = res;
  }

  onRequestStart(): void {}

  onResponseStart(_controller: Controller, statusCode: number, headers: Record<string, string | string[]>): void {
    if (statusCode < 200) return;
    this.#status = statusCode;
    const type = headers['content-type'];
    if (typeof type === 'string') this.#contentType = type;
  }

  onResponseData(_controller: Controller, chunk: Buffer): void {
    this.#total += chunk.length;
    this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    const body = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#total);
    this.#res.writeHead(this.#status, { 'content-type': this.#contentType, 'content-length': body.length });
    this.#res.end(body);
  }

  onResponseError(_controller: Controller | null, _err: Error): void {
    if (this.#res.headersSent) this.#res.destroy();
    else this.#res.writeHead(502, { 'content-length': 0 }).end();
  }
}

const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  agent.dispatch({ origin, path: req.url ?? '/', method: 'GET', headers: {} }, new Exchange(res));
});
server.keepAliveTimeout = 65_000;

function listen(): Promise<void> {
  // SO_REUSEPORT, as gateway processes share their port (src/runtime/start.ts): the kernel spreads connections.
  return new Promise((resolve) => server.listen({ host: '127.0.0.1', port, reusePort: true }, () => resolve()));
}

/** Spawns one copy and resolves once it is listening (it says so over IPC, as a gateway replica does). */
function spawnCopy(): Promise<ReturnType<typeof spawn>> {
  const child = spawn(process.execPath, [...process.execArgv, import.meta.filename, String(upstreamPort), String(port)], {
    env: { ...process.env, [COPY_ENV]: '1' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`bare proxy copy exited before listening (${String(code)})`)));
  });
}

if (process.env[COPY_ENV] === '1') {
  await listen();
  process.send?.(LISTENING);
  // The IPC channel closes when the first process goes, even on SIGKILL: no copy outlives the bench.
  process.once('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
} else {
  const copies = await Promise.all(Array.from({ length: processes - 1 }, spawnCopy));
  await listen();
  // The bench reads this line: every process is listening.
  process.stdout.write(`${LISTENING} ${port}\n`);
  process.on('SIGTERM', () => {
    for (const c of copies) c.kill('SIGTERM');
    process.exit(0);
  });
}
