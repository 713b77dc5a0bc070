// Redis coordination adapter (ioredis): fail-fast commands, background reconnect, a resubscribing pub/sub connection; one Redis, a Sentinel-managed primary, or a Redis Cluster.
import { createHash, randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import type { ClusterOptions, RedisOptions } from 'ioredis';
import {
  CoordinationError,
  LOCK_NAMESPACE,
  assertIncrement,
  assertKey,
  assertPrefix,
  assertTtl,
  assertValue,
  keyList,
} from './errors.js';
import type {
  Coordination,
  CoordinationLogger,
  CoordinationStatus,
  Lock,
  MessageHandler,
  TtlOptions,
  Unsubscribe,
} from './port.js';
import { withDeadline } from '../util/deadline.js';

export interface HostPort {
  host: string;
  port: number;
}

/**
 * How the URL's server is reached (docs/operations.md "Redis Sentinel and Cluster"). `sentinel`: the URL names one
 * sentinel, `sentinels` the others, and commands go to the primary they report for `masterName`, followed across a
 * failover. `cluster`: the URL names one cluster node, `nodes` more seeds; keys are routed by hash slot. In both, the
 * URL's user, password and TLS (rediss) apply to the data nodes.
 */
export type RedisTopology = { kind: 'standalone' } | { kind: 'sentinel'; sentinels: readonly HostPort[]; masterName: string } | { kind: 'cluster'; nodes: readonly HostPort[] };

/** Commands shared by one Redis and a Cluster (ioredis's Commander): what the adapter and the rate limiter use. */
export type RedisConnection = Redis | Cluster;

export interface RedisCoordinationOptions {
  /** redis:// or rediss:// URL; its password is never logged. */
  url: string;
  topology?: RedisTopology;
  keyPrefix?: string;
  /** Time allowed for one TCP/TLS connect attempt (default 2000 ms). */
  connectTimeoutMs?: number;
  /** Upper bound on any single command, including one waiting for the very first connect (default 1500 ms). */
  commandTimeoutMs?: number;
  /** Cap of the exponential reconnect backoff (default 2000 ms). */
  maxReconnectDelayMs?: number;
  logger?: CoordinationLogger;
}

interface Subscription {
  readonly handler: MessageHandler;
}

interface Script {
  readonly source: string;
  readonly sha: string;
}

function script(source: string): Script {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

// TTL only when the counter has none: set on creation, never stretched by later increments.
const INCR = script(`
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[2] ~= '' and redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return v`);

// Token compare and act in one step, so an expired holder cannot touch the next holder's lock.
const RELEASE = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`);

const EXTEND = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`);

const noopLogger: CoordinationLogger = { info() {}, warn() {}, error() {}, debug() {} };

/** The URL without credentials, for logs. */
export function describeRedisTarget(url: string): string {
  try {
    const parsed = new URL(url);
    const db = parsed.pathname.replace(/^\//, '') || '0';
    return `${parsed.protocol}//${parsed.hostname}:${parsed.port || '6379'}/${db}`;
  } catch {
    return 'redis (unparseable url)';
  }
}

export class RedisCoordination implements Coordination {
  readonly kind = 'redis' as const;
  readonly keyPrefix: string;
  readonly #client: RedisConnection;
  readonly #subscriber: RedisConnection;
  readonly #cluster: boolean;
  readonly #logger: CoordinationLogger;
  readonly #target: string;
  readonly #handlers = new Map<string, Set<Subscription>>();
  /** Channels the subscriber connection has confirmed since it last (re)connected. */
  readonly #confirmed = new Set<string>();
  readonly #pending = new Map<string, Promise<void>>();
  readonly #commandTimeoutMs: number;
  #closed = false;

  constructor(options: RedisCoordinationOptions) {
    const url = options.url;
    if (typeof url !== 'string' || !/^rediss?:\/\//.test(url)) {
      throw new TypeError('url must be a redis:// or rediss:// URL');
    }
    const keyPrefix = options.keyPrefix ?? 'gh:';
    assertPrefix(keyPrefix);
    this.keyPrefix = keyPrefix;
    this.#logger = options.logger ?? noopLogger;
    this.#target = describeRedisTarget(url);

    const maxDelay = options.maxReconnectDelayMs ?? 2000;
    this.#commandTimeoutMs = options.commandTimeoutMs ?? 1500;
    const base: RedisOptions = {
      connectTimeout: options.connectTimeoutMs ?? 2000,
      commandTimeout: this.#commandTimeoutMs,
      // Reject in-flight and queued commands at every disconnect instead of replaying them later:
      // a caller told "failed" must not see its write applied after the outage.
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      retryStrategy: (times) => Math.min(maxDelay, 50 * 2 ** Math.min(times, 8)) + Math.floor(Math.random() * 50),
    };
    const topology = options.topology ?? { kind: 'standalone' };
    this.#cluster = topology.kind === 'cluster';
    // The offline queue only bridges the first connect; once connected, a down Redis fails commands at once.
    this.#client = connectRedis(url, topology, { ...base, connectionName: 'gatehouse', enableOfflineQueue: true });
    this.#subscriber = connectRedis(url, topology, {
      ...base,
      connectionName: 'gatehouse-sub',
      enableOfflineQueue: false,
      autoResubscribe: false,
    });
    this.#watch(this.#client, 'command');
    this.#watch(this.#subscriber, 'subscriber');
    this.#client.once('ready', () => {
      this.#client.options.enableOfflineQueue = false;
    });
    this.#subscriber.on('ready', () => this.#resubscribe());
    this.#subscriber.on('close', () => this.#confirmed.clear());
    this.#subscriber.on('message', (channel: string, message: string) => this.#dispatch(channel, message));
  }

  async get(key: string): Promise<string | null> {
    const k = this.#key(key);
    return this.#run(() => this.#client.get(k));
  }

  async set(key: string, value: string, options: TtlOptions = {}): Promise<void> {
    const k = this.#key(key);
    assertValue(value);
    if (options.ttlMs === undefined) {
      await this.#run(() => this.#client.set(k, value));
    } else {
      const ttlMs = options.ttlMs;
      assertTtl(ttlMs);
      await this.#run(() => this.#client.set(k, value, 'PX', ttlMs));
    }
  }

  async setIfAbsent(key: string, value: string, options: Required<TtlOptions>): Promise<boolean> {
    const k = this.#key(key);
    assertValue(value);
    const ttlMs = options?.ttlMs;
    assertTtl(ttlMs);
    const reply = await this.#run(() => this.#client.set(k, value, 'PX', ttlMs, 'NX'));
    return reply === 'OK';
  }

  async getDel(key: string): Promise<string | null> {
    const k = this.#key(key);
    return this.#run(() => this.#client.getdel(k));
  }

  async del(keys: string | readonly string[]): Promise<number> {
    this.#open();
    const list = keyList(keys).map((key) => this.keyPrefix + key);
    if (list.length === 0) return 0;
    // A cluster refuses a multi-key command whose keys hash to different slots (CROSSSLOT): one DEL per key there.
    // Nothing relies on the keys of one del() disappearing together.
    if (this.#cluster && list.length > 1) return this.#run(async () => (await Promise.all(list.map((k) => this.#client.del(k)))).reduce((a, b) => a + b, 0));
    return this.#run(() => this.#client.del(...list));
  }

  async expire(key: string, ttlMs: number): Promise<boolean> {
    const k = this.#key(key);
    assertTtl(ttlMs);
    return (await this.#run(() => this.#client.pexpire(k, ttlMs))) === 1;
  }

  async incr(key: string, by = 1, options: TtlOptions = {}): Promise<number> {
    const k = this.#key(key);
    assertIncrement(by);
    if (options.ttlMs !== undefined) assertTtl(options.ttlMs);
    const reply = await this.#script(INCR, k, String(by), options.ttlMs === undefined ? '' : String(options.ttlMs));
    return Number(reply);
  }

  async publish(channel: string, message: string): Promise<void> {
    const c = this.#key(channel, 'channel');
    assertValue(message);
    await this.#run(() => this.#publisher().publish(c, message));
  }

  async subscribe(channel: string, handler: MessageHandler): Promise<Unsubscribe> {
    const c = this.#key(channel, 'channel');
    if (typeof handler !== 'function') throw new TypeError('handler must be a function');
    const subscription: Subscription = { handler };
    let set = this.#handlers.get(c);
    if (set === undefined) {
      set = new Set();
      this.#handlers.set(c, set);
    }
    set.add(subscription);
    try {
      await this.#subscriberSettled();
      await this.#ensureSubscribed(c);
    } catch (error) {
      // Kept registered: the subscriber's next 'ready' subscribes it; status() reports the gap meanwhile.
      this.#logger.warn({ channel, err: errorSummary(error) }, 'coordination subscribe deferred until reconnect');
    }
    let active = true;
    return async () => {
      if (!active) return;
      active = false;
      await this.#unsubscribe(c, subscription);
    };
  }

  async acquireLock(name: string, ttlMs: number): Promise<Lock | null> {
    this.#open();
    assertKey(name, 'lock name');
    assertTtl(ttlMs);
    const k = this.keyPrefix + LOCK_NAMESPACE + name;
    const token = randomBytes(16).toString('hex');
    const reply = await this.#run(() => this.#client.set(k, token, 'PX', ttlMs, 'NX'));
    if (reply !== 'OK') return null;
    return {
      name,
      token,
      release: async () => Number(await this.#script(RELEASE, k, token)) === 1,
      extend: async (nextTtlMs: number) => {
        assertTtl(nextTtlMs);
        return Number(await this.#script(EXTEND, k, token, String(nextTtlMs))) === 1;
      },
    };
  }

  async ping(): Promise<void> {
    this.#open();
    await this.#run(() => this.#client.ping());
  }

  status(): CoordinationStatus {
    if (this.#closed) return { connected: false, subscriptionsHealthy: false };
    const subscriberUp = this.#subscriber.status === 'ready';
    let allConfirmed = true;
    for (const channel of this.#handlers.keys()) if (!this.#confirmed.has(channel)) allConfirmed = false;
    return { connected: this.#client.status === 'ready', subscriptionsHealthy: subscriberUp && allConfirmed };
  }

  redisClient(): RedisConnection {
    return this.#client;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#handlers.clear();
    this.#confirmed.clear();
    await Promise.all([quit(this.#client), quit(this.#subscriber)]);
  }

  /**
   * The connection PUBLISH goes through. A cluster sends a command without a key to any node, and messages entering
   * through different nodes reach a subscriber in no particular order; through one node they keep their order (one
   * cluster-bus link to each other node), so a cluster publishes through the primary with the lowest address.
   */
  #publisher(): RedisConnection {
    if (!(this.#client instanceof Cluster)) return this.#client;
    let chosen: Redis | null = null;
    for (const node of this.#client.nodes('master')) if (chosen === null || nodeAddress(node) < nodeAddress(chosen)) chosen = node;
    return chosen ?? this.#client;
  }

  #watch(connection: RedisConnection, role: 'command' | 'subscriber'): void {
    // One warning per outage, not one per retry; the driver's error goes to logs without the URL.
    let down = false;
    connection.on('ready', () => {
      if (down) this.#logger.info({ target: this.#target, role }, 'coordination store reconnected');
      else this.#logger.debug({ target: this.#target, role }, 'coordination store connected');
      down = false;
    });
    connection.on('error', (error: unknown) => {
      if (this.#closed) return;
      if (!down) this.#logger.warn({ target: this.#target, role, err: errorSummary(error) }, 'coordination store unreachable');
      down = true;
    });
    connection.on('close', () => {
      if (this.#closed || down) return;
      down = true;
      this.#logger.warn({ target: this.#target, role }, 'coordination store connection closed');
    });
  }

  /**
   * While the subscriber's connect attempt is still in progress (right after construction), waits for its
   * outcome, so a message published just after `subscribe` resolves is not lost. A known outage does not wait.
   */
  #subscriberSettled(): Promise<void> {
    const connecting = ['wait', 'connecting', 'connect'];
    if (!connecting.includes(this.#subscriber.status)) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#subscriber.off('ready', done);
        this.#subscriber.off('close', done);
        resolve();
      };
      const timer = setTimeout(done, this.#commandTimeoutMs);
      this.#subscriber.on('ready', done);
      this.#subscriber.on('close', done);
    });
  }

  #ensureSubscribed(channel: string): Promise<void> {
    if (this.#confirmed.has(channel)) return Promise.resolve();
    const inFlight = this.#pending.get(channel);
    if (inFlight !== undefined) return inFlight;
    if (this.#subscriber.status !== 'ready') {
      return Promise.reject(new CoordinationError('COORD_UNAVAILABLE', 'coordination store unavailable'));
    }
    const attempt = this.#run(() => this.#subscriber.subscribe(channel)).then(() => {
      if (this.#handlers.has(channel)) this.#confirmed.add(channel);
    });
    const tracked = attempt.finally(() => {
      if (this.#pending.get(channel) === tracked) this.#pending.delete(channel);
    });
    this.#pending.set(channel, tracked);
    return tracked;
  }

  async #unsubscribe(channel: string, subscription: Subscription): Promise<void> {
    const set = this.#handlers.get(channel);
    if (set === undefined || !set.delete(subscription) || set.size > 0) return;
    this.#handlers.delete(channel);
    this.#confirmed.delete(channel);
    // A later subscribe must send a fresh SUBSCRIBE after this UNSUBSCRIBE, not reuse an older promise.
    this.#pending.delete(channel);
    if (this.#closed || this.#subscriber.status !== 'ready') return;
    try {
      await this.#subscriber.unsubscribe(channel);
    } catch (error) {
      // A dropped connection has unsubscribed everything anyway, and the channel is no longer resubscribed.
      this.#logger.debug({ err: errorSummary(error) }, 'coordination unsubscribe not confirmed');
    }
  }

  #resubscribe(): void {
    const channels = [...this.#handlers.keys()];
    if (channels.length === 0 || this.#closed) return;
    this.#subscriber.subscribe(...channels).then(
      () => {
        for (const channel of channels) if (this.#handlers.has(channel)) this.#confirmed.add(channel);
        this.#logger.info({ channels: channels.length }, 'coordination subscriptions restored');
      },
      (error: unknown) => this.#logger.warn({ err: errorSummary(error) }, 'coordination resubscribe failed'),
    );
  }

  #dispatch(channel: string, message: string): void {
    const set = this.#handlers.get(channel);
    if (set === undefined) return;
    for (const subscription of [...set]) {
      try {
        subscription.handler(message);
      } catch (error) {
        this.#logger.error({ channel: channel.slice(this.keyPrefix.length), err: errorSummary(error) }, 'coordination message handler threw');
      }
    }
  }

  async #script(s: Script, key: string, ...args: string[]): Promise<unknown> {
    return this.#run(async () => {
      try {
        return await this.#client.evalsha(s.sha, 1, key, ...args);
      } catch (error) {
        if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
        return this.#client.eval(s.source, 1, key, ...args);
      }
    });
  }

  async #run<T>(command: () => Promise<T>): Promise<T> {
    this.#open();
    try {
      return await command();
    } catch (error) {
      throw translate(error, this.#closed);
    }
  }

  #open(): void {
    if (this.#closed) throw new CoordinationError('COORD_CLOSED', 'coordination adapter is closed');
  }

  #key(key: string, what = 'key'): string {
    this.#open();
    assertKey(key, what);
    return this.keyPrefix + key;
  }
}

/** Foreign errors stop here: a Redis reply error is the caller's problem, anything else is an outage. */
function translate(error: unknown, closed: boolean): CoordinationError {
  if (error instanceof CoordinationError) return error;
  if (closed) return new CoordinationError('COORD_CLOSED', 'coordination adapter is closed', { cause: error });
  if (error instanceof Error && error.name === 'ReplyError') {
    return new CoordinationError('COORD_COMMAND_FAILED', 'coordination command rejected by the store', { cause: error });
  }
  return new CoordinationError('COORD_UNAVAILABLE', 'coordination store unavailable', { cause: error });
}

function errorSummary(error: unknown): { name: string; code?: string; message: string } {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const code = (error as { code?: unknown }).code;
  return { name: error.name, message: error.message, ...(typeof code === 'string' ? { code } : {}) };
}

/**
 * One connection of the topology. A Sentinel connection asks the sentinels for the primary on every (re)connect, and
 * reconnects when a demoted primary answers READONLY (a failover it did not see as a disconnect). A Cluster connection
 * keeps one connection per node; a failed command is not retried elsewhere (maxRetriesPerRequest 0 in every mode).
 */
function connectRedis(url: string, topology: RedisTopology, options: RedisOptions): RedisConnection {
  if (topology.kind === 'standalone') return new Redis(url, options);
  const seed = new URL(url);
  const first: HostPort = { host: seed.hostname, port: Number(seed.port || (topology.kind === 'sentinel' ? 26379 : 6379)) };
  if (topology.kind === 'sentinel') {
    return new Redis(url, {
      ...options,
      sentinels: [first, ...topology.sentinels],
      name: topology.masterName,
      role: 'master',
      sentinelRetryStrategy: options.retryStrategy!,
      // Subscribes to the sentinels' +switch-master so a failover is followed at once, not at the next error.
      failoverDetector: true,
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
    });
  }
  const { enableOfflineQueue, retryStrategy, connectionName, ...nodeOptions } = options;
  const clusterOptions: ClusterOptions = {
    redisOptions: { ...nodeOptions, ...(connectionName !== undefined ? { connectionName } : {}) },
    enableOfflineQueue: enableOfflineQueue ?? false,
    clusterRetryStrategy: retryStrategy!,
    // Replies come from primaries only: a replica may not have a write the caller just made.
    scaleReads: 'master',
  };
  return new Cluster([first, ...topology.nodes], clusterOptions);
}

const nodeAddress = (node: Redis): string => `${node.options.host ?? ''}:${String(node.options.port ?? 0).padStart(5, '0')}`;

async function quit(connection: RedisConnection): Promise<void> {
  if (connection.status === 'ready') {
    // QUIT lets the server finish what it was sent; a server that does not answer within a second is just dropped.
    await withDeadline(connection.quit().then(() => undefined, () => undefined), 1000, () => undefined);
  }
  connection.disconnect();
}
