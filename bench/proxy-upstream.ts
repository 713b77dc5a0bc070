// The benchmark's upstream: a plain node:http server answering a small JSON body on every path, run as its own process so it does not share the load generator's event loop.
import { createServer } from 'node:http';

const body = JSON.stringify({ id: 1, name: 'widget', tags: ['a', 'b'], price: 12.5, in_stock: true });
const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
