// Test fixture for the wire listener: a running service, a real PostgreSQL database as the source (listed in privateSources: loopback egress), and helpers to run real clients.
import { execFile } from 'node:child_process';
import type net from 'node:net';
import pg from 'pg';
import { startWorld, type World } from '../support/world.js';
import { Backend, FrameReader, message, parseErrorFields } from '../../src/gateway/pgwire/protocol.js';
import { createTestDatabase, TEST_PG_HOST, TEST_PG_PORT, type TestDatabase } from '../support/pg.js';

export interface WireWorld {
  world: World;
  upstream: TestDatabase;
  sourceId: string;
  port: number;
  /** A direct (ungoverned) client on the upstream database, for setup and checks. */
  direct<T>(fn: (c: pg.Client) => Promise<T>): Promise<T>;
  /** A node-postgres client through the gateway. */
  client(user: string, password: string, opts?: Partial<pg.ClientConfig>): Promise<pg.Client>;
  psql(user: string, password: string, args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }>;
  stop(): Promise<void>;
}

export const SETUP_SQL = `
create table customers (id int primary key, name text, email text, ssn text);
insert into customers values (1, 'Ada', 'ada@example.com', '123-45-6789'), (2, 'Bob', 'bob@example.com', '987-65-4321');
create table notes (id serial primary key, body text);
create sequence counter_seq;
`;

