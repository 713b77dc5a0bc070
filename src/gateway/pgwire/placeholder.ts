// The PostgreSQL wire listener's placeholder until the wire issue lands: it binds gateway.pg_port, speaks just enough protocol v3 to refuse every login with a real SQLSTATE.
import net from 'node:net';
import type { Logger } from '../../observability/logger.js';

/** @see https://www.postgresql.org/docs/current/protocol-message-formats.html */
const SSL_REQUEST_CODE = 80877103;
const GSSENC_REQUEST_CODE = 80877104;
const CANCEL_REQUEST_CODE = 80877102;
const PROTOCOL_V3 = 196608;
const LENGTH_BYTES = 4;

function errorResponse(sqlstate: string, message: string): Buffer {
  const fields = Buffer.concat([
    Buffer.from('SFATAL\0'),
    Buffer.from('VFATAL\0'),
    Buffer.from(`C${sqlstate}\0`),
    Buffer.from(`M${message}\0`),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'ascii');
  header.writeInt32BE(fields.length + LENGTH_BYTES, 1);
  return Buffer.concat([header, fields]);
}

export function createWirePlaceholder(opts: { log: Logger; maxStartupPacketBytes: number; idleTimeoutMs: number }): net.Server {
  return net.createServer((socket) => {
    let buffered = Buffer.alloc(0);
    socket.setTimeout(Math.min(opts.idleTimeoutMs, 10_000), () => socket.destroy());
    socket.on('error', () => socket.destroy());
    const refuse = (sqlstate: string, message: string) => {
      socket.end(errorResponse(sqlstate, message));
    };
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 8) {
        const length = buffered.readInt32BE(0);
        // The startup packet is bounded (STYLE §7): anything else is a protocol violation, answered 08P01.
        if (length < 8 || length > opts.maxStartupPacketBytes) return refuse('08P01', 'invalid startup packet length');
        if (buffered.length < length) return;
        const code = buffered.readInt32BE(4);
        buffered = buffered.subarray(length);
        if (code === SSL_REQUEST_CODE || code === GSSENC_REQUEST_CODE) {
          socket.write('N');
          continue;
        }
        if (code === CANCEL_REQUEST_CODE) return socket.destroy();
        if (code === PROTOCOL_V3) {
          opts.log.info('wire login refused: the PostgreSQL wire listener is not available in this build');
          return refuse('0A000', 'the Gatehouse PostgreSQL wire listener does not accept logins in this build');
        }
        return refuse('08P01', 'unsupported frontend protocol');
      }
    });
  });
}
