// The Redis adapter on a real Redis Sentinel setup (primary, replica, three sentinels) and a real three-primary Redis Cluster, started here: the coordination contract on each, hash-slot routing and cross-node pub/sub in the cluster, shared rate budgets on both, and the primary killed under load with Sentinel (fail closed during the failover, recovery without a restart).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinationError, RedisCoordination, type HostPort, type RedisTopology } from '../../src/coord/index.js';
import { RateLimiter } from '../../src/ratelimit/limiter.js';
import { coordinationContract, waitFor } from './contract.js';
import { startClusterSetup, startSentinelSetup, type ClusterSetup, type SentinelSetup } from '../support/redis-topologies.js';
import { sleep } from '../support/wait.js';

let sentinel: SentinelSetup;
let cluster: ClusterSetup;

beforeAll(async () => {
  [sentinel, cluster] = await Promise.all([startSentinelSetup(), startClusterSetup()]);
}, 90_000);
afterAll(async () => {
  await Promise.all([sentinel?.stop(), cluster?.stop()]);
});

const hostPort = (s: string): HostPort => ({ host: s.split(':')[0]!, port: Number(s.split(':')[1]) });
const sentinelTopology = (): RedisTopology => ({ kind: 'sentinel', masterName: sentinel.masterName, sentinels: sentinel.otherSentinels.map(hostPort) });
const clusterTopology = (): RedisTopology => ({ kind: 'cluster', nodes: cluster.otherNodes.map(hostPort) });
const onSentinel = (keyPrefix: string) => new RedisCoordination({ url: sentinel.url, keyPrefix, topology: sentinelTopology() });
const onCluster = (keyPrefix: string) => new RedisCoordination({ url: cluster.url, keyPrefix, topology: clusterTopology() });
const prefix = () => `gh:topo:${randomBytes(4).toString('hex')}:`;

coordinationContract('redis sentinel', onSentinel);
coordinationContract('redis cluster', onCluster);

describe('Redis Cluster', () => {
  it('spreads one prefix over every node; multi-key del across slots works', async () => {
    const p = prefix();
    const coord = onCluster(p);
    try {
      const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
      for (const k of keys) await coord.set(k, k);
      const owners = new Set(await Promise.all(keys.map((k) => cluster.nodeOf(p + k))));
      expect(owners.size).toBe(3);
      expect(await coord.del(keys)).toBe(30);
      expect(await coord.get('k0')).toBeNull();
    } finally {
      await coord.close();
    }
  });

  it('a message published through one seed reaches subscribers connected through the others', async () => {
    const p = prefix();
    const [a, b, c] = [onCluster(p), new RedisCoordination({ url: `redis://${cluster.otherNodes[0]}`, keyPrefix: p, topology: { kind: 'cluster', nodes: [] } }), new RedisCoordination({ url: `redis://${cluster.otherNodes[1]}`, keyPrefix: p, topology: { kind: 'cluster', nodes: [] } })];
    try {
      const got: string[][] = [[], []];
      await b.subscribe('inval', (m) => got[0]!.push(m));
      await c.subscribe('inval', (m) => got[1]!.push(m));
      for (let i = 0; i < 5; i++) await a.publish('inval', `m${i}`);
      await waitFor(() => got.every((g) => g.length === 5), 3_000, 'delivery to both');
      expect(got).toEqual([['m0', 'm1', 'm2', 'm3', 'm4'], ['m0', 'm1', 'm2', 'm3', 'm4']]);
      expect(b.status()).toEqual({ connected: true, subscriptionsHealthy: true });
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  it('a rate budget is shared by two replicas and counted exactly', async () => {
    const p = prefix();
    const [a, b] = [onCluster(p), onCluster(p)];
    try {
      const limiters = [a, b].map((c) => new RateLimiter({ redis: c.redisClient(), keyPrefix: `${p}rate` }));
      await waitFor(() => a.status().connected && b.status().connected, 5_000, 'cluster ready');
      const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => limiters[i % 2]!.consume({ identity_id: 1, source_id: 's', policy_id: 7 }, { points: 8, durationSec: 60 })));
      expect(outcomes.filter((o) => o.allowed).length).toBe(8);
      expect(outcomes.filter((o) => !o.allowed && o.reason === 'rate_limited').length).toBe(12);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('Redis Sentinel: the primary killed under load', () => {
  it('fails closed during the failover and recovers without a restart: commands, rate budget and pub/sub', async () => {
    const p = prefix();
    const [listener, worker] = [onSentinel(p), onSentinel(p)];
    try {
      const heard: string[] = [];
      await listener.subscribe('inval', (m) => heard.push(m));
      const limiter = new RateLimiter({ redis: worker.redisClient(), keyPrefix: `${p}rate` });
      await worker.set('before', 'x');
      await worker.incr('n');
      const primaryBefore = await sentinel.primaryPort();

      const failures: string[] = [];
      const limiterOutcomes: string[] = [];
      let ok = 0;
      let last = 0;
      let stop = false;
      const load = (async () => {
        while (!stop) {
          try {
            const v = await worker.incr('n');
            // Asynchronous replication may lose the last increments before the kill; a value is never repeated or reversed after recovery.
            if (v <= last && failures.length === 0) throw new Error(`counter went from ${last} to ${v}`);
            last = v;
            ok++;
          } catch (err) {
            failures.push(err instanceof CoordinationError ? err.code : String(err));
          }
          const o = await limiter.consume({ identity_id: 1, source_id: 's', policy_id: 1 }, { points: 1_000_000, durationSec: 600 });
          limiterOutcomes.push(o.allowed ? 'allowed' : o.reason);
          await sleep(20);
        }
      })();
      await sleep(500);
      const okBeforeKill = ok;
      const primaryAfter = await sentinel.killPrimary();
      expect(primaryAfter).not.toBe(primaryBefore);
      // Recovery without a new adapter: commands succeed again against the promoted replica.
      await waitFor(async () => {
        try {
          await worker.set('after', 'y');
          return true;
        } catch {
          return false;
        }
      }, 20_000, 'commands after failover', 100);
      const okAtRecovery = ok;
      await sleep(1_000);
      stop = true;
      await load;

      expect(okBeforeKill).toBeGreaterThan(5);
      expect(ok).toBeGreaterThan(okAtRecovery);
      // During the failover every failure is an outage, reported as such: nothing hangs, nothing is served wrong.
      expect(failures.length).toBeGreaterThan(0);
      expect(new Set(failures)).toEqual(new Set(['COORD_UNAVAILABLE']));
      // The rate limiter refused while it could not count (fail closed), and counts again afterwards.
      expect(limiterOutcomes).toContain('limiter_unavailable');
      expect(limiterOutcomes).not.toContain('rate_limited');
      expect(limiterOutcomes.at(-1)).toBe('allowed');
      // Data replicated before the kill is there; the subscription is restored and hears messages again.
      expect(await worker.get('before')).toBe('x');
      await waitFor(() => listener.status().subscriptionsHealthy, 10_000, 'subscription restored', 50);
      await worker.publish('inval', 'after-failover');
      await waitFor(() => heard.includes('after-failover'), 3_000, 'message after failover');
      console.log(`sentinel failover: ${ok} increments ok, ${failures.length} refused as COORD_UNAVAILABLE, limiter: ${limiterOutcomes.filter((o) => o === 'limiter_unavailable').length} limiter_unavailable`);
    } finally {
      await Promise.all([listener.close(), worker.close()]);
    }
  }, 60_000);
});
