// Alert delivery against real receivers: a webhook POST whose signature verifies with the secret shown at creation, a private target refused unless allowed, failures retried a bounded number of times and recorded on the alert without holding evaluation up, and Slack with the rule's target as channel.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../support/world.js';
import { startRecordingUpstream, type RecordingUpstream } from '../gateway/proxy/support.js';
import { testEvaluator } from './support.js';

interface Hit {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

let world: World;
let up: RecordingUpstream;
let agent: { id: number; key: string };
let receiver: { port: number; hits: Hit[]; close(): Promise<void> };

async function startReceiver(route: (path: string, res: ServerResponse) => void) {
  const hits: Hit[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      hits.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      route(req.url ?? '', res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

/** What a receiver does: recompute v1 over "<timestamp>.<raw body>" and compare in constant time. */
function verifies(secret: string, hit: Hit): boolean {
  const expected = Buffer.from(`v1=${createHmac('sha256', secret).update(`${String(hit.headers['x-gatehouse-timestamp'])}.${hit.body}`).digest('hex')}`);
  const got = Buffer.from(String(hit.headers['x-gatehouse-signature']));
  return expected.length === got.length && timingSafeEqual(expected, got);
}

beforeAll(async () => {
  up = await startRecordingUpstream({});
  receiver = await startReceiver((path, res) => {
    if (path.startsWith('/fail')) res.writeHead(503).end();
    else if (path.startsWith('/slack/chat.postMessage')) res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    else res.writeHead(204).end();
  });
  world = await startWorld({ privateSources: ['dl-src'], env: { SERVICE_WORKER__ALERT_INTERVAL_SECONDS: '3600' } });
  await world.httpSource('dl-src', `${up.base}/api/`);
  agent = await world.agent('dl-agent', [{ source_id: 'dl-src', role_key: 'reader' }]);
});

afterAll(async () => {
  await world?.stop();
  await up?.close();
  await receiver?.close();
});

async function webhookRule(name: string, path: string): Promise<{ id: number; secret: string }> {
  const res = await world.admin('POST', '/api/alerts', {
    name, condition_type: 'request_count', threshold: 1, comparator: '>=', source_id: 'dl-src', notification_channel: 'webhook', notification_target: `http://127.0.0.1:${receiver.port}${path}`,
  });
  expect(res.status, res.text).toBe(201);
  return { id: res.json.id as number, secret: res.json.webhook_secret as string };
}

async function traffic() {
  expect((await world.proxy(agent.key, 'GET', '/proxy/dl-src/ok')).status).toBe(200);
  await world.svc.running.services.audit.flush();
}

describe('webhook delivery', () => {
  it('POSTs the alert as JSON, signed with the secret shown once at creation', async () => {
    const rule = await webhookRule('wh-signed', '/hook/signed');
    await traffic();
    const ev = testEvaluator(world, { allowPrivateEgress: true });
    try {
      await ev.evaluator.tick(Date.now() + 500);
      await ev.evaluator.idle();
    } finally {
      await ev.close();
    }
    const hits = receiver.hits.filter((h) => h.path === '/hook/signed');
    expect(hits).toHaveLength(1);
    const hit = hits[0]!;
    expect(hit.headers['content-type']).toBe('application/json');
    expect(hit.headers['x-gatehouse-event']).toBe('firing');
    expect(verifies(rule.secret, hit)).toBe(true);
    expect(verifies(rule.secret.slice(0, -1) + (rule.secret.endsWith('A') ? 'B' : 'A'), hit)).toBe(false);
    expect(verifies(rule.secret, { ...hit, body: hit.body.replace('"firing"', '"resolved"') })).toBe(false);
    const payload = JSON.parse(hit.body);
    expect(payload).toMatchObject({ rule: { id: rule.id, name: 'wh-signed', condition_type: 'request_count', source_id: 'dl-src' }, event: { kind: 'firing', value: expect.any(Number) } });
    expect(payload.audit_query).toMatch(/^\/api\/audit\?from=.*&source_id=dl-src$/);
    expect(hit.body).not.toContain(rule.secret);
    const history = (await world.admin('GET', `/api/alerts/${rule.id}/history`)).json;
    expect(history[0]).toMatchObject({ kind: 'firing', delivery_status: 'delivered', delivery_error: null });
  });

  it('refuses a private target unless notifications.allow_private_egress; the failure is recorded and the rule still fires', async () => {
    const rule = await webhookRule('wh-private', '/hook/private');
    await traffic();
    const ev = testEvaluator(world, { allowPrivateEgress: false });
    try {
      await ev.evaluator.tick(Date.now() + 500);
      await ev.evaluator.idle();
    } finally {
      await ev.close();
    }
    expect(receiver.hits.filter((h) => h.path === '/hook/private')).toEqual([]);
    const read = (await world.admin('GET', `/api/alerts/${rule.id}`)).json;
    expect(read.state).toBe('firing');
    expect(read.last_delivery_error).toMatch(/^egress_denied/);
    const history = (await world.admin('GET', `/api/alerts/${rule.id}/history`)).json;
    expect(history[0]).toMatchObject({ kind: 'firing', delivery_status: 'failed', delivery_error: expect.stringMatching(/^egress_denied/) });
  });

  it('retries a failing target a bounded number of times, records the failure, and never holds the tick up', async () => {
    const rule = await webhookRule('wh-failing', '/fail/hook');
    await traffic();
    const ev = testEvaluator(world, { allowPrivateEgress: true, maxAttempts: 3 });
    try {
      const report = await ev.evaluator.tick(Date.now() + 500);
      // The tick returned with the rule firing before any delivery outcome was recorded.
      expect(report.transitions).toBeGreaterThanOrEqual(1);
      await ev.evaluator.idle();
    } finally {
      await ev.close();
    }
    expect(receiver.hits.filter((h) => h.path === '/fail/hook')).toHaveLength(3);
    const read = (await world.admin('GET', `/api/alerts/${rule.id}`)).json;
    expect(read).toMatchObject({ state: 'firing', last_delivery_error: 'http_503' });
  });
});

describe('slack delivery', () => {
  it('posts through the bot transport with the rule\'s target as the channel', async () => {
    const res = await world.admin('POST', '/api/alerts', { name: 'sl-rule', condition_type: 'request_count', threshold: 1, comparator: '>=', source_id: 'dl-src', notification_channel: 'slack', notification_target: '#agent-alerts' });
    expect(res.status, res.text).toBe(201);
    await traffic();
    const ev = testEvaluator(world, { allowPrivateEgress: true, slack: { kind: 'bot', token: 'xoxb-test-token', channel: '#default' }, slackApiBaseUrl: `http://127.0.0.1:${receiver.port}/slack` });
    try {
      await ev.evaluator.tick(Date.now() + 500);
      await ev.evaluator.idle();
    } finally {
      await ev.close();
    }
    const posts = receiver.hits.filter((h) => h.path === '/slack/chat.postMessage' && h.body.includes('sl-rule'));
    expect(posts).toHaveLength(1);
    expect(posts[0]!.headers.authorization).toBe('Bearer xoxb-test-token');
    const body = JSON.parse(posts[0]!.body);
    expect(body.channel).toBe('#agent-alerts');
    expect(body.text).toMatch(/^\[FIRING\] sl-rule: request_count = \d+ \(>= 1\) over 300 s, source dl-src, every identity\. https:\/\/admin\.example\.test\/dashboard\/audit\?/);
  });
});
