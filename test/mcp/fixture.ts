// Test fixture for the MCP endpoint: a running service with an HTTP source (loopback upstream) and a PostgreSQL source (a dedicated test database), both in privateSources, and an SDK client factory.
import pg from 'pg';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startWorld, type World } from '../support/world.js';
import { createTestDatabase, TEST_PG_HOST, TEST_PG_PORT, type TestDatabase } from '../support/pg.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';

export const HTTP_SOURCE = 'mcp_http';
export const PG_SOURCE = 'mcp_pg';

export const SETUP_SQL = `
create table customers (id int primary key, name text, email text, ssn text);
insert into customers values (1, 'Ada', 'ada@example.com', '123-45-6789'), (2, 'Bob', 'bob@example.com', '987-65-4321');
create table notes (id serial primary key, body text);
`;

export interface McpWorld {
  world: World;
  upstream: TestUpstream;
  database: TestDatabase;
  /** A direct (ungoverned) query on the source database, for checks. */
  direct<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** An SDK client connected (initialized) over Streamable HTTP with the key as bearer. */
  connect(key: string | null): Promise<Client>;
  /** Audit entries of channel mcp, flushed, from the control store. */
  audit(where?: string, params?: unknown[]): Promise<Array<Record<string, unknown>>>;
  stop(): Promise<void>;
}

export async function startMcpWorld(): Promise<McpWorld> {
  const upstream = await startUpstream({
    '/base/items': (req, res) => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: [{ id: 1, email: 'jane@example.com' }] }));
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ received: Buffer.concat(chunks).toString('utf8'), method: req.method, type: req.headers['content-type'] ?? null })));
    },
    '/base/text': (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('plain words'),
  });
  const database = await createTestDatabase();
  const direct = async <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
    const c = new pg.Client({ connectionString: database.url });
    await c.connect();
    try {
      return (await c.query(sql, params)).rows as T[];
    } finally {
      await c.end();
    }
  };
  await direct(SETUP_SQL);
  const world = await startWorld({ privateSources: [HTTP_SOURCE, PG_SOURCE] });
  await world.httpSource(HTTP_SOURCE, `http://127.0.0.1:${upstream.port}/base/`);
  const created = await world.admin('POST', '/api/data-sources', {
    name: 'MCP test database',
    source_id: PG_SOURCE,
    source_type: 'postgres',
    connection_config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: database.name, user: 'postgres', ssl_mode: 'disable', pool_max: 4 },
    create_default_roles: true,
  });
  if (created.status >= 300) throw new Error(`create source: ${created.status} ${created.text}`);
  const deadline = Date.now() + 5_000;
  while (!world.svc.running.services.registry.get(PG_SOURCE) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));

  const clients: Client[] = [];
  return {
    world,
    upstream,
    database,
    direct,
    async connect(key) {
      const client = new Client({ name: 'gatehouse-mcp-test', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${world.svc.gatewayUrl}/mcp`), {
        requestInit: { headers: key === null ? {} : { authorization: `Bearer ${key}` } },
      });
      await client.connect(transport);
      clients.push(client);
      return client;
    },
    async audit(where = 'true', params = []) {
      await new Promise((r) => setTimeout(r, 50));
      await world.svc.running.services.audit.flush();
      const c = await world.svc.database!.connect();
      try {
        return (await c.query(`select * from audit_entries where channel = 'mcp' and (${where}) order by ts, id`, params)).rows as Array<Record<string, unknown>>;
      } finally {
        await c.end();
      }
    },
    async stop() {
      for (const c of clients) await c.close().catch(() => undefined);
      await world.stop();
      await upstream.close();
      await database.drop();
    },
  };
}