export async function startWireWorld(opts: { sourceId?: string; env?: Record<string, string>; setupSql?: string; sourceConfig?: Record<string, unknown> } = {}): Promise<WireWorld> {
  const sourceId = opts.sourceId ?? 'pgsrc';
  const upstream = await createTestDatabase();
  const direct = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
    const c = new pg.Client({ connectionString: upstream.url });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  };
  await direct((c) => c.query(opts.setupSql ?? SETUP_SQL));
  const world = await startWorld({ privateSources: [sourceId], env: { ...opts.env } });
  const created = await world.admin('POST', '/api/data-sources', {
    name: sourceId,
    source_id: sourceId,
    source_type: 'postgres',
    connection_config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: upstream.name, user: 'postgres', ssl_mode: 'disable', pool_max: 10, ...opts.sourceConfig },
    create_default_roles: true,
  });
  if (created.status >= 300) throw new Error(`create source: ${created.status} ${created.text}`);
  const deadline = Date.now() + 5_000;
  while (!world.svc.running.services.registry.get(sourceId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const port = world.svc.running.addresses['gateway.pg_port']!.port;
  return {
    world,
    upstream,
    sourceId,
    port,
    direct,
    async client(user, password, extra = {}) {
      const c = new pg.Client({ host: '127.0.0.1', port, user, password, database: sourceId, ...extra });
      c.on('error', () => undefined);
      await c.connect();
      return c;
    },
    psql(user, password, args, input) {
      return new Promise((resolve) => {
        const child = execFile(
          'psql',
          ['-X', '-h', '127.0.0.1', '-p', String(port), '-U', user, '-d', sourceId, ...args],
          { env: { ...process.env, PGPASSWORD: password, PGSSLMODE: 'disable', PGCONNECT_TIMEOUT: '10' }, timeout: 30_000 },
          (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
        );
        if (input !== undefined) child.stdin!.end(input);
      });
    },
    async stop() {
      await world.stop();
      await upstream.drop();
    },
  };
}

/** Audit entries of the pgwire channel, straight from the control store. */
export async function wireAudit(ww: WireWorld): Promise<Array<Record<string, unknown>>> {
  const services = ww.world.svc.running.services;
  await new Promise((r) => setTimeout(r, 100));
  await services.audit.flush();
  return ww.direct(async () => {
    const c = await ww.world.svc.database!.connect();
    try {
      return (await c.query("select * from audit_entries where channel = 'pgwire' order by ts, id")).rows as Array<Record<string, unknown>>;
    } finally {
      await c.end();
    }
  });
}

/** The error a client call rejected with (its SQLSTATE in `code`); fails the test when the call succeeded. */
export async function sqlError(p: Promise<unknown>): Promise<{ code?: string; message: string; detail?: string; hint?: string }> {
  try {
    await p;
  } catch (err) {
    return err as { code?: string; message: string; detail?: string; hint?: string };
  }
  throw new Error('expected an error');
}

/** One answer of the gateway up to ReadyForQuery: message types in order and the SQLSTATEs of its errors. */
export interface Answer {
  types: string[];
  errors: string[];
  /** ReadyForQuery's transaction status: I, T or E. */
  status: string;
}

export interface RawSession {
  send(...messages: Buffer[]): Promise<Answer>;
  close(): Promise<void>;
}

/**
 * A session driven message by message: node-postgres logs in (SCRAM), then its socket is taken over, because the
 * driver itself never re-Parses a name it has prepared.
 */
export async function openRawSession(ww: WireWorld, user: string, password: string): Promise<RawSession> {
  const client = new pg.Client({ host: '127.0.0.1', port: ww.port, user, password, database: ww.sourceId, ssl: false });
  // The socket is ours after the login; the driver's view of it (its end, any error) is of no interest.
  client.on('error', () => undefined);
  await client.connect();
  const socket = (client as unknown as { connection: { stream: net.Socket } }).connection.stream;
  socket.removeAllListeners('data');
  const reader = new FrameReader({ startupBytes: 0, messageBytes: 1 << 20 });
  reader.startup = false;
  let waiting: ((a: Answer) => void) | null = null;
  let answer: Answer = { types: [], errors: [], status: '' };
  socket.on('data', (chunk: Buffer) => {
    reader.push(chunk);
    for (let f = reader.next(); f !== null; f = reader.next()) {
      answer.types.push(String.fromCharCode(f.type));
      if (f.type === Backend.ErrorResponse) answer.errors.push(parseErrorFields(f.body).get('C') ?? '?');
      if (f.type === Backend.ReadyForQuery) {
        const done = { ...answer, status: String.fromCharCode(f.body[0]!) };
        answer = { types: [], errors: [], status: '' };
        waiting?.(done);
      }
    }
  });
  return {
    send: (...messages) => new Promise<Answer>((resolve) => {
      waiting = resolve;
      socket.write(Buffer.concat(messages));
    }),
    close: async () => {
      socket.end(message(0x58, Buffer.alloc(0)));
      await new Promise((r) => setTimeout(r, 50));
    },
  };
}

/** What the MCP `query` tool answered: an error's text, or the rows (PostgreSQL text format). */
export interface McpAnswer {
  isError: boolean;
  /** The whole answer as JSON: what must not hold a protected value. */
  all: string;
  rows: unknown[][];
}

export interface McpSession {
  query(sql: string, params?: unknown[]): Promise<McpAnswer>;
  close(): Promise<void>;
}

/** The same service's third front door: an MCP SDK client on its /mcp with the agent's key, calling `query` on the world's source. */
export async function openMcpSession(ww: WireWorld, key: string): Promise<McpSession> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const client = new Client({ name: 'gatehouse-wire-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${ww.world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return {
    async query(sql, params) {
      let r: Awaited<ReturnType<typeof client.callTool>>;
      try {
        r = await client.callTool({ name: 'query', arguments: { source_id: ww.sourceId, sql, ...(params ? { params } : {}) } });
      } catch (err) {
        // A failure (not a refusal) is a JSON-RPC error: `unavailable` is -32603 with the registry's message.
        return { isError: true, all: JSON.stringify({ error: { code: (err as { code?: unknown }).code, message: (err as Error).message } }), rows: [] };
      }
      const rows = ((r.structuredContent ?? {}) as { rows?: unknown[][] }).rows ?? [];
      return { isError: r.isError === true, all: JSON.stringify(r), rows };
    },
    close: () => client.close().catch(() => undefined),
  };
}
