// pg_username over the admin API (docs/pgwire.md "Login"): set at create and update, validated, one wire user name per identity, and psql logs in with it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;

beforeAll(async () => {
  ww = await startWireWorld();
}, 60_000);
afterAll(async () => ww?.stop());

describe('pg_username through the JSON API', () => {
  it('is set at create, shown in answers, and is the user psql logs in with (the name then is not)', async () => {
    const agent = await ww.world.agent('Billing Agent', [{ source_id: ww.sourceId, role_key: 'reader' }], { pg_username: 'billing_agent' });
    const got = await ww.world.admin('GET', `/api/identities/${agent.id}`);
    expect(got.json.pg_username).toBe('billing_agent');
    const ok = await ww.psql('billing_agent', agent.key, ['-At', '-c', 'select name from customers where id = 1']);
    expect(ok.stderr).toBe('');
    expect(ok.stdout.trim()).toBe('Ada');
    const byName = await ww.psql('Billing Agent', agent.key, ['-At', '-c', 'select 1']);
    expect(byName.code).not.toBe(0);
    expect(byName.stderr).toMatch(/password authentication failed|28P01/);
  });

  it('is changed and cleared by PATCH; the wire follows', async () => {
    const agent = await ww.world.agent('patch-agent', [{ source_id: ww.sourceId, role_key: 'reader' }]);
    expect((await ww.world.admin('GET', `/api/identities/${agent.id}`)).json).not.toHaveProperty('pg_username');
    const set = await ww.world.admin('PATCH', `/api/identities/${agent.id}`, { pg_username: 'patched_user' });
    expect(set.status, set.text).toBe(200);
    expect(set.json.pg_username).toBe('patched_user');
    expect((await ww.psql('patched_user', agent.key, ['-At', '-c', 'select 1'])).stdout.trim()).toBe('1');
    const cleared = await ww.world.admin('PATCH', `/api/identities/${agent.id}`, { pg_username: null });
    expect(cleared.status, cleared.text).toBe(200);
    expect(cleared.json).not.toHaveProperty('pg_username');
    expect((await ww.psql('patch-agent', agent.key, ['-At', '-c', 'select 1'])).stdout.trim()).toBe('1');
  });

  it.each([['has space'], [''], ['a'.repeat(64)], ['-leading'], ['semi;colon'], ["quote'd"], [12]])('refuses the malformed value %j with 422 at loc [body, pg_username]', async (value) => {
    const res = await ww.world.admin('POST', '/api/identities', { name: 'bad-wire-name', generate_key: true, pg_username: value });
    expect(res.status, res.text).toBe(422);
    const item = (res.json.detail as Array<{ loc: unknown[]; type: string }>).find((d) => JSON.stringify(d.loc) === '["body","pg_username"]');
    // A known field with a bad value, not an unknown field.
    expect(item?.type, res.text).toMatch(/^(type_error|value_error)/);
  });

  it('one wire user name, one identity: another pg_username or another identity\'s login name is a 409', async () => {
    await ww.world.agent('unique-a', [], { pg_username: 'shared_wire' });
    const dupPg = await ww.world.admin('POST', '/api/identities', { name: 'unique-b', generate_key: true, pg_username: 'shared_wire' });
    expect(dupPg.status, dupPg.text).toBe(409);
    const asName = await ww.world.admin('POST', '/api/identities', { name: 'shared_wire', generate_key: true });
    expect(asName.status, asName.text).toBe(409);
    const plain = await ww.world.agent('plain-name', []);
    const other = await ww.world.agent('other-agent', []);
    const takeName = await ww.world.admin('PATCH', `/api/identities/${other.id}`, { pg_username: 'plain-name' });
    expect(takeName.status, takeName.text).toBe(409);
    const own = await ww.world.admin('PATCH', `/api/identities/${plain.id}`, { pg_username: 'plain-name' });
    expect(own.status, own.text).toBe(200);
  });
});
