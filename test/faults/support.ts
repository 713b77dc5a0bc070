// Test fixture for fault tests: a service on a private PostgreSQL cluster (and optionally a private Redis) that the test kills and restarts, with a real HTTP upstream counting the requests it receives.
import http from 'node:http';
import type net from 'node:net';
import { startPgServer, type PgServerHandle } from '../support/pg-server.js';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';
import { startWorld, type World } from '../support/world.js';
import type { TestDatabase } from '../support/pg.js';

export interface CountingUpstream {
  url: string;
  /** Requests received, by method. */
  hits: { method: string; path: string }[];
  /** Holds every response until `release()` (the request has reached the upstream, the answer has not left). */
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

export async function startCountingUpstream(): Promise<CountingUpstream> {
  const hits: CountingUpstream['hits'] = [];
  let held: Array<() => void> | null = null;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      hits.push({ method: req.method ?? '', path: req.url ?? '' });
      const answer = () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, n: hits.length }));
      };
      if (held) held.push(answer);
      else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    hold: () => {
      held ??= [];
    },
    release: () => {
      const waiting = held ?? [];
      held = null;
      for (const w of waiting) w();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** The private cluster as the TestDatabase a test service uses (its `postgres` database). */
export function clusterDatabase(cluster: PgServerHandle): TestDatabase {
  return { name: 'postgres', url: cluster.url, connect: () => cluster.connect(), drop: async () => undefined };
}

export interface FaultWorld {
  world: World;
  cluster: PgServerHandle;
  redis: RedisServerHandle | null;
  upstream: CountingUpstream;
  stop(): Promise<void>;
}

/** A service on a private cluster (and a private Redis when asked), with the HTTP source `up` on the counting upstream. */
export async function startFaultWorld(opts: { privateRedis?: boolean; env?: Record<string, string> } = {}): Promise<FaultWorld> {
  const cluster = await startPgServer();
  const redis = opts.privateRedis ? await startRedisServer() : null;
  const upstream = await startCountingUpstream();
  let world: World | null = null;
  try {
    world = await startWorld({
      database: clusterDatabase(cluster),
      privateSources: ['up', 'up2', 'pgsrc'],
      env: { ...(redis ? { SERVICE_REDIS__URL: redis.url } : {}), ...opts.env },
      logLevel: process.env.GH_TEST_LOG_LEVEL ?? 'silent',
    });
    await world.httpSource('up', upstream.url);
    await world.httpSource('up2', upstream.url);
  } catch (err) {
    await world?.stop().catch(() => undefined);
    await cluster.remove();
    await redis?.stop();
    await upstream.close();
    throw err;
  }
  const w = world;
  return {
    world: w,
    cluster,
    redis,
    upstream,
    async stop() {
      // The service flushes its audit on shutdown: give it its database back first.
      if (!cluster.running) await cluster.start().catch(() => undefined);
      if (redis && !redis.running) await redis.restart().catch(() => undefined);
      await w.stop().catch(() => undefined);
      await cluster.remove();
      await redis?.stop();
      await upstream.close();
    },
  };
}
