// The text of an approval notification (spec §6): what happened, where to decide, and only redacted, already-public facts — never the stored request.
import type { PiiScanner } from '../governance/pii/index.js';

export const APPROVAL_EVENTS = ['pending', 'approved', 'rejected', 'expired', 'failed'] as const;
export type ApprovalEvent = (typeof APPROVAL_EVENTS)[number];

/** The facts a notification may carry. The stored payload, request body, headers and result are deliberately absent from this type. */
export interface ApprovalNotice {
  event: ApprovalEvent;
  approval_id: number;
  source_id: string;
  identity_id: number;
  identity_name: string | null;
  risk_level: string;
  /** The approval's summary (normalized SQL or "METHOD /path"); scanned again before it is sent. */
  summary: string;
  /** For a measured SQL write: the rows it writes, estimated and counted (counts and table names only, never values). */
  effect?: string | null;
  /** For `failed`: the error code recorded as the result (never a message that could quote upstream data). */
  error_code?: string | null;
}

const SUMMARY_CHARS = 300;
const NAME_CHARS = 120;

const VERB: Record<ApprovalEvent, string> = {
  pending: 'is waiting for a decision',
  approved: 'was approved',
  rejected: 'was rejected',
  expired: 'expired without a decision',
  failed: 'failed to execute',
};

/** Slack mrkdwn control characters (https://api.slack.com/reference/surfaces/formatting#escaping). */
function escapeSlack(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function bounded(text: string, max: number): string {
  // eslint-disable-next-line no-control-regex
  const oneLine = text.replace(/[\u0000-\u001f\u007f]+/g, ' ');
  return oneLine.length > max ? `${oneLine.slice(0, max)}…` : oneLine;
}

/** The approval page link, or null when no admin_base_url is configured. */
export function approvalLink(adminBaseUrl: string | null, id: number): string | null {
  if (adminBaseUrl === null) return null;
  return `${adminBaseUrl.replace(/\/+$/, '')}/dashboard/approvals/${id}`;
}

/**
 * The message text. Every free-text field goes through the deep personal-data scan first: a path or an identity
 * name may carry an e-mail address or a card number, and Slack is outside the trust boundary.
 */
export function approvalMessage(notice: ApprovalNotice, opts: { pii: PiiScanner; adminBaseUrl: string | null }): string {
  const scrub = (s: string, max: number) => escapeSlack(bounded(opts.pii.scanText(s, { mode: 'deep' }).text, max));
  const who = notice.identity_name ? `${scrub(notice.identity_name, NAME_CHARS)} (#${notice.identity_id})` : `#${notice.identity_id}`;
  const lines = [
    `Approval #${notice.approval_id} ${VERB[notice.event]}.`,
    `Source: ${scrub(notice.source_id, NAME_CHARS)} · Identity: ${who} · Risk: ${scrub(notice.risk_level, 32)}`,
    `Request: ${scrub(notice.summary, SUMMARY_CHARS)}`,
  ];
  if (notice.effect) lines.push(`Effect: ${scrub(notice.effect, SUMMARY_CHARS)}`);
  if (notice.event === 'failed' && notice.error_code) lines.push(`Error: ${scrub(notice.error_code, 64)}`);
  const link = approvalLink(opts.adminBaseUrl, notice.approval_id);
  if (link !== null) lines.push(`<${link}|Open approval #${notice.approval_id}>`);
  return lines.join('\n');
}
