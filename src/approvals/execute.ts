// Executing an approved request: decrypt the stored request and run it through the same pipeline as a live request, pre-approved, recording a bounded, redacted result.
import { randomUUID } from 'node:crypto';
import type { Auditor } from '../audit/context.js';
import { isGatehouseError } from '../errors/registry.js';
import type { AgentIdentity } from '../identity/index.js';
import type { Logger } from '../observability/logger.js';
import { runHttpPipeline, type HttpExecution, type HttpOutcome, type HttpPipelineDeps, type ProxyResponse } from '../pipeline/http.js';
import { asGatehouseError, auditDecision, auditFailure } from '../pipeline/run.js';
import type { PayloadCipher } from './crypto.js';
import type { StoredRequest } from './queue.js';
import type { ApprovalRow } from './store.js';

/** Sent upstream with every approved HTTP execution, so an upstream that honours it dedupes even a replay by an operator. */
export const idempotencyKeyOf = (approvalId: number): string => `gatehouse-approval-${approvalId}`;

/** What a SQL front door (the wire listener, MCP) gives the approvals module to execute a stored statement. */
export interface SqlApprovalRequest {
  readonly approvalId: number;
  /** Loaded fresh from the store; enabled. */
  readonly identity: AgentIdentity;
  readonly sourceId: string;
  readonly sql: string;
  readonly params: readonly unknown[];
  /** approvals.max_result_bytes: the result must fit in it (truncate rows, say so). */
  readonly maxResultBytes: number;
  readonly requestId: string;
  /** The row estimate the approver was shown (request_metadata.write_effect): a write grown far beyond it is not executed. */
  readonly approvedRows: number | null;
}

/**
 * The planner's row estimate the approval showed, or null. The estimate, not the exact count: execution measures with
 * the planner again, and two estimates err alike (stale statistics, dead row versions) where an estimate and a count do not.
 */
export function approvedRowsOf(metadata: Record<string, unknown>): number | null {
  const effect = metadata.write_effect as { estimated_rows?: unknown } | null | undefined;
  const rows = effect?.estimated_rows;
  return typeof rows === 'number' && Number.isFinite(rows) ? rows : null;
}

/** A bounded result whose values are already redacted (columns, personal data) as a live answer would be. */
export interface SqlApprovalResult {
  readonly command: string;
  readonly row_count: number | null;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly unknown[])[];
  readonly truncated: boolean;
}

/**
 * Implemented by the SQL pipeline owner: runs the decision stages with `preApproved: {approvalId}` (identity,
 * source role, policy, rate limit run again) and then the statement on the source under the identity's scope,
 * with the same redaction and one audit entry. Throws GatehouseError for a refusal; nothing is sent then.
 */
export interface SqlApprovalExecutor {
  execute(request: SqlApprovalRequest): Promise<SqlApprovalResult>;
}

export interface ExecutionOutcome {
  status: 'executed' | 'failed';
  /** Stored in `approvals.result`: bounded by approvals.max_result_bytes, never holding the request or a credential. */
  result: Record<string, unknown>;
}

export interface ApprovalExecutorOptions {
  cipher: PayloadCipher;
  pipeline: HttpPipelineDeps;
  auditor: Auditor;
  log: Logger;
  maxResultBytes: number;
  sqlExecutor?: () => SqlApprovalExecutor | null;
}

const TEXTUAL = /^(text\/|application\/([a-z0-9.+-]*\+)?(json|xml)|application\/(javascript|x-www-form-urlencoded|csv))/i;

/** A failure result: the registry code and its client-safe message, nothing from the upstream or the payload. */
export function failureResult(code: string, message: string): ExecutionOutcome {
  return { status: 'failed', result: { error: code, message } };
}

function errorOutcome(err: unknown): ExecutionOutcome {
  const e = asGatehouseError(err);
  return failureResult(e.code, e.message);
}

/** Fits the redacted response into `max` bytes of JSON, truncating the body (never the status or headers). */
export function boundedHttpResult(response: ProxyResponse, max: number): Record<string, unknown> {
  const textual = TEXTUAL.test(response.headers['content-type'] ?? '');
  const encode = (b: Buffer) => (textual ? b.toString('utf8') : b.toString('base64'));
  let keep = Math.min(response.body.length, max);
  for (;;) {
    const result = {
      status: response.status,
      headers: response.headers,
      body: encode(response.body.subarray(0, keep)),
      body_encoding: textual ? 'utf8' : 'base64',
      body_bytes: response.body.length,
      truncated: keep < response.body.length,
    };
    if (Buffer.byteLength(JSON.stringify(result)) <= max || keep === 0) return result;
    // Escaping and base64 grow the text; shrink until the whole record fits.
    keep = Math.floor(keep / 2);
  }
}

export class ApprovalExecutor {
  constructor(private readonly opts: ApprovalExecutorOptions) {}

