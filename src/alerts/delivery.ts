// Delivery of alert notifications (docs/alerts.md "Delivery"): a structured log line, Slack through the configured notifier transport with the rule's target as channel, or a signed webhook POST through the SSRF-checked egress; bounded attempts, never throws.
import { createEgressDispatcher, type EgressDispatcher, type EgressLookup } from '../egress/agent.js';
import { isGatehouseError } from '../errors/registry.js';
import { postNotification, type PostAttempt } from '../notify/post.js';
import { SLACK_API_BASE_URL, type SlackTransport } from '../notify/slack.js';
import type { Logger } from '../observability/logger.js';
import type { AlertEventKind, AlertRule } from './schema.js';
import { signWebhook, type WebhookSecretBox } from './secret.js';

export interface AlertNotice {
  rule: AlertRule;
  event: { id: string; kind: AlertEventKind; ts: string; value: number; details: Record<string, unknown> };
  window: { from: string; to: string };
}

export type DeliveryOutcome = { ok: true } | { ok: false; error: string };

export interface DeliveryOptions {
  log: Logger;
  /** The Slack transport of `notifications` (null when notifications are off or not configured). */
  slack: SlackTransport | null;
  /** notifications.allow_private_egress: may a webhook or Slack target be a loopback/private address? */
  allowPrivateEgress: boolean;
  timeoutMs: number;
  maxAttempts: number;
  box: WebhookSecretBox;
  adminBaseUrl: string | null;
  /** Internal, for tests. */
  backoffBaseMs?: number;
  slackApiBaseUrl?: string;
  lookup?: EgressLookup;
}

const MAX_RESPONSE_BYTES = 64 * 1024;
const EGRESS_SOURCE = 'alerts';


/** The audit search (or, with base `/dashboard/audit`, the console's explorer) of the rule's scope and window: where an operator looks next. */
export function auditQuery(rule: Pick<AlertRule, 'identity_id' | 'source_id'>, window: { from: string; to: string }, base = '/api/audit'): string {
  const q = new URLSearchParams({ from: window.from, to: window.to });
  if (rule.identity_id !== null) q.set('identity_id', String(rule.identity_id));
  if (rule.source_id !== null) q.set('source_id', rule.source_id);
  return `${base}?${q.toString()}`;
}

export function alertText(n: AlertNotice, adminBaseUrl: string | null): string {
  const r = n.rule;
  const state = n.event.kind === 'resolved' ? 'RESOLVED' : 'FIRING';
  const scope = [r.source_id !== null ? `source ${r.source_id}` : 'every source', r.identity_id !== null ? `identity ${r.identity_id}` : 'every identity'].join(', ');
  const link = adminBaseUrl ? ` ${adminBaseUrl.replace(/\/+$/, '')}${auditQuery(r, n.window, '/dashboard/audit')}` : '';
  return `[${state}] ${r.name}: ${r.condition_type} = ${n.event.value} (${r.comparator} ${r.threshold}) over ${r.window_seconds} s, ${scope}.${link}`;
}

export function webhookPayload(n: AlertNotice): Record<string, unknown> {
  const r = n.rule;
  return {
    rule: { id: r.id, name: r.name, condition_type: r.condition_type, comparator: r.comparator, threshold: r.threshold, window_seconds: r.window_seconds, identity_id: r.identity_id === null ? null : String(r.identity_id), source_id: r.source_id },
    event: { id: n.event.id, kind: n.event.kind, ts: n.event.ts, value: n.event.value, details: n.event.details },
    window: n.window,
    audit_query: auditQuery(r, n.window),
  };
}

export class AlertDelivery {
  readonly #opts: DeliveryOptions;
  readonly #egress: EgressDispatcher;
  readonly #stop = new AbortController();

