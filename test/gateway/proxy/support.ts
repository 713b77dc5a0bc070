// Shared fixtures of the proxy route suites: a loopback upstream that records what it received (headers, query, body), a closed port, and audit lookups.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { World } from '../../support/world.js';

export interface Received {
  method: string;
  /** Path without the query. */
  path: string;
  query: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

export interface RecordingUpstream {
  port: number;
  base: string;
  received: Received[];
  /** Requests whose path starts with `prefix`. */
  hitsUnder(prefix: string): Received[];
  close(): Promise<void>;
}

const json = (res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));

/** A real HTTP server on 127.0.0.1; unrouted paths answer 200 `{ok, path}`. */
export async function startRecordingUpstream(routes: Record<string, Handler> = {}): Promise<RecordingUpstream> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = req.url ?? '/';
      const q = raw.indexOf('?');
      const path = q < 0 ? raw : raw.slice(0, q);
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method ?? '', path, query: q < 0 ? '' : raw.slice(q + 1), headers: req.headers, body });
      const route = routes[path];
      if (route) route(req, res, body);
      else json(res, 200, { ok: true, path });
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    base: `http://127.0.0.1:${port}`,
    received,
    hitsUnder: (prefix) => received.filter((r) => r.path.startsWith(prefix)),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export { json as sendJson };

export interface AuditRow {
  request_id: string;
  channel: string;
  identity_id: number | null;
  source_id: string | null;
  method: string | null;
  path: string | null;
  decision: string;
  reasons: string[];
  status: number;
  upstream_status: number | null;
  cache: string | null;
  redactions: number;
  error_code: string | null;
  approval_id: number | null;
}

/** Every audit entry recorded for a request id, after the writer has flushed. */
export async function auditEntries(world: World, requestId: string): Promise<AuditRow[]> {
  await world.svc.running.services.audit.flush();
  const client = await world.svc.database!.connect();
  try {
    const { rows } = await client.query<AuditRow>('select * from audit_entries where request_id = $1', [requestId]);
    return rows;
  } finally {
    await client.end();
  }
}

/** The one audit entry of a request (fails when there are zero or several). */
export async function oneAuditEntry(world: World, requestId: string | null): Promise<AuditRow> {
  if (!requestId) throw new Error('response carried no x-request-id');
  const rows = await auditEntries(world, requestId);
  if (rows.length !== 1) throw new Error(`expected exactly one audit entry for ${requestId}, found ${rows.length}`);
  return rows[0]!;
}
