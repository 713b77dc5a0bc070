// An SQL write queued on a gateway is executed by an admin-only process when approved there: approved SQL runs wherever approvals are decided.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWireWorld, type WireWorld } from '../pgwire/fixture.js';
import { startTestService, type TestService } from '../support/service.js';
import { adminToken, answer, OWNER_PASSWORD } from '../support/world.js';

let ww: WireWorld;
let adminOnly: TestService;

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'adminonly' });
  adminOnly = await startTestService({ database: ww.world.svc.database!, env: ww.world.svc.env, role: 'admin' });
});

afterAll(async () => {
  await adminOnly?.stop();
  await ww?.stop();
});

describe('SQL approvals in an admin-only process', () => {
  it('executes the approved statement once on the source', async () => {
    const writer = await ww.world.agent('admin-only-writer', [{ source_id: 'adminonly', role_key: 'writer' }]);
    const c = await ww.client('admin-only-writer', writer.key);
    let detail = '';
    try {
      // UPDATE without WHERE is high risk: the writer role approves by risk.
      await c.query("update customers set name = 'Z'").catch((err: { code?: string; detail?: string }) => {
        expect(err.code).toBe('WA001');
        detail = err.detail ?? '';
      });
    } finally {
      await c.end();
    }
    const id = Number(detail.split('=')[1]);
    expect(id).toBeGreaterThan(0);

    const token = await adminToken(adminOnly.adminUrl, 'admin', OWNER_PASSWORD);
    const approved = await answer(await fetch(`${adminOnly.adminUrl}/api/approvals/${id}/approve`, { method: 'POST', headers: { authorization: `Bearer ${token}` } }));
    expect(approved.status, approved.text).toBe(200);
    expect(approved.json).toMatchObject({ id, status: 'executed', executed: true });
    expect(await ww.direct(async (d) => (await d.query("select count(*)::int as n from customers where name = 'Z'")).rows[0].n)).toBe(2);
  });
});