  /** Runs one claimed approval. Never throws: every failure becomes a `failed` outcome. */
  async run(row: ApprovalRow, payload: Buffer | null, identity: AgentIdentity): Promise<ExecutionOutcome> {
    let stored: StoredRequest;
    try {
      if (payload === null) throw new Error('no stored request');
      stored = JSON.parse(this.opts.cipher.decrypt(Buffer.from(payload)).toString('utf8')) as StoredRequest;
    } catch (err) {
      // Wrong key (rotated without re-encryption) or tampering: the request cannot be reconstructed, so it is not sent.
      this.opts.log.error({ approval_id: row.id, err: { message: (err as Error).message } }, 'approval request cannot be decrypted');
      return failureResult('payload_unreadable', 'The stored request cannot be read.');
    }
    try {
      if (stored.kind === 'http') return await this.#runHttp(row, stored, identity);
      return await this.#runSql(row, stored, identity);
    } catch (err) {
      this.opts.log.error({ err, approval_id: row.id }, 'approval execution failed unexpectedly');
      return errorOutcome(err);
    }
  }

  async #runHttp(row: ApprovalRow, stored: Extract<StoredRequest, { kind: 'http' }>, identity: AgentIdentity): Promise<ExecutionOutcome> {
    if (typeof stored.raw_target !== 'string') return failureResult('payload_unreadable', 'The stored request cannot be read.');
    const body = stored.body_b64 === null ? null : Buffer.from(stored.body_b64, 'base64');
    const requestId = `approval-${row.id}-${randomUUID()}`;
    const audit = this.opts.auditor.begin({
      channel: 'http',
      request_id: requestId,
      client_ip: null,
      method: stored.method,
      source_id: row.source_id,
      approval_id: row.id,
      bytes_in: body?.length ?? 0,
    });
    const exec: HttpExecution = {
      channel: 'http',
      requestId,
      clientIp: null,
      sourceId: row.source_id,
      credential: { kind: 'authenticated', identity },
      // The approval's key replaces any the agent sent: one approval, one key, whoever executes it.
      action: { kind: 'http', method: stored.method, rawTarget: stored.raw_target, headers: { ...stored.headers, 'idempotency-key': idempotencyKeyOf(row.id) }, body },
      audit,
      preApproved: { approvalId: row.id },
    };
    let outcome: HttpOutcome | undefined;
    let error: unknown;
    try {
      outcome = await runHttpPipeline(exec, this.opts.pipeline);
    } catch (err) {
      error = err;
    }
    try {
      await audit.end({
        ...(error !== undefined ? auditFailure(error) : { status: outcome?.kind === 'respond' ? outcome.response.status : 500, decision: auditDecision({ outcome }), error_code: null }),
        cache: exec.cacheOutcome ?? null,
        redactions: exec.redactions ?? 0,
        bytes_out: outcome?.kind === 'respond' ? outcome.response.body.length : 0,
      });
    } catch (auditErr) {
      // The request already ran (or was refused); the outcome is recorded regardless, the audit failure is logged.
      this.opts.log.error({ err: auditErr, approval_id: row.id }, 'audit entry of an approval execution could not be recorded');
    }
    if (error !== undefined) {
      if (!isGatehouseError(error)) this.opts.log.error({ err: error, approval_id: row.id }, 'approval execution failed');
      return errorOutcome(error);
    }
    if (outcome?.kind !== 'respond') {
      // A pre-approved request is never queued again; reaching this is a pipeline bug, and nothing was sent.
      return failureResult('internal', 'The request was not executed.');
    }
    const result = boundedHttpResult(outcome.response, this.opts.maxResultBytes);
    return { status: outcome.response.status < 400 ? 'executed' : 'failed', result };
  }

  async #runSql(row: ApprovalRow, stored: Extract<StoredRequest, { kind: 'sql' }>, identity: AgentIdentity): Promise<ExecutionOutcome> {
    const executor = this.opts.sqlExecutor?.() ?? null;
    if (executor === null) return failureResult('unavailable', 'No SQL executor is available in this process; the statement was not executed.');
    try {
      const result = await executor.execute({
        approvalId: row.id,
        identity,
        sourceId: row.source_id,
        sql: stored.sql,
        params: stored.params,
        maxResultBytes: this.opts.maxResultBytes,
        requestId: `approval-${row.id}-${randomUUID()}`,
        approvedRows: approvedRowsOf(row.request_metadata ?? {}),
      });
      const record = { command: result.command, row_count: result.row_count, columns: [...result.columns], rows: [...result.rows], truncated: result.truncated };
      if (Buffer.byteLength(JSON.stringify(record)) > this.opts.maxResultBytes) {
        // The executor's own bound was not kept: keep the summary, drop the rows.
        return { status: 'executed', result: { ...record, rows: [], truncated: true } };
      }
      return { status: 'executed', result: record };
    } catch (err) {
      return errorOutcome(err);
    }
  }
}
