// The key-digest memo saves the HMAC per request without deciding anything: only accepted keys are remembered, under their pepper, and a remembered digest still has to find a live key session.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCoordination } from '../../src/coord/index.js';
import { authenticateAgent, type AgentAuthDeps } from '../../src/identity/authenticate.js';
import { digestApiKey } from '../../src/identity/keys.js';
import { KeySessionMemo, encodeSession, keySessionKey, revokeKeySessions, type AgentIdentity } from '../../src/identity/key-sessions.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';

const PEPPER = 'test-pepper-0001';
const KEY = 'gh_digest-memo-test-key-0123456789abcdef';
const identity: AgentIdentity = { id: 7, name: 'memo', roles: [], team: null, mapped_pg_role: null, enabled: true, grant_version: 1, auth_version: 1 };
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as AgentAuthDeps['log'];
/** A real control store (PostgreSQL, migrated) that holds no identity: every lookup by digest finds nothing. */
let emptyStore: MigratedStore;
beforeAll(async () => {
  emptyStore = await withMigratedStore({ poolMax: 2 });
});
afterAll(async () => {
  await emptyStore.cleanup();
});

const memos: KeySessionMemo[] = [];
afterEach(async () => {
  for (const m of memos.splice(0)) await m.stop();
});

async function setup(): Promise<{ deps: AgentAuthDeps; memo: KeySessionMemo; coord: MemoryCoordination }> {
  const coord = new MemoryCoordination();
  const memo = new KeySessionMemo(coord);
  await memo.start();
  memos.push(memo);
  return { memo, coord, deps: { db: emptyStore.store.db, coord, log: silent, ttlSeconds: 60, memo, pepper: PEPPER, legacyAllowed: false } };
}

describe('key-digest memo', () => {
  it('remembers the digest of a key that authenticated, under its pepper only', async () => {
    const { deps, memo, coord } = await setup();
    const digest = digestApiKey(PEPPER, KEY);
    await coord.set(keySessionKey(digest), encodeSession(digest, identity), { ttlMs: 60_000 });
    expect(memo.digestOf(PEPPER, KEY)).toBeUndefined();
    await expect(authenticateAgent(deps, `Bearer ${KEY}`)).resolves.toMatchObject({ id: 7 });
    expect(memo.digestOf(PEPPER, KEY)).toBe(digest);
    expect(memo.digestOf('another-pepper', KEY)).toBeUndefined();
  });

  it('never remembers a key that was refused', async () => {
    const { deps, memo } = await setup();
    await expect(authenticateAgent(deps, 'Bearer gh_unknown-key-0000000000000000')).rejects.toMatchObject({ code: 'unauthenticated' });
    expect(memo.digestOf(PEPPER, 'gh_unknown-key-0000000000000000')).toBeUndefined();
  });

  it('a remembered digest does not keep a revoked key session alive', async () => {
    const { deps, memo, coord } = await setup();
    const digest = digestApiKey(PEPPER, KEY);
    await coord.set(keySessionKey(digest), encodeSession(digest, identity), { ttlMs: 60_000 });
    await authenticateAgent(deps, `Bearer ${KEY}`);
    expect(memo.digestOf(PEPPER, KEY)).toBe(digest);
    await revokeKeySessions(deps, [digest]);
    // The session is gone and the control store no longer knows the key: refused, whatever the digest memo holds.
    await expect(authenticateAgent(deps, `Bearer ${KEY}`)).rejects.toMatchObject({ code: 'unauthenticated' });
  });

  it('a session read before a revocation is not remembered after it', async () => {
    const { deps, memo, coord } = await setup();
    const digest = digestApiKey(PEPPER, KEY);
    await coord.set(keySessionKey(digest), encodeSession(digest, identity), { ttlMs: 60_000 });
    // authenticateAgent runs up to its coordination-store read; the revocation is heard while that read is in flight.
    const pending = authenticateAgent(deps, `Bearer ${KEY}`);
    memo.drop([digest]);
    await expect(pending).resolves.toMatchObject({ id: 7 });
    expect(memo.get(digest)).toBeUndefined();
    // Without a revocation in between, the session read is remembered.
    await authenticateAgent(deps, `Bearer ${KEY}`);
    expect(memo.get(digest)).toMatchObject({ id: 7 });
  });

  it('forgets every remembered key when the memo stops', async () => {
    const { deps, memo, coord } = await setup();
    const digest = digestApiKey(PEPPER, KEY);
    await coord.set(keySessionKey(digest), encodeSession(digest, identity), { ttlMs: 60_000 });
    await authenticateAgent(deps, `Bearer ${KEY}`);
    await memo.stop();
    expect(memo.digestOf(PEPPER, KEY)).toBeUndefined();
  });
});