  constructor(opts: DeliveryOptions) {
    this.#opts = opts;
    const log = opts.log;
    this.#egress = createEgressDispatcher({
      allowPrivate: () => opts.allowPrivateEgress,
      connectTimeoutMs: Math.max(1, Math.ceil(opts.timeoutMs)),
      ...(opts.lookup ? { lookup: opts.lookup } : {}),
      // The range only: a webhook URL's host may be part of a secret.
      onDecision: (d) => {
        if (!d.allowed) log.warn({ range: d.range }, 'alert target refused by the egress policy (notifications.allow_private_egress)');
      },
    });
  }

  async send(n: AlertNotice): Promise<DeliveryOutcome> {
    try {
      switch (n.rule.notification_channel) {
        case 'log':
          this.#opts.log.warn({ alert: { rule_id: n.rule.id, name: n.rule.name, kind: n.event.kind, condition_type: n.rule.condition_type, value: n.event.value, comparator: n.rule.comparator, threshold: n.rule.threshold, window: n.window, details: n.event.details, audit_query: auditQuery(n.rule, n.window) } }, `alert ${n.event.kind}`);
          return { ok: true };
        case 'slack':
          return await this.#slack(n);
        case 'webhook':
          return await this.#webhook(n);
      }
    } catch (err) {
      return { ok: false, error: isGatehouseError(err) ? err.code : 'delivery failed' };
    }
  }

  async #slack(n: AlertNotice): Promise<DeliveryOutcome> {
    const t = this.#opts.slack;
    if (t === null) return { ok: false, error: 'slack is not configured (notifications.enabled with a bot token or webhook reference)' };
    const text = alertText(n, this.#opts.adminBaseUrl);
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
    let url: URL;
    let body: string;
    if (t.kind === 'bot') {
      url = new URL(`${(this.#opts.slackApiBaseUrl ?? SLACK_API_BASE_URL).replace(/\/+$/, '')}/chat.postMessage`);
      headers.authorization = `Bearer ${t.token}`;
      body = JSON.stringify({ channel: n.rule.notification_target || t.channel, text, unfurl_links: false, unfurl_media: false });
    } else {
      // An incoming webhook posts to the channel it was made for; the target cannot change it.
      url = new URL(t.url);
      body = JSON.stringify({ text });
    }
    return this.#withRetries(() => this.#post(url, headers, body, t.kind === 'bot'));
  }

  async #webhook(n: AlertNotice): Promise<DeliveryOutcome> {
    const sealed = n.rule.webhook_secret;
    if (sealed === null) return { ok: false, error: 'webhook rule has no signing secret' };
    let secret: string;
    try {
      secret = this.#opts.box.open(sealed);
    } catch {
      return { ok: false, error: 'webhook signing secret cannot be decrypted (approvals.encryption_key_ref changed?)' };
    }
    const body = JSON.stringify(webhookPayload(n));
    const timestamp = String(Math.floor(Date.now() / 1000));
    const headers = {
      'content-type': 'application/json',
      'x-gatehouse-event': n.event.kind,
      'x-gatehouse-delivery': n.event.id,
      'x-gatehouse-timestamp': timestamp,
      'x-gatehouse-signature': signWebhook(secret, timestamp, body),
    };
    return this.#withRetries(() => this.#post(new URL(n.rule.notification_target), headers, body, false));
  }

  async #withRetries(attempt: () => Promise<PostAttempt>): Promise<DeliveryOutcome> {
    const base = this.#opts.backoffBaseMs ?? 500;
    let last = 'not attempted';
    for (let i = 1; i <= this.#opts.maxAttempts; i++) {
      const r = await attempt();
      if (r.ok) return { ok: true };
      last = r.reason;
      if (!r.retry || i === this.#opts.maxAttempts || this.#stop.signal.aborted) break;
      await new Promise((resolve) => setTimeout(resolve, Math.min(30_000, base * 2 ** (i - 1))));
    }
    return { ok: false, error: last };
  }

  #post(url: URL, headers: Record<string, string>, body: string, slackApi: boolean): Promise<PostAttempt> {
    return postNotification({
      dispatcher: this.#egress,
      url,
      headers,
      body,
      sourceId: EGRESS_SOURCE,
      timeoutMs: this.#opts.timeoutMs,
      maxResponseBytes: MAX_RESPONSE_BYTES,
      signal: this.#stop.signal,
      slackApi,
      deniedReason: 'egress_denied: the target is not a public address (notifications.allow_private_egress)',
    });
  }

  async close(): Promise<void> {
    this.#stop.abort();
    await this.#egress.close();
  }
}
