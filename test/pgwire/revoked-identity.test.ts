// An open wire session of a disabled identity, a rotated key or a revoked grant runs no further statement: the revocation broadcast reaches the wire listener of another replica at once, and a message it cannot read drops every identity's state.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import pg from 'pg';
import { startWireWorld, type WireWorld } from './fixture.js';
import { startTestService, type TestService } from '../support/service.js';
import { waitFor } from '../support/wait.js';
import { agentAuthDeps, startKeySessionMemo } from '../../src/identity/index.js';
import { KEY_SESSION_REVOKED_CHANNEL, KeySessionMemo, revokeKeySessions } from '../../src/identity/key-sessions.js';
import { MemoryCoordination } from '../../src/coord/index.js';
import { IdentityRefresher } from '../../src/gateway/pgwire/decide.js';
import { withDeadline } from '../../src/util/deadline.js';

let ww: WireWorld;
/** A second gateway on the same database and Redis: the operator's change is made on the world, so only the broadcast can tell this one. */
let replica: TestService;
/** A direct client on the control store, to change an identity without any broadcast. */
let control: pg.Client;

const BY_ID = 'select name from customers where id = $1';

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'revsrc' });
  replica = await startTestService({ database: ww.world.svc.database!, env: ww.world.svc.env });
  await waitFor(() => replica.running.services.registry.get(ww.sourceId) !== undefined, 5_000, 'the replica knows the source');
  control = await ww.world.svc.database!.connect();
}, 60_000);

afterAll(async () => {
  await control?.end();
  await replica?.stop();
  await ww?.stop();
});

/** A node-postgres session on the replica's wire listener. */
async function onReplica(user: string, key: string): Promise<pg.Client> {
  const c = new pg.Client({ host: '127.0.0.1', port: replica.running.addresses['gateway.pg_port']!.port, user, password: key, database: ww.sourceId });
  c.on('error', () => undefined);
  await c.connect();
  return c;
}

/** Runs a statement (prepared and named when `name` is given); the SQLSTATE it was refused with, or null. */
async function refusal(c: pg.Client, name?: string): Promise<string | null> {
  try {
    await c.query(name ? { name, text: BY_ID, values: [1] } : `select name from customers where id = 1`);
    return null;
  } catch (err) {
    return (err as { code?: string }).code ?? 'unknown';
  }
}

async function ok(status: Promise<{ status: number; text: string }>): Promise<void> {
  const a = await status;
  expect(a.status, a.text).toBeLessThan(300);
}

/**
 * Makes a change and waits until the replica has heard the revocation it broadcasts: Redis acknowledges a publish
 * before it delivers it, so a statement sent at once could still be decided with the old state. The replica's wire
 * listener hears each revocation before this listener does (listeners run in the order they were added).
 */
async function heardByReplica<T>(change: () => Promise<T>): Promise<T> {
  const memo = await startKeySessionMemo(replica.running.services);
  let stop = (): void => undefined;
  const heard = new Promise<void>((resolve) => {
    stop = memo.onRevoked(() => resolve());
  });
  try {
    const result = await change();
    await withDeadline(heard, 5_000, () => {
      throw new Error('the replica heard no revocation within 5 s');
    });
    return result;
  } finally {
    stop();
  }
}

async function digestOf(id: number): Promise<string> {
  return ((await control.query('select api_key_digest from identities where id = $1', [id])).rows[0] as { api_key_digest: string }).api_key_digest;
}

/** Disables the identity in the control store only: no revocation is broadcast. */
async function disableSilently(id: number): Promise<void> {
  await control.query('update identities set enabled = false where id = $1', [id]);
}

const publish = (message: string) => ww.world.svc.running.services.coord.publish(KEY_SESSION_REVOKED_CHANNEL, message);

// No test waits between the change and the next statement: the identity state the session read a moment ago is
// reused for up to a second unless the revocation drops it.
describe('operator changes reach open sessions on another replica at their next statement', () => {
  test('a disabled identity', async () => {
    const agent = await ww.world.agent('rev-disabled', [{ source_id: ww.sourceId, role_key: 'reader' }]);
    const remote = await onReplica('rev-disabled', agent.key);
    // A session in the process that made the change hears it from the memo directly, before the broadcast comes back.
    const local = await ww.client('rev-disabled', agent.key);
    try {
      expect(await refusal(remote)).toBeNull();
      expect(await refusal(local)).toBeNull();
      await heardByReplica(() => ok(ww.world.admin('PATCH', `/api/identities/${agent.id}`, { enabled: false })));
      expect(await refusal(remote)).toBe('28000');
      expect(await refusal(local)).toBe('28000');
    } finally {
      await remote.end().catch(() => undefined);
      await local.end().catch(() => undefined);
    }
  });

  test('a rotated key, with the new key signing in', async () => {
    const agent = await ww.world.agent('rev-rotated', [{ source_id: ww.sourceId, role_key: 'reader' }]);
    const c = await onReplica('rev-rotated', agent.key);
    let newKey: string;
    try {
      expect(await refusal(c, 'byid')).toBeNull();
      const rotated = await heardByReplica(() => ww.world.admin('POST', `/api/identities/${agent.id}/rotate-key`));
      expect(rotated.status, rotated.text).toBe(200);
      newKey = rotated.json.api_key as string;
      expect(await refusal(c, 'byid')).toBe('28000');
    } finally {
      await c.end().catch(() => undefined);
    }
    const again = await onReplica('rev-rotated', newKey);
    try {
      expect(await refusal(again, 'byid')).toBeNull();
    } finally {
      await again.end();
    }
  });

  test('a revoked grant refuses the next statement, prepared (decided from the memo until then) or not', async () => {
    const agent = await ww.world.agent('rev-grant', [{ source_id: ww.sourceId, role_key: 'reader' }]);
    const c = await onReplica('rev-grant', agent.key);
    try {
      for (let i = 0; i < 3; i++) expect(await refusal(c, 'byid')).toBeNull();
      expect(await refusal(c)).toBeNull();
      const grants = (await ww.world.admin('GET', `/api/identities/${agent.id}/grants`)).json as Array<{ id: number }>;
      await heardByReplica(() => ok(ww.world.admin('DELETE', `/api/identities/${agent.id}/grants/${grants[0]!.id}`)));
      expect(await refusal(c, 'byid')).toBe('42501');
      expect(await refusal(c)).toBe('42501');
    } finally {
      await c.end();
    }
  });

  test('a new grant applies to the next statement', async () => {
    const agent = await ww.world.agent('rev-granted');
    const c = await onReplica('rev-granted', agent.key);
    try {
      expect(await refusal(c)).toBe('42501');
      await heardByReplica(() => ok(ww.world.admin('POST', `/api/identities/${agent.id}/grants`, { source_id: ww.sourceId, role_key: 'reader' })));
      expect(await refusal(c)).toBeNull();
    } finally {
      await c.end();
    }
  });
});

