// The connection tests apply the egress rules (spec §4 rule 5, src/egress/): a PostgreSQL target live traffic would be refused is never "ok", in any spelling.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_PG_PORT } from '../support/pg.js';
import { startResourceFixture, type ResourceFixture } from './support.js';

let fx: ResourceFixture;

beforeAll(async () => {
  fx = await startResourceFixture({ SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'listed-db' });
}, 60_000);

afterAll(async () => {
  await fx?.stop();
});

const pgTest = (host: string, sourceId?: string) =>
  fx.api('POST', '/api/data-sources/test', {
    source_type: 'postgres',
    ...(sourceId ? { source_id: sourceId } : {}),
    connection_config: { host, port: TEST_PG_PORT, database: 'postgres', user: 'postgres', ssl_mode: 'disable' },
  });

describe('PostgreSQL connection test and egress', () => {
  // The machine's PostgreSQL answers on every one of these: only the egress rules can make the answer "not ok".
  it.each(['127.0.0.1', 'localhost', '127.1', '2130706433', '::1', '::ffff:127.0.0.1', '0.0.0.0'])('refuses the loopback target %s for a source not listed for private egress', async (host) => {
    const res = await pgTest(host);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ ok: false, error: expect.stringMatching(/^target address not allowed/) });
    expect(res.text).not.toContain('127.0.0.1');
    const named = await pgTest(host, 'unlisted-db');
    expect(named.json).toMatchObject({ ok: false, error: expect.stringMatching(/^target address not allowed/) });
  });

  it('connects for a source_id listed in gateway.egress.allow_private_sources, as live traffic would', async () => {
    const res = await pgTest('127.0.0.1', 'listed-db');
    expect(res.json, res.text).toMatchObject({ ok: true, error: null });
  });

  it('a stored source is tested under its own source_id', async () => {
    const created = await fx.api('POST', '/api/data-sources', {
      name: 'stored-unlisted',
      source_id: 'stored-unlisted',
      source_type: 'postgres',
      connection_config: { host: '127.0.0.1', port: TEST_PG_PORT, database: 'postgres', user: 'postgres', ssl_mode: 'disable' },
    });
    expect(created.status, created.text).toBe(201);
    const res = await fx.api('POST', '/api/data-sources/test', { source_type: 'postgres', source_id: 'stored-unlisted' });
    expect(res.json).toMatchObject({ ok: false, error: expect.stringMatching(/^target address not allowed/) });
  });
});
