// Slack delivery of approval notifications (spec §6): bot token (chat.postMessage, preferred) or incoming webhook, bounded attempts with backoff, SSRF-checked egress, fire-and-forget.
import { createEgressDispatcher, type EgressDispatcher, type EgressLookup } from '../egress/agent.js';
import type { PiiScanner } from '../governance/pii/index.js';
import type { Logger } from '../observability/logger.js';
import { postNotification, type PostAttempt } from './post.js';
import { approvalMessage, type ApprovalEvent, type ApprovalNotice } from './message.js';

/** The Slack Web API. Not a configuration key: only the notifier's constructor (tests) may point it elsewhere. */
export const SLACK_API_BASE_URL = 'https://slack.com/api';

export type SlackTransport = { kind: 'bot'; token: string; channel: string } | { kind: 'webhook'; url: string };

export interface ApprovalNotifier {
  /** Queues one notification; never throws and never waits for delivery. */
  notify(notice: ApprovalNotice): void;
  /** Resolves when every delivery started so far has finished (delivered or dropped). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/** What `notifications.enabled: false` gives: nothing exists that could send (spec §6.2). */
export const disabledNotifier: ApprovalNotifier = { notify: () => undefined, idle: async () => undefined, close: async () => undefined };

export interface SlackNotifierOptions {
  transport: SlackTransport;
  events: readonly ApprovalEvent[];
  adminBaseUrl: string | null;
  timeoutMs: number;
  maxAttempts: number;
  /** notifications.allow_private_egress: may the target be a loopback/private address? */
  allowPrivateEgress: boolean;
  pii: PiiScanner;
  log: Logger;
  /** Internal, for tests: the Web API base URL (default SLACK_API_BASE_URL). */
  apiBaseUrl?: string;
  /** Internal, for tests: first retry delay; doubles per attempt (default 500 ms). */
  backoffBaseMs?: number;
  /** Internal, for tests: DNS answers. */
  lookup?: EgressLookup;
}

/** Slack answers are tiny; anything bigger is not Slack. */
const MAX_SLACK_RESPONSE_BYTES = 64 * 1024;
const MAX_BACKOFF_MS = 30_000;
/** The pseudo-source under which notification connections are pooled and egress decisions logged. */
const EGRESS_SOURCE = 'notifications';


export class SlackNotifier implements ApprovalNotifier {
  readonly #opts: SlackNotifierOptions;
  readonly #events: ReadonlySet<ApprovalEvent>;
  readonly #egress: EgressDispatcher;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #stop = new AbortController();
  readonly #url: URL;

  constructor(opts: SlackNotifierOptions) {
    if (!Number.isFinite(opts.timeoutMs) || opts.timeoutMs <= 0) throw new TypeError('timeoutMs must be positive');
    if (!Number.isInteger(opts.maxAttempts) || opts.maxAttempts < 1) throw new TypeError('maxAttempts must be a positive integer');
    this.#opts = opts;
    this.#events = new Set(opts.events);
    this.#url = opts.transport.kind === 'bot' ? new URL(`${(opts.apiBaseUrl ?? SLACK_API_BASE_URL).replace(/\/+$/, '')}/chat.postMessage`) : new URL(opts.transport.url);
    if (this.#url.protocol !== 'https:' && this.#url.protocol !== 'http:') throw new TypeError('the Slack target must be an http(s) URL');
    const log = opts.log;
    this.#egress = createEgressDispatcher({
      allowPrivate: () => opts.allowPrivateEgress,
      connectTimeoutMs: Math.max(1, Math.ceil(opts.timeoutMs)),
      ...(opts.lookup ? { lookup: opts.lookup } : {}),
      // The decision names the range only: the host of a webhook URL is part of the secret.
      onDecision: (d) => {
        if (!d.allowed) log.warn({ range: d.range }, 'notification target refused by the egress policy (notifications.allow_private_egress)');
      },
    });
  }

  get transportKind(): SlackTransport['kind'] {
    return this.#opts.transport.kind;
  }

  notify(notice: ApprovalNotice): void {
    if (!this.#events.has(notice.event) || this.#stop.signal.aborted) return;
    let text: string;
    try {
      text = approvalMessage(notice, { pii: this.#opts.pii, adminBaseUrl: this.#opts.adminBaseUrl });
    } catch (err) {
      this.#opts.log.error({ err, approval_id: notice.approval_id }, 'approval notification could not be built; dropped');
      return;
    }
    const p = this.#deliver(notice, text)
      .catch((err: unknown) => this.#opts.log.error({ err: { code: (err as { code?: unknown }).code }, approval_id: notice.approval_id }, 'approval notification failed; dropped'))
      .finally(() => this.#inFlight.delete(p));
    this.#inFlight.add(p);
  }

  async idle(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  async close(): Promise<void> {
    this.#stop.abort();
    await this.idle();
    await this.#egress.close();
  }

  async #deliver(notice: ApprovalNotice, text: string): Promise<void> {
    const t = this.#opts.transport;
    const body = JSON.stringify(t.kind === 'bot' ? { channel: t.channel, text, unfurl_links: false, unfurl_media: false } : { text });
    const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
    if (t.kind === 'bot') headers.authorization = `Bearer ${t.token}`;
    const base = this.#opts.backoffBaseMs ?? 500;
    for (let attempt = 1; attempt <= this.#opts.maxAttempts; attempt++) {
      const result = await this.#attempt(headers, body);
      if (result.ok) return;
      // Logged by transport kind and reason only: never the URL (a secret for webhooks) or the token.
      const fields = { transport: t.kind, event: notice.event, approval_id: notice.approval_id, attempt, reason: result.reason };
      if (!result.retry || attempt === this.#opts.maxAttempts) {
        this.#opts.log.warn(fields, 'approval notification not delivered; dropped');
        return;
      }
      this.#opts.log.info(fields, 'approval notification attempt failed; retrying');
      if (!(await this.#sleep(Math.min(MAX_BACKOFF_MS, base * 2 ** (attempt - 1))))) return;
    }
  }

  #attempt(headers: Record<string, string>, body: string): Promise<PostAttempt> {
    return postNotification({
      dispatcher: this.#egress,
      url: this.#url,
      headers,
      body,
      sourceId: EGRESS_SOURCE,
      timeoutMs: this.#opts.timeoutMs,
      maxResponseBytes: MAX_SLACK_RESPONSE_BYTES,
      signal: this.#stop.signal,
      slackApi: this.#opts.transport.kind === 'bot',
      deniedReason: 'egress_denied',
    });
  }

  /** False when the notifier closed while waiting. */
  #sleep(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const signal = this.#stop.signal;
      if (signal.aborted) return resolve(false);
      const onAbort = () => {
        clearTimeout(timer);
        resolve(false);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve(true);
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}