describe('revocation messages', () => {
  test('with key sessions off (auth.key_session_ttl_seconds 0) a revocation is still broadcast', async () => {
    const agent = await ww.world.agent('rev-no-sessions', [{ source_id: ww.sourceId, role_key: 'reader' }]);
    const c = await onReplica('rev-no-sessions', agent.key);
    try {
      expect(await refusal(c)).toBeNull();
      await disableSilently(agent.id);
      const digest = await digestOf(agent.id);
      expect(await heardByReplica(() => revokeKeySessions({ ...agentAuthDeps(ww.world.svc.running.services), ttlSeconds: 0 }, [digest]))).toBe(true);
      expect(await refusal(c)).toBe('28000');
    } finally {
      await c.end().catch(() => undefined);
    }
  });

  test('a plain array of digests (what every version publishes) drops exactly the identities it names', async () => {
    const named = await ww.world.agent('rev-named', [{ source_id: ww.sourceId, role_key: 'reader' }]);
    const other = await ww.world.agent('rev-other', [{ source_id: ww.sourceId, role_key: 'reader' }]);
    const a = await onReplica('rev-named', named.key);
    const b = await onReplica('rev-other', other.key);
    try {
      expect(await refusal(a)).toBeNull();
      expect(await refusal(b)).toBeNull();
      await disableSilently(named.id);
      await disableSilently(other.id);
      // Nothing told the replica yet: the state read a moment ago still answers.
      expect(await refusal(a)).toBeNull();
      const digest = await digestOf(named.id);
      await heardByReplica(() => publish(JSON.stringify([digest])));
      expect(await refusal(a)).toBe('28000');
      expect(await refusal(b)).toBeNull();
    } finally {
      await a.end().catch(() => undefined);
      await b.end().catch(() => undefined);
    }
  });

  test('while revocations cannot arrive, the identity is read again for every statement (as HTTP and MCP read their key sessions)', async () => {
    const agent = await ww.world.agent('rev-offline', [{ source_id: ww.sourceId, role_key: 'reader' }]);
    // A refresher on its own feed, whose subscription is then cut: the embedded coordination, closed.
    const coord = new MemoryCoordination();
    const memo = new KeySessionMemo(coord);
    await memo.start();
    const refresher = new IdentityRefresher(ww.world.svc.running.services.db, memo);
    try {
      expect((await refresher.current(agent.id))?.identity.enabled).toBe(true);
      await disableSilently(agent.id);
      // Subscribed, nothing said otherwise: the state read a moment ago is reused.
      expect((await refresher.current(agent.id))?.identity.enabled).toBe(true);
      await coord.close();
      expect(memo.live).toBe(false);
      expect((await refresher.current(agent.id))?.identity.enabled).toBe(false);
    } finally {
      refresher.close();
      await memo.stop().catch(() => undefined);
    }
  });

  test.each([
    ['rev-not-json', 'not json'],
    ['rev-object', '{"digests":[]}'],
    ['rev-number', '[42]'],
    ['rev-string', '"0123"'],
  ])('a message it cannot read drops every identity state (%s)', async (name, message) => {
    // Only within the refresher's one second does a refusal prove the message did it; a machine slow enough to cross
    // that second before the check makes the round inconclusive, and it is run again with a fresh agent.
    for (let round = 0; ; round++) {
      const agent = await ww.world.agent(`${name}-${round}`, [{ source_id: ww.sourceId, role_key: 'reader' }]);
      // Before the login: the identity state is read no earlier than this.
      const cached = performance.now();
      const c = await onReplica(`${name}-${round}`, agent.key);
      try {
        expect(await refusal(c)).toBeNull();
        await disableSilently(agent.id);
        const before = await refusal(c);
        await heardByReplica(() => publish(message));
        const after = await refusal(c);
        if (performance.now() - cached > 900 && round < 4) continue;
        expect(before).toBeNull();
        expect(after).toBe('28000');
        return;
      } finally {
        await c.end().catch(() => undefined);
      }
    }
  });
});
