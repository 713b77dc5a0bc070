// An upstream session that does not hold the search_path the gateway governs under is never used: behind a pooler that drops startup options (PgBouncer's ignore_startup_parameters = options) the session kept PostgreSQL's default "$user", public, and a schema named after the source login shadowed public — an agent granted public.* read postgres.customers through MCP and the wire.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openMcpSession, sqlError, startWireWorld, type WireWorld } from './fixture.js';
import { startPgBouncer, type PgBouncerHandle } from '../support/pgbouncer.js';

const SHADOW = 'SHADOWED-3f9e-SECRET';
const SETUP = `
create table customers (id int primary key, name text);
insert into customers values (1, 'Ada');
create schema postgres;
create table postgres.customers (id int primary key, name text);
insert into postgres.customers values (1, '${SHADOW}');
`;

let bouncer: PgBouncerHandle;
let ww: WireWorld;
let agent: { id: number; key: string };

beforeAll(async () => {
  bouncer = await startPgBouncer({ ignoreStartupParameters: ['options', 'statement_timeout'] });
  ww = await startWireWorld({ sourceId: 'bouncedpath', setupSql: SETUP, sourceConfig: { port: bouncer.port } });
  // The pooler really drops the gateway's `-c search_path=public`: a client asking for it gets the server default.
  const c = new pg.Client({ connectionString: bouncer.urlOf(ww.upstream.name), options: '-c search_path=public' });
  await c.connect();
  const seen = (await c.query('select name from customers').finally(() => c.end())).rows[0].name as string;
  expect(seen).toBe(SHADOW);
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'public-reader',
    rules: { sql: [{ operations: ['read'], tables: ['public.*'], approval: 'never' }] },
  });
  if (role.status >= 300) throw new Error(role.text);
  agent = await ww.world.agent('bounced-agent', [{ source_id: ww.sourceId, role_key: 'public-reader' }]);
}, 90_000);
afterAll(async () => {
  await ww?.stop();
  await bouncer?.stop();
});

describe('the upstream session must hold the governed search_path', () => {
  test('MCP: the statement is not run on a session under another path (unavailable, -32603), nothing of postgres.customers', async () => {
    const mcp = await openMcpSession(ww, agent.key);
    try {
      const m = await mcp.query('select name from customers');
      expect(m.all).not.toContain(SHADOW);
      expect(m.isError, m.all).toBe(true);
      expect(m.all).toMatch(/-32603.*could not be set up/);
    } finally {
      await mcp.close();
    }
  });

  test('wire: the session is refused the same way', async () => {
    const e = await sqlError(
      (async () => {
        const c = await ww.client('bounced-agent', agent.key);
        try {
          return await c.query('select name from customers');
        } finally {
          await c.end().catch(() => undefined);
        }
      })(),
    );
    expect(e.message).not.toContain(SHADOW);
    expect(e.code).toBe('57P03');
  });
});
