// With no policy, the default personal-data scan redacts result values by their column's type (governance/pii/by-type.ts): drivers parse every value they get. Before, an inet came back as `[REDACTED:ip_address]/24` and a jsonb holding a card number as invalid JSON, which node-postgres's and psycopg2's JSON parsers threw on.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
let reader: { id: number; key: string };

const SETUP = `
create table devices (id int primary key, addr inet, owner text, meta jsonb, meta_json json, serial numeric, tags text[]);
insert into devices values
  (1, '203.0.113.9/24', 'jane@example.com', '{"owner": "jane@example.com", "card": 4111111111111111, "ok": true}', '{"n": 4111111111111111}', 4111111111111111, '{jane@example.com}'),
  (2, '10.1.2.3', 'nobody', '{"ok": true}', '{"n": 1}', 42, '{plain}');
`;

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'typedsrc', setupSql: SETUP });
  reader = await ww.world.agent('typed-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
}, 60_000);
afterAll(async () => ww?.stop());

test('node-postgres (text and extended protocol) parses every redacted value: inet, numeric and arrays are NULL, JSON stays JSON', async () => {
  const c = await ww.client('typed-reader', reader.key);
  try {
    for (const run of [() => c.query('select * from devices order by id'), () => c.query('select * from devices where id > $1 order by id', [0])]) {
      const { rows } = await run();
      expect(rows[0]).toEqual({
        id: 1,
        addr: null,
        owner: '[REDACTED:email]',
        meta: { owner: '[REDACTED:email]', card: '[REDACTED:card]', ok: true },
        meta_json: { n: '[REDACTED:card]' },
        serial: null,
        tags: null,
      });
      // Values without personal data are untouched (an address is always one).
      expect(rows[1]).toEqual({ id: 2, addr: null, owner: 'nobody', meta: { ok: true }, meta_json: { n: 1 }, serial: '42', tags: ['plain'] });
    }
  } finally {
    await c.end();
  }
});

test('psycopg2 parses the redacted row (json via json.loads, inet, numeric)', async () => {
  const script = `
import psycopg2, sys, json
c = psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='typed-reader', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable')
cur = c.cursor()
cur.execute('select addr, owner, meta, serial from devices where id = 1')
print(json.dumps(cur.fetchone()))
`;
  const r = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
    execFile('/usr/bin/python3', ['-c', script, reader.key], { timeout: 30_000 }, (_e, stdout, stderr) => resolve({ stdout, stderr }));
  });
  expect(r.stderr).toBe('');
  expect(JSON.parse(r.stdout)).toEqual([null, '[REDACTED:email]', { owner: '[REDACTED:email]', card: '[REDACTED:card]', ok: true }, null]);
});
