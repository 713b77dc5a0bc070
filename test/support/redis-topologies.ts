// Test fixture: real Redis topologies on spare loopback ports — a Sentinel setup (primary, replica, three sentinels) and a three-primary Redis Cluster — started from redis-server, and killed and removed by stop().
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { killRedis, launchRedis } from './redis-server.js';
import { freePort } from './ports.js';
import { sleep } from './wait.js';

interface Node {
  port: number;
  child: ChildProcess;
  dir: string;
}

const dataArgs = (dir: string, ...more: string[]) => ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...more];

async function start(args: (dir: string) => string[], ready?: RegExp, port?: number): Promise<Node> {
  for (let attempt = 1; ; attempt++) {
    const p = port ?? (await freePort());
    try {
      const { child, dir } = await launchRedis(p, args, ready);
      return { port: p, child, dir };
    } catch (err) {
      if (attempt >= 3 || port !== undefined) throw err;
    }
  }
}

async function stopNode(n: Node): Promise<void> {
  await killRedis(n.child);
  rmSync(n.dir, { recursive: true, force: true });
}

async function until<T>(what: string, probe: () => Promise<T | null>, limitMs = 20_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v !== null) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${limitMs} ms`);
    await sleep(100);
  }
}

async function ask<T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

export interface SentinelSetup {
  readonly masterName: string;
  /** redis://127.0.0.1:<first sentinel> — the form `redis.url` takes with `redis.sentinel_master`. */
  readonly url: string;
  /** The other sentinels, `host:port`, as `redis.sentinels` lists them. */
  readonly otherSentinels: string[];
  /** The port of the primary the sentinels report now. */
  primaryPort(): Promise<number>;
  /** SIGKILLs the current primary and resolves once the sentinels promoted the replica (its new port). */
  killPrimary(): Promise<number>;
  stop(): Promise<void>;
}

/** A primary, one replica and three sentinels (quorum 2) failing over after 1 s without the primary. */
export async function startSentinelSetup(masterName = 'ghmaster'): Promise<SentinelSetup> {
  const nodes: Node[] = [];
  try {
    const primary = await start((dir) => dataArgs(dir));
    nodes.push(primary);
    const replica = await start((dir) => dataArgs(dir, '--replicaof', '127.0.0.1', String(primary.port)));
    nodes.push(replica);
    await until('replica in sync', () => ask(replica.port, async (r) => ((await r.info('replication')).includes('master_link_status:up') ? true : null)));
    const sentinels: Node[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await start(
        (dir) => {
          const conf = join(dir, 'sentinel.conf');
          writeFileSync(
            conf,
            [
              'bind 127.0.0.1',
              `dir ${dir}`,
              `sentinel monitor ${masterName} 127.0.0.1 ${primary.port} 2`,
              `sentinel down-after-milliseconds ${masterName} 1000`,
              `sentinel failover-timeout ${masterName} 5000`,
              `sentinel parallel-syncs ${masterName} 1`,
              '',
            ].join('\n'),
          );
          return [conf, '--sentinel'];
        },
        /\+monitor master/,
      );
      nodes.push(s);
      sentinels.push(s);
    }
    // Each sentinel must know the replica and the two other sentinels before a failover can be agreed.
    for (const s of sentinels) {
      await until('sentinel sees replica and peers', () =>
        ask(s.port, async (r) => {
          const m = (await r.call('SENTINEL', 'MASTER', masterName)) as string[];
          const field = (k: string) => Number(m[m.indexOf(k) + 1]);
          return field('num-slaves') >= 1 && field('num-other-sentinels') >= 2 ? true : null;
        }),
      );
    }
    const primaryPort = () => ask(sentinels[0]!.port, async (r) => Number(((await r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName)) as string[])[1]));
    return {
      masterName,
      url: `redis://127.0.0.1:${sentinels[0]!.port}`,
      otherSentinels: sentinels.slice(1).map((s) => `127.0.0.1:${s.port}`),
      primaryPort,
      async killPrimary() {
        const before = await primaryPort();
        const victim = nodes.find((n) => n.port === before)!;
        await killRedis(victim.child);
        return until('failover', async () => {
          const now = await primaryPort();
          if (now === before) return null;
          // The promoted replica accepts writes once it knows it is a primary.
          return ask(now, async (r) => ((await r.info('replication')).includes('role:master') ? now : null));
        }, 30_000);
      },
      async stop() {
        await Promise.all(nodes.map(stopNode));
      },
    };
  } catch (err) {
    await Promise.all(nodes.map(stopNode));
    throw err;
  }
}

export interface ClusterSetup {
  /** redis://127.0.0.1:<first node> — the form `redis.url` takes with `redis.cluster: true`. */
  readonly url: string;
  /** The other nodes, `host:port`, as `redis.cluster_nodes` lists them. */
  readonly otherNodes: string[];
  readonly ports: number[];
  /** Which node serves `key`'s hash slot (CLUSTER KEYSLOT, then the slot map). */
  nodeOf(key: string): Promise<number>;
  stop(): Promise<void>;
}

/** A port whose cluster bus port (port + 10000) is free too. */
async function clusterPort(): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p + 10_000 > 65_535) continue;
    const busFree = await new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(p + 10_000, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (busFree) return p;
  }
}

/** Three primaries (no replicas), slots assigned by `redis-cli --cluster create`. */
export async function startClusterSetup(): Promise<ClusterSetup> {
  const nodes: Node[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const port = await clusterPort();
      nodes.push(await start((dir) => dataArgs(dir, '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-node-timeout', '2000'), undefined, port));
    }
    const addrs = nodes.map((n) => `127.0.0.1:${n.port}`);
    await new Promise<void>((resolve, reject) =>
      execFile('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 }, (err, stdout, stderr) => (err ? reject(new Error(`cluster create: ${stdout}${stderr}`)) : resolve())),
    );
    for (const n of nodes) await until('cluster state ok', () => ask(n.port, async (r) => ((await r.call('CLUSTER', 'INFO')) as string).includes('cluster_state:ok') ? true : null));
    const ports = nodes.map((n) => n.port);
    return {
      url: `redis://127.0.0.1:${ports[0]}`,
      otherNodes: addrs.slice(1),
      ports,
      nodeOf: (key) =>
        ask(ports[0]!, async (r) => {
          const slot = Number(await r.call('CLUSTER', 'KEYSLOT', key));
          const slots = (await r.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
          return slots.find(([from, to]) => slot >= from && slot <= to)![2][1];
        }),
      async stop() {
        await Promise.all(nodes.map(stopNode));
      },
    };
  } catch (err) {
    await Promise.all(nodes.map(stopNode));
    throw err;
  }
}
