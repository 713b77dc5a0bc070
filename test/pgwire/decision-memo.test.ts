// The wire decision memo: a prepared statement's unchanged decision is reused, audited the same, and dropped as soon as a grant, a policy or the time changes it.
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import type pg from 'pg';
import { buildGovernanceRuntime } from '../../src/runtime/governance.js';
import { WireRelay } from '../../src/gateway/pgwire/relay.js';
import { Frontend } from '../../src/gateway/pgwire/protocol.js';
import { startWireWorld, wireAudit, type WireWorld } from './fixture.js';
import { sleep } from '../support/wait.js';

let ww: WireWorld;

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'memosrc' });
}, 60_000);

afterAll(async () => {
  await ww?.stop();
});

const BY_ID = 'select name from customers where id = $1';

/** Runs the named statement (one Parse per connection, then Bind/Execute only); the SQLSTATE it failed with, or null. */
async function byId(c: pg.Client, id: number): Promise<string | null> {
  try {
    await c.query({ name: 'byid', text: BY_ID, values: [id] });
    return null;
  } catch (err) {
    return (err as { code?: string }).code ?? 'unknown';
  }
}

test('an unchanged prepared statement is decided once and every execution is audited the same', async () => {
  const agent = await ww.world.agent('memo-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  const runtime = await buildGovernanceRuntime(ww.world.svc.running.services);
  const classify = vi.spyOn(runtime.sql, 'classify');
  const c = await ww.client('memo-reader', agent.key);
  try {
    for (let i = 0; i < 20; i++) expect(await byId(c, (i % 2) + 1)).toBeNull();
  } finally {
    await c.end();
    classify.mockRestore();
  }
  // Parse classifies twice (split, decision) and the first execution once; the identity is re-read at most once a second.
  expect(classify.mock.calls.length).toBeLessThanOrEqual(5);
  const entries = (await wireAudit(ww)).filter((e) => e.identity_id === agent.id);
  expect(entries).toHaveLength(20);
  const decided = (e: Record<string, unknown>) => ({
    decision: e.decision, status: e.status, error_code: e.error_code, source_id: e.source_id, operation: e.operation,
    sql_fingerprint: e.sql_fingerprint, sql_normalized: e.sql_normalized, tables: e.tables, policy_ids: e.policy_ids, reasons: e.reasons,
  });
  expect(decided(entries[0]!)).toMatchObject({ decision: 'allow', status: 200, operation: 'read', tables: ['public.customers'] });
  for (const e of entries) expect(decided(e)).toEqual(decided(entries[0]!));
});

test('a revoked grant refuses the next executions of an already prepared statement', async () => {
  const agent = await ww.world.agent('memo-revoked', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  const c = await ww.client('memo-revoked', agent.key);
  try {
    for (let i = 0; i < 3; i++) expect(await byId(c, 1)).toBeNull();
    const grants = await ww.world.admin('GET', `/api/identities/${agent.id}/grants`);
    const grantId = (grants.json as Array<{ id: number }>)[0]!.id;
    expect((await ww.world.admin('DELETE', `/api/identities/${agent.id}/grants/${grantId}`)).status).toBe(200);
    // The revocation drops the session's identity state, and with it the memo's decision, before the next execution.
    expect(await byId(c, 1)).toBe('42501');
  } finally {
    await c.end();
  }
});

test('a new deny policy refuses the very next execution of a prepared statement', async () => {
  const agent = await ww.world.agent('memo-policy', [{ source_id: ww.sourceId, role_key: 'reader' }], { team: 'memo-team' });
  const c = await ww.client('memo-policy', agent.key);
  try {
    for (let i = 0; i < 3; i++) expect(await byId(c, 1)).toBeNull();
    // world.policy returns once this instance serves the new set: no execution after it may use the old decision.
    await ww.world.policy({ name: 'memo deny', conditions: { source_ids: [ww.sourceId], teams: ['memo-team'] }, actions: { effect: 'deny' } });
    expect(await byId(c, 1)).toBe('42501');
  } finally {
    await c.end();
  }
});

test('a grant that expires refuses the next execution after its expiry, without any change to re-read', async () => {
  const expiresAt = new Date(Date.now() + 2_500);
  const agent = await ww.world.agent('memo-expiry', [{ source_id: ww.sourceId, role_key: 'reader', expires_at: expiresAt.toISOString() }]);
  const c = await ww.client('memo-expiry', agent.key);
  try {
    expect(await byId(c, 1)).toBeNull();
    // Executions right up to the expiry keep the identity state cached between them.
    while (Date.now() < expiresAt.getTime() - 300) {
      expect(await byId(c, 1)).toBeNull();
      await sleep(50);
    }
    await sleep(Math.max(0, expiresAt.getTime() - Date.now()) + 20);
    expect(await byId(c, 1)).toBe('42501');
  } finally {
    await c.end();
  }
});

test('a policy that starts redacting a column applies to the next execution of the same prepared statement', async () => {
  const agent = await ww.world.agent('memo-redact', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  const c = await ww.client('memo-redact', agent.key);
  const run = async () => (await c.query({ name: 'names', text: 'select id, name from customers where id = $1', values: [1] })).rows[0] as { id: number; name: string };
  try {
    expect(await run()).toEqual({ id: 1, name: 'Ada' });
    expect(await run()).toEqual({ id: 1, name: 'Ada' });
    await ww.world.policy({ name: 'memo redact name', conditions: { identity_ids: [agent.id], source_ids: [ww.sourceId] }, actions: { effect: 'allow', redact_columns: ['name'] } });
    const after = await run();
    expect(after.id).toBe(1);
    expect(after.name).not.toBe('Ada');
  } finally {
    await c.end();
  }
});

test('an execution decided from the memo is handled at once; one whose inputs must be read waits for them and is reused the same', async () => {
  const agent = await ww.world.agent('memo-at-once', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  const runtime = await buildGovernanceRuntime(ww.world.svc.running.services);
  const handle = vi.spyOn(WireRelay.prototype, 'handle');
  const c = await ww.client('memo-at-once', agent.key);
  /** What handle() answered for each Execute since the last call: undefined when it was handled at once. */
  const executes = () => {
    const answered = handle.mock.calls.flatMap(([frame], i) => (frame.type === Frontend.Execute ? [handle.mock.results[i]!.value as unknown] : []));
    handle.mockClear();
    return answered;
  };
  try {
    for (let i = 0; i < 3; i++) expect(await byId(c, 1)).toBeNull();
    executes();
    for (let i = 0; i < 5; i++) expect(await byId(c, 2)).toBeNull();
    // Identity, role context and memo all held in memory: no promise for any of the five.
    expect(executes()).toEqual([undefined, undefined, undefined, undefined, undefined]);
    // A role context that must be read (as after its cache's TTL): the execution waits for it, and the memo still holds.
    const roleContext = runtime.deps.roleContext.bind(runtime.deps);
    const read = vi.spyOn(runtime.deps, 'roleContext').mockImplementation(async (identity, sourceId) => roleContext(identity, sourceId));
    const classify = vi.spyOn(runtime.sql, 'classify');
    try {
      expect(await byId(c, 1)).toBeNull();
      expect(read).toHaveBeenCalled();
      expect(classify).not.toHaveBeenCalled();
    } finally {
      read.mockRestore();
      classify.mockRestore();
    }
    const [waited] = executes();
    expect(waited).toBeInstanceOf(Promise);
  } finally {
    await c.end();
    handle.mockRestore();
  }
  const entries = (await wireAudit(ww)).filter((e) => e.identity_id === agent.id);
  expect(entries).toHaveLength(9);
  for (const e of entries) expect(e).toMatchObject({ decision: 'allow', status: 200, operation: 'read', tables: ['public.customers'] });
});
