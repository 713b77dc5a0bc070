// A closing listener ends keep-alive connections as their requests finish: a request in flight at close time must not hold the process open until keepAliveTimeout (72 s), past the shutdown grace.
import { once } from 'node:events';
import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createHttpServer } from '../../src/http/server.js';
import { createLogger } from '../../src/observability/logger.js';
import { sleep } from '../support/wait.js';

const log = createLogger({ level: 'silent', service: 'test', role: 'test' });
let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** One keep-alive HTTP/1.1 connection, read raw so that what the server does with the socket is seen as it happens. */
async function rawConnection(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    send: (path: string) => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`),
    received: () => received,
    ended,
    destroy: () => socket.destroy(),
  };
}

describe('closing an HTTP listener with keep-alive connections', () => {
  test('a connection whose request was in flight at close is closed once it is answered, and close resolves', async () => {
    app = createHttpServer({ log, bodyLimit: 1024, headerBytes: 16_384, trustProxy: false, idleTimeoutMs: 60_000 });
    let began!: () => void;
    const inFlight = new Promise<void>((resolve) => (began = resolve));
    app.get('/slow', async () => {
      began();
      await sleep(400);
      return { ok: true };
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as net.AddressInfo).port;

    const conn = await rawConnection(port);
    conn.send('/slow');
    // Close only once the handler runs: a request the server has not read yet is no request in flight.
    await inFlight;
    const closed = app.close().then(() => 'closed' as const);
    // The answer of the request in flight arrives whole; then the server ends the socket, and close resolves.
    const outcome = await Promise.race([closed, sleep(5_000).then(() => 'still open' as const)]);
    expect(conn.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(conn.received()).toContain('{"ok":true}');
    expect(outcome).toBe('closed');
    await conn.ended;
    app = undefined;
  });
});
