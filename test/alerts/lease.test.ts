// Two worker processes evaluate every alert rule once per tick between them (one lease holder), and killing the holder moves evaluation to the other within the lease's bound.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { baseEnv, startCli, type StartedCli } from '../support/cli.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { dropRedisPrefix, TEST_REDIS_URL } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

interface TickLine {
  tick: number;
  evaluated: number;
  leader: boolean;
  time: string;
}

function ticks(w: StartedCli): TickLine[] {
  return w
    .output()
    .stdout.split('\n')
    .filter((l) => l.includes('"alert tick"'))
    .map((l) => JSON.parse(l) as TickLine);
}

const INTERVAL_S = 1;
/** The evaluator's lease: two intervals plus 2 s (src/alerts/evaluator.ts). */
const LEASE_MS = INTERVAL_S * 2_000 + 2_000;

it('one evaluator at a time across two worker processes; the survivor takes over after the holder is killed', { timeout: 120_000 }, async () => {
  const store: MigratedStore = await withMigratedStore();
  cleanups.push(() => store.cleanup());
  const prefix = `ghtest:${randomBytes(6).toString('hex')}:`;
  cleanups.push(() => dropRedisPrefix(prefix));
  const client = await store.database.connect();
  cleanups.push(() => client.end());
  await client.query(`insert into alert_rules (name, condition_type, threshold, comparator, notification_channel, window_seconds)
    select 'lease-' || i, 'request_count', 1000000, '>', 'log', 300 from generate_series(1, 5) i`);

  const start = async (n: number): Promise<StartedCli> => {
    const cwd = await mkdtemp(path.join(tmpdir(), `gh-alert-worker-${n}-`));
    cleanups.push(() => rm(cwd, { recursive: true, force: true }));
    const env = baseEnv({
      SERVICE_ENVIRONMENT: 'test',
      SERVICE_DATABASE__URL: store.database.url,
      SERVICE_REDIS__URL: TEST_REDIS_URL,
      SERVICE_REDIS__KEY_PREFIX: prefix,
      SERVICE_WORKER__ID: `alert-worker-${n}`,
      SERVICE_WORKER__ALERT_INTERVAL_SECONDS: String(INTERVAL_S),
      SERVICE_OBSERVABILITY__LOG_LEVEL: 'info',
      // Both processes read one secret reference, as replicas do in production.
      SERVICE_APPROVALS__ENCRYPTION_KEY_REF: 'env:ALERT_TEST_KEY',
      ALERT_TEST_KEY: 'alert-lease-test-encryption-key-0123456789',
    });
    const w = await startCli(['start', '--role', 'worker'], { env, cwd, timeoutMs: 60_000 });
    cleanups.push(() => w.stop('SIGKILL'));
    return w;
  };
  const [a, b] = await Promise.all([start(1), start(2)]);

  // Until one of them has led three ticks (two processes starting on a loaded machine take a while).
  await waitFor(() => Math.max(ticks(a).length, ticks(b).length) >= 3, 30_000, 'three ticks', 100);
  const ta = ticks(a);
  const tb = ticks(b);
  // Exactly one of them led, every tick evaluated all five rules, and no tick number was evaluated twice.
  expect(ta.length === 0 || tb.length === 0, JSON.stringify({ ta, tb })).toBe(true);
  const holder = ta.length > 0 ? a : b;
  const other = holder === a ? b : a;
  const led = ticks(holder);
  expect(led.length).toBeGreaterThanOrEqual(3);
  for (const t of led) expect(t.evaluated).toBe(5);
  expect(new Set(led.map((t) => t.tick)).size).toBe(led.length);
  const { rows } = await client.query<{ n: string }>(`select count(distinct last_tick)::text as n from alert_rules`);
  expect(rows[0]!.n).toBe('1');

  const killedAt = Date.now();
  await holder.stop('SIGKILL');
  const deadline = killedAt + LEASE_MS + INTERVAL_S * 1_000 + 5_000;
  let taken: TickLine | undefined;
  while (!taken && Date.now() < deadline) {
    taken = ticks(other).find((t) => Date.parse(t.time) >= killedAt && t.evaluated === 5);
    if (!taken) await new Promise((r) => setTimeout(r, 100));
  }
  expect(taken, other.output().stdout.slice(-2000)).toBeDefined();
  const takeoverMs = Date.parse(taken!.time) - killedAt;
  // The lease's expiry and the next tick, with room for a loaded machine's timer lag and the tick's own work.
  expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + INTERVAL_S * 1_000 + 3_000);
  // The survivor's ticks come after the holder's: none repeats one the holder evaluated.
  const holderTicks = new Set(led.map((t) => t.tick));
  for (const t of ticks(other)) expect(holderTicks.has(t.tick)).toBe(false);
});
