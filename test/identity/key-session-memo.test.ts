// The in-memory key-session memo never outlives a revocation: disabling an identity on one replica is refused at once by another replica that just served it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, answer, type World } from '../support/world.js';
import { startTestService, type TestService } from '../support/service.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { REVOCATION_MARKER_MS } from '../../src/identity/key-sessions.js';

let world: World;
let replica: TestService;
let upstream: TestUpstream;

beforeAll(async () => {
  upstream = await startUpstream({});
  world = await startWorld({ privateSources: ['memo-src'] });
  replica = await startTestService({ database: world.svc.database!, env: world.svc.env });
  await world.httpSource('memo-src', `http://127.0.0.1:${upstream.port}/`);
});

afterAll(async () => {
  await replica?.stop();
  await world?.stop();
  await upstream?.close();
});

/** Serves the agent on the replica until its key session is cached in Redis and in the replica's memo. */
async function warm(key: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while ((await viaReplica(key)) !== 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  // The grant just made left a revocation marker: key sessions are cached only once it has expired.
  await new Promise((r) => setTimeout(r, REVOCATION_MARKER_MS + 200));
  for (let i = 0; i < 3; i++) expect(await viaReplica(key)).toBe(200);
}

async function viaReplica(key: string): Promise<number> {
  return (await answer(await fetch(`${replica.gatewayUrl}/proxy/memo-src/item`, { headers: { authorization: `Bearer ${key}` } }))).status;
}

describe('key-session memo', () => {
  it('a disabled identity is refused on another replica immediately, although that replica served it a moment ago', async () => {
    const agent = await world.agent('memo-agent', [{ source_id: 'memo-src', role_key: 'reader' }]);
    await warm(agent.key);

    const disabled = await world.admin('PATCH', `/api/identities/${agent.id}`, { enabled: false });
    expect(disabled.status, disabled.text).toBe(200);
    // The broadcast arrives within pub/sub latency; allow a few milliseconds, far below the memo's 1 s lifetime.
    await new Promise((r) => setTimeout(r, 50));
    expect(await viaReplica(agent.key)).toBe(401);
  });

  it('a rotated key stops working on another replica immediately', async () => {
    const agent = await world.agent('memo-rotate', [{ source_id: 'memo-src', role_key: 'reader' }]);
    await warm(agent.key);
    const rotated = await world.admin('POST', `/api/identities/${agent.id}/rotate-key`);
    expect(rotated.status).toBe(200);
    await new Promise((r) => setTimeout(r, 50));
    expect(await viaReplica(agent.key)).toBe(401);
    expect(await viaReplica(rotated.json.api_key as string)).toBe(200);
  });
});
