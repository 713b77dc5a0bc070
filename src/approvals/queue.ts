// The approval queue's intake: a write the pipeline holds back is stored encrypted with a redacted preview, and answered 202 with its id (spec §3).
import { sql } from 'kysely';
import { GatehouseError } from '../errors/registry.js';
import type { Db } from '../store/repos/util.js';
import type { PiiScanner } from '../governance/pii/index.js';
import type { ApprovalQueue, ApprovalTicket, GovernedRequest } from '../pipeline/context.js';
import { FORWARDED_REQUEST_HEADERS, single } from '../pipeline/http.js';
import type { PayloadCipher } from './crypto.js';
import type { ApprovalNotice } from '../notify/message.js';

const PREVIEW_CHARS = 512;

/** The original request as it will be executed on approval; only ever stored encrypted. */
export type StoredRequest =
  | {
      kind: 'http';
      method: string;
      /** The request target as received (`/proxy/<source>/…`): execution resolves it again against the source, exactly as a live request. */
      raw_target: string;
      url: string;
      path: string;
      query: string;
      headers: Record<string, string>;
      body_b64: string | null;
    }
  | { kind: 'sql'; sql: string; params: unknown[] };

export interface ApprovalIntakeOptions {
  db: Db;
  cipher: PayloadCipher;
  pii: PiiScanner;
  expirySeconds: number;
  maxRequestBytes: number;
  /** Told of every queued approval (the `pending` notification); must not throw or wait. */
  onQueued?: (notice: ApprovalNotice) => void;
}

function storedRequestOf(req: GovernedRequest): StoredRequest {
  const a = req.action;
  if (a.kind === 'sql') return { kind: 'sql', sql: a.sql, params: [...a.params] };
  const headers: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const v = single(a.headers[name]);
    if (v !== undefined) headers[name] = v;
  }
  const t = req.httpTarget!;
  return { kind: 'http', method: a.method, raw_target: a.rawTarget, url: t.url.href, path: t.path, query: t.query, headers, body_b64: a.body ? a.body.toString('base64') : null };
}

/** What approvers see: SQL with literals replaced, or the method and path; never a query string, header or raw body. */
function summaryOf(req: GovernedRequest): string {
  if (req.action.kind === 'sql') return req.sql?.normalized ?? '(statement)';
  return `${req.action.method} ${req.httpTarget!.path}`;
}

function previewOf(req: GovernedRequest, pii: PiiScanner): string | null {
  if (req.action.kind !== 'http' || !req.action.body || req.action.body.length === 0) return null;
  const text = req.action.body.subarray(0, 64 * 1024).toString('utf8');
  let redacted: string;
  try {
    redacted = JSON.stringify(pii.scanJson(JSON.parse(text), { mode: 'deep' }).value);
  } catch {
    redacted = pii.scanText(text, { mode: 'deep' }).text;
  }
  return redacted.length > PREVIEW_CHARS ? `${redacted.slice(0, PREVIEW_CHARS)}…` : redacted;
}

/**
 * What the approver learns about a SQL write's effect (request_metadata.write_effect): the planner's estimate per
 * table and, when it could be made safely, the exact count of a rolled-back run. Counts and table names only.
 */
function writeEffectOf(req: GovernedRequest): Record<string, unknown> | null {
  const e = req.writeEffect?.estimate;
  if (e === undefined) return null;
  const p = req.writePreview;
  return {
    estimated_rows: e.ok ? Math.round(e.rows) : null,
    estimate_error: e.ok ? null : e.reason,
    tables: e.ok ? e.tables.map((t) => ({ table: t.table, operation: t.operation, estimated_rows: Math.round(t.rows), table_rows: t.tableRows === null ? null : Math.round(t.tableRows) })) : [],
    exact_rows: p?.ok ? p.rows : null,
    exact_tables: p?.ok ? p.tables.map((t) => ({ table: t.table, operation: t.operation, rows: t.rows })) : [],
    exact_error: p === undefined || p.ok ? null : p.reason,
    thresholds: req.writeEffect!.estimate.ok ? req.writeEffect!.thresholds : null,
  };
}

/** The effect in one line for notifications: "about 5000 rows estimated; exactly 4998 rows (rolled-back run)". */
function effectLine(effect: Record<string, unknown> | null): string | null {
  if (effect === null) return null;
  const estimated = effect.estimated_rows === null ? `not estimated (${String(effect.estimate_error)})` : `about ${String(effect.estimated_rows)} rows estimated`;
  const exact = effect.exact_rows === null ? `no exact count (${String(effect.exact_error ?? 'not run')})` : `exactly ${String(effect.exact_rows)} rows in a rolled-back run`;
  return `${estimated}; ${exact}`;
}

export class ApprovalIntake implements ApprovalQueue {
  constructor(private readonly opts: ApprovalIntakeOptions) {}

  async enqueue(req: Parameters<ApprovalQueue['enqueue']>[0]): Promise<ApprovalTicket> {
    const stored = Buffer.from(JSON.stringify(storedRequestOf(req)));
    if (stored.length > this.opts.maxRequestBytes) throw new GatehouseError('payload_too_large', 'The request is too large to be held for approval.');
    const metadata = {
      channel: req.channel,
      request_id: req.requestId,
      operation: req.operation ?? null,
      tables: [...(req.tables ?? [])],
      risk_reasons: req.risk.reasons,
      policy_ids: req.policyDecision?.matched_policies.map((p) => p.id) ?? [],
      role_key: req.roleDecision?.role_key ?? null,
      preview: previewOf(req, this.opts.pii),
      write_effect: writeEffectOf(req),
    };
    const summary = summaryOf(req);
    const row = await this.opts.db
      .insertInto('approvals')
      .values({
        identity_id: req.identity.id,
        source_id: req.source.source_id,
        sql_text: summary,
        request_payload: this.opts.cipher.encrypt(stored),
        risk_level: req.risk.level,
        expires_at: sql<Date>`now() + make_interval(secs => ${this.opts.expirySeconds})`,
        request_metadata: JSON.stringify(metadata),
      } as never)
      .returning(['id', 'expires_at'])
      .executeTakeFirstOrThrow();
    try {
      this.opts.onQueued?.({ event: 'pending', approval_id: row.id, source_id: req.source.source_id, identity_id: req.identity.id, identity_name: req.identity.name, risk_level: req.risk.level, summary, effect: effectLine(metadata.write_effect) });
    } catch {
      // Notifications are best effort (spec §6.1): never a reason to fail the request.
    }
    return { id: row.id, state: 'pending', expires_at: new Date(row.expires_at as unknown as string).toISOString() };
  }
}
