// COPY FROM STDIN streams with back-pressure: while the upstream socket cannot take more, the gateway stops reading the client, so a large COPY to a slow upstream holds the client back instead of piling the stream up in the gateway's memory. Before, every CopyData was written upstream as it arrived, and a client could finish sending a 96 MiB COPY while the upstream had read a fraction of it (all of the rest buffered in the gateway).
import net from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { TEST_PG_HOST, TEST_PG_PORT } from '../support/pg.js';
import { startWireWorld, type WireWorld } from './fixture.js';

/** Bytes per second the proxy lets through from the gateway to PostgreSQL. */
const RATE = 32 * 1024 * 1024;
const TOTAL = 96 * 1024 * 1024;
const CHUNK = 64 * 1024;

let ww: WireWorld;
let proxy: net.Server;
/** Bytes the slow proxy has read from the gateway. */
let received = 0;
let writer: { id: number; key: string };

/** A TCP proxy in front of PostgreSQL that reads from the gateway at RATE bytes per second: a slow-reading upstream. */
function slowProxy(): Promise<net.Server> {
  const server = net.createServer((down) => {
    const up = net.connect(TEST_PG_PORT, TEST_PG_HOST);
    up.on('error', () => down.destroy());
    down.on('error', () => up.destroy());
    up.pipe(down);
    down.on('data', (chunk: Buffer) => {
      received += chunk.length;
      up.write(chunk);
      down.pause();
      setTimeout(() => down.resume(), Math.ceil((chunk.length / RATE) * 1000));
    });
    down.on('end', () => up.end());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

beforeAll(async () => {
  proxy = await slowProxy();
  ww = await startWireWorld({ sourceId: 'copyslowsrc', sourceConfig: { host: '127.0.0.1', port: (proxy.address() as net.AddressInfo).port } });
  writer = await ww.world.agent('copy-slow-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
}, 60_000);
afterAll(async () => {
  await ww?.stop();
  proxy?.close();
});

test('a 96 MiB COPY FROM STDIN to a slow-reading upstream: the client is held back, the data all arrives', async () => {
  const c = await ww.client('copy-slow-writer', writer.key);
  const line = Buffer.from(`${'y'.repeat(CHUNK - 1)}\n`);
  let sent = 0;
  let aheadWhenSent = 0;
  let maxAhead = 0;
  try {
    const stream = c.query(copyFrom('COPY notes(body) FROM STDIN'));
    const start = received;
    const source = Readable.from(
      (function* () {
        for (let n = 0; n < TOTAL / CHUNK; n++) {
          maxAhead = Math.max(maxAhead, sent - (received - start));
          sent += line.length;
          yield line;
        }
      })(),
    );
    source.on('end', () => (aheadWhenSent = sent - (received - start)));
    await pipeline(source, stream);
    expect((await c.query('select 1 as one')).rows[0].one).toBe(1);
  } finally {
    await c.end();
  }
  // Without back-pressure the client runs ahead of the upstream by nearly the whole stream (the gateway holds it);
  // with it, by what the listener's bounded queue and the sockets' buffers hold.
  expect(maxAhead).toBeLessThan(40 * 1024 * 1024);
  expect(aheadWhenSent).toBeLessThan(40 * 1024 * 1024);
  expect(await ww.direct(async (d) => (await d.query("select count(*)::int as n from notes where body like 'yyy%'")).rows[0].n)).toBe(TOTAL / CHUNK);
}, 120_000);
