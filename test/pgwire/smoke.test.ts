// First light: psql and node-postgres log in with SCRAM and run governed statements.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
let reader: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld();
  reader = await ww.world.agent('wire-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
}, 60_000);
afterAll(async () => ww?.stop());

test('psql select', async () => {
  const r = await ww.psql('wire-reader', reader.key, ['-c', 'select id, name from customers order by id']);
  expect(r.stderr).toBe('');
  expect(r.stdout).toContain('Ada');
});

test('node-postgres params', async () => {
  const c = await ww.client('wire-reader', reader.key);
  const r = await c.query('select name from customers where id = $1', [2]);
  expect(r.rows).toEqual([{ name: 'Bob' }]);
  await c.end();
});
