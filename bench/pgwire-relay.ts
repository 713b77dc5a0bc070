// bench:pgwire's reference relays to PostgreSQL, one process each: `node-pipe` (sockets piped, no parsing) and `node-frames` (every message framed and re-written), the floor under any Node wire proxy.
// Usage: tsx bench/pgwire-relay.ts node-pipe|node-frames — listens on a free loopback port and prints it.
import net from 'node:net';
import { CANCEL_REQUEST_CODE, FrameReader, GSSENC_REQUEST_CODE, SSL_REQUEST_CODE, type Frame } from '../src/gateway/pgwire/protocol.js';

const UPSTREAM = { host: '127.0.0.1', port: 5432 } as const;
/** The wire listener's default bounds (gateway limits pg_startup_packet_bytes, pg_message_bytes): the framing a real proxy must keep. */
const LIMITS = { startupBytes: 10_000, messageBytes: 16 * 1024 * 1024 } as const;
/**
 * The one-byte answer to SSLRequest/GSSENCRequest that declines encryption; not a framed message.
 * @see https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-SSL
 */
const DECLINE = Buffer.from('N');

const mode = process.argv[2];
if (mode !== 'node-pipe' && mode !== 'node-frames') throw new TypeError(`mode must be node-pipe or node-frames, got ${String(mode)}`);

function pipeBoth(client: net.Socket, upstream: net.Socket): void {
  client.pipe(upstream);
  upstream.pipe(client);
}

/**
 * Cuts each read into messages with the listener's own FrameReader and writes the messages of one read together,
 * as the wire listener does (one write per read; a write per message would measure a cost Gatehouse no longer pays).
 */
function relayFrames(from: net.Socket, to: net.Socket, reader: FrameReader, onStartup?: (frame: Frame) => boolean): void {
  from.on('data', (chunk: Buffer) => {
    reader.push(chunk);
    const out: Buffer[] = [];
    let bytes = 0;
    try {
      for (let f = reader.next(); f !== null; f = reader.next()) {
        if (f.type === 0 && onStartup && !onStartup(f)) continue;
        out.push(f.raw);
        bytes += f.raw.length;
      }
    } catch {
      // A bad length: a proxy that frames must drop the session rather than forward what it cannot delimit.
      from.destroy();
      to.destroy();
      return;
    }
    if (out.length === 0) return;
    if (!to.write(out.length === 1 ? out[0]! : Buffer.concat(out, bytes))) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  });
}

function frameBoth(client: net.Socket, upstream: net.Socket): void {
  const fromClient = new FrameReader(LIMITS);
  const fromUpstream = new FrameReader(LIMITS);
  fromUpstream.startup = false;
  relayFrames(client, upstream, fromClient, (frame) => {
    const code = frame.body.readInt32BE(0);
    // Encryption requests are answered here (the upstream's one-byte answer has no frame); the startup packet follows.
    if (code === SSL_REQUEST_CODE || code === GSSENC_REQUEST_CODE) {
      client.write(DECLINE);
      return false;
    }
    if (code !== CANCEL_REQUEST_CODE) fromClient.startup = false;
    return true;
  });
  relayFrames(upstream, client, fromUpstream);
}

const server = net.createServer({ noDelay: true }, (client) => {
  const upstream = net.connect({ ...UPSTREAM, noDelay: true });
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close).on('close', close);
  upstream.on('error', close).on('close', close);
  if (mode === 'node-pipe') pipeBoth(client, upstream);
  else frameBoth(client, upstream);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
