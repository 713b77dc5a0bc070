// The Slack notifier against a fake Slack on loopback: bot transport (chat.postMessage with the bearer token and channel), webhook, event filter, bounded retries with backoff, timeouts, egress refusal, and logs that never hold the token or URL.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { createPiiScanner } from '../../src/governance/pii/index.js';
import { SlackNotifier, buildNotifier, disabledNotifier, approvalMessage, type ApprovalNotice, type SlackNotifierOptions } from '../../src/notify/index.js';
import { loadConfig } from '../../src/config/index.js';
import { startFakeSlack, type FakeSlack } from './fake-slack.js';

const TOKEN = 'xoxb-test-token-9d8c7b6a';
const pii = createPiiScanner({});
let slack: FakeSlack;
let logLines: string[];

function logger() {
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  return createLogger({ level: 'debug', service: 'test', role: 'test', destination });
}

const notice = (over: Partial<ApprovalNotice> = {}): ApprovalNotice => ({
  event: 'pending',
  approval_id: 42,
  source_id: 'crm',
  identity_id: 7,
  identity_name: 'billing-agent',
  risk_level: 'high',
  summary: 'POST /customers/jane.doe@example.com/cards',
  ...over,
});

function notifier(over: Partial<SlackNotifierOptions> = {}): SlackNotifier {
  return new SlackNotifier({
    transport: { kind: 'bot', token: TOKEN, channel: '#approvals' },
    events: ['pending', 'approved', 'rejected', 'expired', 'failed'],
    adminBaseUrl: 'https://admin.example.test/',
    timeoutMs: 300,
    maxAttempts: 3,
    allowPrivateEgress: true,
    pii,
    log: logger(),
    apiBaseUrl: `${slack.url}/api`,
    backoffBaseMs: 50,
    ...over,
  });
}

beforeAll(async () => {
  slack = await startFakeSlack();
});
afterAll(async () => {
  await slack?.close();
});
beforeEach(() => {
  slack.mode = 'ok';
  slack.requests.length = 0;
  logLines = [];
});

