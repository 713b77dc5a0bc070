// The approval notifier of a process, built from configuration (spec §6): none when notifications are off, else one Slack notifier shared by every role in the process.
import { createPiiScanner, piiOptionsFromConfig } from '../governance/pii/index.js';
import type { Services } from '../runtime/services.js';
import { disabledNotifier, SlackNotifier, type ApprovalNotifier, type SlackNotifierOptions, type SlackTransport } from './slack.js';

export { APPROVAL_EVENTS, approvalLink, approvalMessage, type ApprovalEvent, type ApprovalNotice } from './message.js';
export { disabledNotifier, SlackNotifier, SLACK_API_BASE_URL, type ApprovalNotifier, type SlackNotifierOptions, type SlackTransport } from './slack.js';

type NotifierServices = Pick<Services, 'config' | 'log' | 'resolveSecretRef' | 'onClose'>;

/** Internal options a test may pass; nothing here is reachable from configuration. */
export type NotifierOverrides = Pick<SlackNotifierOptions, 'apiBaseUrl' | 'backoffBaseMs' | 'lookup'>;

/**
 * The transport: the bot token when configured (preferred, spec §6.2), else the webhook reference, else the
 * deprecated literal webhook URL. Configuration loading already refused literal, unresolvable and empty
 * references, so a failure here means the secret vanished after start-up: the notifier is then off, and says so.
 */
export function transportFrom(services: NotifierServices): SlackTransport | null {
  const n = services.config.notifications;
  const resolve = (ref: string, key: string): string | null => {
    const r = services.resolveSecretRef(ref);
    if (r.ok && r.value !== '') return r.value;
    services.log.error({ key }, 'notification secret reference cannot be resolved; notifications are off');
    return null;
  };
  if (n.slack_bot_token_ref !== null && n.slack_channel !== null) {
    const token = resolve(n.slack_bot_token_ref, 'notifications.slack_bot_token_ref');
    return token === null ? null : { kind: 'bot', token, channel: n.slack_channel };
  }
  if (n.slack_webhook_url_ref !== null) {
    const url = resolve(n.slack_webhook_url_ref, 'notifications.slack_webhook_url_ref');
    return url === null ? null : { kind: 'webhook', url };
  }
  if (n.slack_webhook_url !== null) return { kind: 'webhook', url: n.slack_webhook_url };
  return null;
}

export function buildNotifier(services: NotifierServices, overrides: NotifierOverrides = {}): ApprovalNotifier {
  const n = services.config.notifications;
  if (!n.enabled) return disabledNotifier;
  const transport = transportFrom(services);
  if (transport === null) return disabledNotifier;
  const notifier = new SlackNotifier({
    transport,
    events: n.approval_events,
    adminBaseUrl: n.admin_base_url,
    timeoutMs: n.timeout_seconds * 1000,
    maxAttempts: n.max_attempts,
    allowPrivateEgress: n.allow_private_egress,
    pii: createPiiScanner(piiOptionsFromConfig(services.config.pii)),
    log: services.log.child({ component: 'notifications' }),
    ...overrides,
  });
  services.onClose(() => notifier.close());
  return notifier;
}

const perServices = new WeakMap<object, ApprovalNotifier>();

/** One notifier per composition root: the gateway (pending), admin (decisions) and worker (expiry) of a process share it. */
export function notifierFor(services: NotifierServices): ApprovalNotifier {
  let notifier = perServices.get(services);
  if (notifier === undefined) {
    notifier = buildNotifier(services);
    perServices.set(services, notifier);
  }
  return notifier;
}
