// One notification POST through the checked egress and what its answer means: delivered, or failed with whether a retry can help.
import type { EgressDispatcher } from '../egress/agent.js';
import { EgressDeniedError, UpstreamError } from '../egress/errors.js';
import { upstreamRequest } from '../egress/request.js';
import { isGatehouseError } from '../errors/registry.js';

export type PostAttempt = { ok: true } | { ok: false; retry: boolean; reason: string };

export interface NotificationPost {
  dispatcher: EgressDispatcher;
  url: URL;
  headers: Record<string, string>;
  body: string;
  /** The egress rules' name for the caller (notifications, alerts). */
  sourceId: string;
  timeoutMs: number;
  maxResponseBytes: number;
  signal: AbortSignal;
  /** Slack's Web API answers 200 with `{ok: false, error}` for its own refusals: read the body. */
  slackApi: boolean;
  /** The reason recorded when the egress rules refuse the target. */
  deniedReason: string;
}

export async function postNotification(p: NotificationPost): Promise<PostAttempt> {
  let res;
  try {
    res = await upstreamRequest({
      dispatcher: p.dispatcher,
      url: p.url,
      method: 'POST',
      headers: p.headers,
      body: p.body,
      sourceId: p.sourceId,
      timeoutMs: Math.max(1, Math.ceil(p.timeoutMs)),
      maxResponseBytes: p.maxResponseBytes,
      signal: p.signal,
    });
  } catch (err) {
    if (err instanceof EgressDeniedError) return { ok: false, retry: false, reason: p.deniedReason };
    if (err instanceof UpstreamError) return { ok: false, retry: true, reason: err.reason };
    return { ok: false, retry: true, reason: isGatehouseError(err) ? err.code : 'request failed' };
  }
  if (res.status === 429 || res.status >= 500) return { ok: false, retry: true, reason: `http_${res.status}` };
  if (res.status < 200 || res.status >= 300) return { ok: false, retry: false, reason: `http_${res.status}` };
  if (!p.slackApi) return { ok: true };
  let parsed: { ok?: unknown; error?: unknown };
  try {
    parsed = JSON.parse(res.body.toString('utf8')) as { ok?: unknown; error?: unknown };
  } catch {
    return { ok: false, retry: true, reason: 'invalid_response' };
  }
  if (parsed.ok === true) return { ok: true };
  const error = typeof parsed.error === 'string' && /^[a-z_]{1,64}$/.test(parsed.error) ? parsed.error : 'unknown_error';
  return { ok: false, retry: error === 'ratelimited' || error === 'internal_error' || error === 'service_unavailable', reason: `slack_${error}` };
}
