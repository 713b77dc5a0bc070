// A local OTLP/HTTP receiver for bench:proxy's telemetry cases: reads each export to the end, answers 200, and counts what arrived (GET /stats).
import { createServer } from 'node:http';

const port = Number(process.argv[2]);
const SPAN = Buffer.from('"spanId"');
const stats = { exports: 0, bytes: 0, spans: 0 };
createServer((req, res) => {
  if (req.url === '/ready') return void res.end('ok');
  if (req.url === '/stats') return void res.end(JSON.stringify(stats));
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    stats.exports += 1;
    stats.bytes += body.length;
    // The JSON encoding names each span's own id once ("parentSpanId" is another key).
    if (req.url === '/v1/traces') for (let at = body.indexOf(SPAN); at !== -1; at = body.indexOf(SPAN, at + SPAN.length)) stats.spans += 1;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