describe('SlackNotifier', () => {
  it('bot transport: chat.postMessage with the bearer token, channel, link and a redacted summary', async () => {
    const n = notifier();
    n.notify(notice());
    await n.idle();
    expect(slack.requests).toHaveLength(1);
    const r = slack.requests[0]!;
    expect(r.path).toBe('/api/chat.postMessage');
    expect(r.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    const body = JSON.parse(r.body);
    expect(body.channel).toBe('#approvals');
    expect(body.text).toContain('Approval #42 is waiting for a decision.');
    expect(body.text).toContain('<https://admin.example.test/dashboard/approvals/42|Open approval #42>');
    expect(body.text).toContain('billing-agent (#7)');
    expect(body.text).toContain('Risk: high');
    expect(body.text).not.toContain('jane.doe@example.com');
    expect(body.text).toContain('[REDACTED:email]');
    await n.close();
  });

  it('webhook transport: posts {text} to the configured URL', async () => {
    const n = notifier({ transport: { kind: 'webhook', url: `${slack.url}/services/T1/B1/secret-part` } });
    n.notify(notice({ event: 'approved' }));
    await n.idle();
    expect(slack.requests).toHaveLength(1);
    expect(slack.requests[0]!.path).toBe('/services/T1/B1/secret-part');
    expect(slack.requests[0]!.headers.authorization).toBeUndefined();
    expect(Object.keys(JSON.parse(slack.requests[0]!.body))).toEqual(['text']);
    await n.close();
  });

  it('sends only the configured events', async () => {
    const n = notifier({ events: ['failed'] });
    n.notify(notice({ event: 'pending' }));
    n.notify(notice({ event: 'failed', error_code: 'forbidden' }));
    await n.idle();
    expect(slack.requests).toHaveLength(1);
    expect(JSON.parse(slack.requests[0]!.body).text).toContain('failed to execute');
    expect(JSON.parse(slack.requests[0]!.body).text).toContain('Error: forbidden');
    await n.close();
  });

  it('500: retried up to max_attempts with growing delays, then dropped; logs name neither token nor URL', async () => {
    slack.mode = 'fail500';
    const n = notifier({ transport: { kind: 'webhook', url: `${slack.url}/services/T1/B1/secret-part` }, backoffBaseMs: 60 });
    const started = Date.now();
    n.notify(notice());
    await n.idle();
    expect(slack.requests).toHaveLength(3);
    // 60 ms then 120 ms between the three attempts.
    expect(Date.now() - started).toBeGreaterThanOrEqual(170);
    const logs = logLines.join('');
    expect(logs).toContain('not delivered; dropped');
    expect(logs).toContain('http_500');
    expect(logs).not.toContain('secret-part');
    expect(logs).not.toContain(String(slack.port));
    await n.close();
  });

  it('a hanging Slack: each attempt ends at the timeout, and notify() itself never waits', async () => {
    slack.mode = 'hang';
    const n = notifier({ maxAttempts: 2, timeoutMs: 200 });
    const t0 = Date.now();
    n.notify(notice());
    expect(Date.now() - t0).toBeLessThan(50);
    await n.idle();
    const elapsed = Date.now() - t0;
    expect(slack.requests).toHaveLength(2);
    expect(elapsed).toBeGreaterThanOrEqual(400);
    expect(elapsed).toBeLessThan(3_000);
    expect(logLines.join('')).not.toContain(TOKEN);
    await n.close();
  });

  it('a Web API refusal ({ok:false}) is not retried, except rate limiting', async () => {
    slack.mode = 'api_error';
    const n = notifier();
    n.notify(notice());
    await n.idle();
    expect(slack.requests).toHaveLength(1);
    expect(logLines.join('')).toContain('slack_channel_not_found');
    await n.close();
  });

  it('a non-public target is refused unless allow_private_egress: nothing is sent', async () => {
    const n = notifier({ allowPrivateEgress: false });
    n.notify(notice());
    await n.idle();
    expect(slack.requests).toHaveLength(0);
    expect(logLines.join('')).toContain('egress_denied');
    await n.close();
  });

  it('after close, nothing more is sent', async () => {
    const n = notifier();
    await n.close();
    n.notify(notice());
    await n.idle();
    expect(slack.requests).toHaveLength(0);
  });
});

describe('approvalMessage', () => {
  it('escapes Slack control characters and scrubs card numbers in every free-text field', () => {
    const text = approvalMessage(notice({ identity_name: '<!channel> 4111 1111 1111 1111', summary: 'POST /pay?card=4111111111111111 & more' }), { pii, adminBaseUrl: null });
    expect(text).not.toContain('<!channel>');
    expect(text).toContain('&lt;!channel&gt;');
    expect(text).not.toMatch(/4111\s?1111\s?1111\s?1111/);
    expect(text).toContain('&amp; more');
    expect(text).not.toContain('dashboard/approvals');
  });

  it('carries the measured effect of a SQL write on a line of its own', () => {
    const text = approvalMessage(notice({ effect: 'about 5000 rows estimated; exactly 4998 rows in a rolled-back run' }), { pii, adminBaseUrl: null });
    expect(text.split('\n')).toContain('Effect: about 5000 rows estimated; exactly 4998 rows in a rolled-back run');
    expect(approvalMessage(notice(), { pii, adminBaseUrl: null })).not.toContain('Effect:');
  });
});

describe('buildNotifier from configuration', () => {
  const services = (env: Record<string, string>) => {
    const loaded = loadConfig({ env: { SERVICE_ENVIRONMENT: 'test', ...env }, cwd: '/nonexistent' });
    if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
    const closers: Array<() => Promise<void>> = [];
    return { svc: { config: loaded.config, log: logger(), resolveSecretRef: loaded.resolveSecretRef, onClose: (fn: () => Promise<void>) => closers.push(fn) }, closers };
  };

  it('off by default: no notifier exists', () => {
    expect(buildNotifier(services({}).svc)).toBe(disabledNotifier);
  });

  it('prefers the bot token over the webhook', async () => {
    const { svc, closers } = services({
      SERVICE_NOTIFICATIONS__ENABLED: 'true',
      SERVICE_NOTIFICATIONS__SLACK_BOT_TOKEN_REF: 'env:BOT_TOKEN',
      SERVICE_NOTIFICATIONS__SLACK_CHANNEL: '#ops',
      SERVICE_NOTIFICATIONS__SLACK_WEBHOOK_URL_REF: 'env:HOOK',
      SERVICE_NOTIFICATIONS__ALLOW_PRIVATE_EGRESS: 'true',
      BOT_TOKEN: TOKEN,
      HOOK: `${slack.url}/hook`,
    });
    const n = buildNotifier(svc, { apiBaseUrl: `${slack.url}/api` });
    expect((n as SlackNotifier).transportKind).toBe('bot');
    n.notify(notice());
    await n.idle();
    expect(slack.requests.map((r) => r.path)).toEqual(['/api/chat.postMessage']);
    expect(JSON.parse(slack.requests[0]!.body).channel).toBe('#ops');
    for (const c of closers) await c();
  });

  it('startup refuses literal, unresolvable and empty references', () => {
    for (const [value, extra] of [['xoxb-literal', {}], ['env:MISSING_TOKEN', {}], ['env:EMPTY_TOKEN', { EMPTY_TOKEN: '' }]] as const) {
      const loaded = loadConfig({ env: { SERVICE_ENVIRONMENT: 'test', SERVICE_NOTIFICATIONS__SLACK_BOT_TOKEN_REF: value, SERVICE_NOTIFICATIONS__SLACK_CHANNEL: '#x', ...extra }, cwd: '/nonexistent' });
      expect(loaded.ok).toBe(false);
    }
  });
});
