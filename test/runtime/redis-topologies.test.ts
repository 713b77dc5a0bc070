// The gateway on a real Redis Sentinel setup and a real Redis Cluster (docs/operations.md "Redis Sentinel and Cluster"): rate budgets, the governed cache and /ready work on each; with Sentinel the primary is killed while requests run — rate-limited requests are refused 503 (fail closed) until the sentinels promote the replica, nothing else fails, and everything recovers without a restart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../support/world.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { startClusterSetup, startSentinelSetup, type ClusterSetup, type SentinelSetup } from '../support/redis-topologies.js';
import { sleep } from '../support/wait.js';

let upstream: TestUpstream;
let version = 1;

beforeAll(async () => {
  upstream = await startUpstream({
    '/base/cached/doc': (req, res) => {
      if (req.method === 'POST') version++;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300' }).end(JSON.stringify({ v: version }));
    },
  });
});
afterAll(async () => upstream?.close());

async function governed(world: World): Promise<{ key: string; writer: string }> {
  await world.httpSource('topo', `http://127.0.0.1:${upstream.port}/base/`);
  await world.policy({ name: 'budget', priority: 50, conditions: { source_ids: ['topo'], paths: ['/limited/**'] }, actions: { effect: 'allow', rate_limit: '6/minute', cache: false } });
  await world.policy({ name: 'roomy budget', priority: 40, conditions: { source_ids: ['topo'], paths: ['/roomy/**'] }, actions: { effect: 'allow', rate_limit: '100000/minute', cache: false } });
  const reader = await world.agent('topo-reader', [{ source_id: 'topo', role_key: 'reader' }]);
  const writer = await world.agent('topo-writer', [{ source_id: 'topo', role_key: 'writer' }]);
  return { key: reader.key, writer: writer.key };
}

async function readyStatus(world: World): Promise<number> {
  return (await fetch(`${world.svc.gatewayUrl}/ready`)).status;
}

async function cacheRoundTrip(world: World, reader: string, writer: string): Promise<void> {
  const first = await world.proxy(reader, 'GET', '/proxy/topo/cached/doc');
  expect(first.status).toBe(200);
  const second = await world.proxy(reader, 'GET', '/proxy/topo/cached/doc');
  expect(second.headers.get('x-gatehouse-cache')).toBe('hit');
  expect(second.text).toBe(first.text);
  expect((await world.proxy(writer, 'POST', '/proxy/topo/cached/doc', { body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(200);
  const after = await world.proxy(reader, 'GET', '/proxy/topo/cached/doc');
  expect(after.headers.get('x-gatehouse-cache')).not.toBe('hit');
  expect(after.text).not.toBe(first.text);
}

describe('gateway on Redis Cluster', () => {
  let cluster: ClusterSetup;
  let world: World;
  beforeAll(async () => {
    cluster = await startClusterSetup();
    world = await startWorld({
      privateSources: ['topo'],
      env: { SERVICE_REDIS__URL: cluster.url, SERVICE_REDIS__CLUSTER: 'true', SERVICE_REDIS__CLUSTER_NODES: cluster.otherNodes.join(',') },
    });
  }, 90_000);
  afterAll(async () => {
    await world?.stop();
    await cluster?.stop();
  });

  it('/ready, the rate budget and the governed cache with its invalidation work', async () => {
    const { key, writer } = await governed(world);
    expect(await readyStatus(world)).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) statuses.push((await world.proxy(key, 'GET', `/proxy/topo/limited/${i}`)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429, 429, 429]);
    await cacheRoundTrip(world, key, writer);
  });
});

describe('gateway on Redis Sentinel', () => {
  let sentinel: SentinelSetup;
  let world: World;
  beforeAll(async () => {
    sentinel = await startSentinelSetup();
    world = await startWorld({
      privateSources: ['topo'],
      env: { SERVICE_REDIS__URL: sentinel.url, SERVICE_REDIS__SENTINEL_MASTER: sentinel.masterName, SERVICE_REDIS__SENTINELS: sentinel.otherSentinels.join(',') },
    });
  }, 90_000);
  afterAll(async () => {
    await world?.stop();
    await sentinel?.stop();
  });

  it('the primary killed under load: rate-limited requests fail closed (503) during the failover, the rest are served, all recovers without a restart', async () => {
    const { key, writer } = await governed(world);
    expect(await readyStatus(world)).toBe(200);
    await cacheRoundTrip(world, key, writer);

    const roomy: number[] = [];
    const plain: number[] = [];
    const ready: number[] = [];
    let stop = false;
    const load = (async () => {
      for (let n = 0; !stop; n++) {
        roomy.push((await world.proxy(key, 'GET', `/proxy/topo/roomy/${n}`)).status);
        plain.push((await world.proxy(key, 'GET', `/proxy/topo/plain/${n}`)).status);
        ready.push(await readyStatus(world));
        await sleep(20);
      }
    })();
    await sleep(500);
    await sentinel.killPrimary();
    // Recovery, without a restart: the rate-limited path answers 200 again.
    const deadline = Date.now() + 20_000;
    while (roomy.at(-1) !== 200 || roomy.filter((s) => s === 503).length === 0) {
      if (Date.now() > deadline) break;
      await sleep(100);
    }
    await sleep(1_000);
    stop = true;
    await load;

    // Fail closed while the budget cannot be counted; never a wrong answer, never anything but 200 or 503.
    expect(roomy).toContain(503);
    expect(new Set(roomy)).toEqual(new Set([200, 503]));
    expect(roomy.at(-1)).toBe(200);
    // Requests without a rate limit do not need Redis to be answered.
    expect(plain.filter((s) => s !== 200)).toEqual([]);
    // /ready reported the outage and recovered.
    expect(ready).toContain(503);
    expect(ready.at(-1)).toBe(200);
    // The budget is counted again and the cache (and its cross-replica invalidation channel) works on the new primary.
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await world.proxy(key, 'GET', `/proxy/topo/limited/after-${i}`)).status);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(6);
    expect(statuses.slice(-2)).toEqual([429, 429]);
    await cacheRoundTrip(world, key, writer);
    console.log(`sentinel failover through the gateway: ${roomy.length} rate-limited requests (${roomy.filter((s) => s === 503).length} × 503), ${plain.length} plain (all 200), /ready 503 ${ready.filter((s) => s === 503).length} times`);
  }, 90_000);
});
