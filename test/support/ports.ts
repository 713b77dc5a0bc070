// A loopback port nothing listens on: taken from the kernel by listening on port 0, then closed again.
import { createServer } from 'node:net';

/** A free port on 127.0.0.1: for a server a test starts there next, or as a port that refuses connections. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('could not obtain a free port');
  return address.port;
}
