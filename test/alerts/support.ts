// Test fixture for the alert evaluator: an evaluator on a running world's control store with its own coordination prefix (its own lease), a captured log and fast retries.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { createCoordination } from '../../src/coord/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { AlertDelivery } from '../../src/alerts/delivery.js';
import { AlertEvaluator } from '../../src/alerts/evaluator.js';
import { alertsDb } from '../../src/alerts/routes.js';
import { WebhookSecretBox } from '../../src/alerts/secret.js';
import type { SlackTransport } from '../../src/notify/slack.js';
import { dropRedisPrefix, TEST_REDIS_URL } from '../support/redis.js';
import type { World } from '../support/world.js';

export interface TestEvaluator {
  evaluator: AlertEvaluator;
  /** Every log line the evaluator and its delivery wrote, parsed. */
  lines: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export function testEvaluator(
  world: World,
  opts: { allowPrivateEgress?: boolean; intervalMs?: number; repeatMs?: number; maxAttempts?: number; slack?: SlackTransport; slackApiBaseUrl?: string } = {},
): TestEvaluator {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const log = createLogger({ level: 'info', service: 'alerts-test', role: 'worker', destination: sink });
  const prefix = `ghtest:${randomBytes(6).toString('hex')}:`;
  const coord = createCoordination({ redisUrl: TEST_REDIS_URL, keyPrefix: prefix });
  const services = world.svc.running.services;
  const delivery = new AlertDelivery({
    log,
    slack: opts.slack ?? null,
    ...(opts.slackApiBaseUrl ? { slackApiBaseUrl: opts.slackApiBaseUrl } : {}),
    allowPrivateEgress: opts.allowPrivateEgress ?? true,
    timeoutMs: 2_000,
    maxAttempts: opts.maxAttempts ?? 3,
    box: new WebhookSecretBox(services.secrets.get('approvals.encryption_key_ref')),
    adminBaseUrl: 'https://admin.example.test',
    backoffBaseMs: 10,
  });
  const evaluator = new AlertEvaluator({ db: alertsDb(services), coord, log, intervalMs: opts.intervalMs ?? 1_000, repeatMs: opts.repeatMs ?? 3_600_000, delivery, holder: 'test' });
  return {
    evaluator,
    lines,
    async close() {
      await evaluator.stop();
      await delivery.close();
      await coord.close();
      await dropRedisPrefix(prefix);
    },
  };
}

/**
 * Ticks are numbered by time. `now()` is the real time, or one interval after the previous `now()` when that is
 * later, so consecutive calls are distinct ticks; `later(ms)` is a tick that far in the future (time passing).
 */
export function clock(): { now(): number; later(ms: number): number } {
  let last = 0;
  return {
    now: () => (last = Math.max(Date.now(), last + 1_000)),
    later: (ms: number) => Math.max(Date.now(), last) + ms,
  };
}
