// A local OTLP/HTTP receiver for bench:proxy's telemetry cases: reads each export to the end, answers 200, and counts what arrived.
import { createServer } from 'node:http';

const port = Number(process.argv[2]);
let exports = 0;
let bytes = 0;
createServer((req, res) => {
  if (req.url === '/ready') return void res.end('ok');
  req.on('data', (c: Buffer) => (bytes += c.length));
  req.on('end', () => {
    exports += 1;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => {
  process.stderr.write(`otlp-sink: ${exports} exports, ${bytes} bytes\n`);
  process.exit(0);
});
