// Prevents a lost control store from answering 500 `internal`: every front door (proxy, MCP, wire) and the admin API answer the spec §7 status for a missing mandatory dependency (503 / 57P03) from the first moment the database is gone.
import { afterAll, beforeAll, expect, it } from 'vitest';
import pg from 'pg';
import { REVOCATION_MARKER_MS } from '../../src/identity/key-sessions.js';
import { sleep } from '../support/wait.js';
import { createTestDatabase, TEST_PG_HOST, TEST_PG_PORT, type TestDatabase } from '../support/pg.js';
import { startFaultWorld, type FaultWorld } from './support.js';

let fw: FaultWorld;
let source: TestDatabase;
beforeAll(async () => {
  fw = await startFaultWorld();
  source = await createTestDatabase();
  const created = await fw.world.admin('POST', '/api/data-sources', {
    name: 'pgsrc',
    source_id: 'pgsrc',
    source_type: 'postgres',
    connection_config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: source.name, user: 'postgres', ssl_mode: 'disable' },
    create_default_roles: true,
  });
  expect(created.status, created.text).toBeLessThan(300);
}, 60_000);
afterAll(async () => {
  await fw?.stop();
  await source?.drop();
});

const JSONRPC = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

it('answers 503 unavailable, never 500 internal, on every path right after the database dies', async () => {
  const w = fw.world;
  const agent = await w.agent('store-errors-agent', [
    { source_id: 'up', role_key: 'writer' },
    { source_id: 'up2', role_key: 'writer' },
    { source_id: 'pgsrc', role_key: 'reader' },
  ]);
  // The key is known (its session is cached once the grants' revocation marker has expired); the source `up2`
  // has not been used yet, so its grants are read at use.
  await sleep(REVOCATION_MARKER_MS + 200);
  expect((await w.proxy(agent.key, 'GET', '/proxy/up/warm')).status).toBe(200);
  expect((await w.proxy(agent.key, 'GET', '/proxy/up/warm')).status).toBe(200);

  await fw.cluster.kill();

  const proxied = await w.proxy(agent.key, 'GET', '/proxy/up2/first');
  expect(proxied.status, proxied.text).toBe(503);
  expect(proxied.json.error).toBe('unavailable');

  // MCP: a tool that reads the caller's grants.
  const mcp = await fetch(`${w.svc.gatewayUrl}/mcp`, {
    method: 'POST',
    headers: { ...JSONRPC, authorization: `Bearer ${agent.key}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_sources', arguments: {} } }),
  });
  const mcpText = await mcp.text();
  expect(mcpText).not.toContain('"internal"');
  expect(mcpText).toContain('"unavailable"');

  // The wire listener: the login itself needs the control store.
  const client = new pg.Client({ host: '127.0.0.1', port: w.svc.running.addresses['gateway.pg_port']!.port, user: 'store-errors-agent', password: agent.key, database: 'pgsrc', connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  const wire = await client.connect().then(
    () => null,
    (e: unknown) => e as { code?: string },
  );
  await client.end().catch(() => undefined);
  expect(wire?.code).toBe('57P03');

  // The admin API.
  const admin = await w.admin('GET', '/api/identities');
  expect(admin.status, admin.text).toBe(503);
}, 60_000);
