// The SQL approval executor (src/approvals' SqlApprovalExecutor): an approved statement runs the decision stages again, pre-approved, then once on the source through the buffered executor, redacted, with one audit entry.
import { GatehouseError, isGatehouseError } from '../errors/registry.js';
import { auditDecision, runStages } from '../pipeline/run.js';
import type { GovernedRequest, PipelineDeps } from '../pipeline/context.js';
import type { Auditor } from '../audit/context.js';
import type { PostgresExecutor } from '../connectors/postgres-exec.js';
import type { SqlApprovalExecutor, SqlApprovalRequest, SqlApprovalResult } from './execute.js';
import { decisionStages } from '../pipeline/decide.js';

export function sqlApprovalExecutor(deps: { pipeline: PipelineDeps; auditor: Auditor; executor: PostgresExecutor; maxRows: number }): SqlApprovalExecutor {
  return {
    async execute(r: SqlApprovalRequest): Promise<SqlApprovalResult> {
      const audit = deps.auditor.begin({ channel: 'pgwire', request_id: r.requestId, source_id: r.sourceId });
      const req: GovernedRequest = {
        channel: 'pgwire',
        requestId: r.requestId,
        clientIp: null,
        sourceId: r.sourceId,
        credential: { kind: 'authenticated', identity: r.identity },
        action: { kind: 'sql', sql: r.sql, params: r.params },
        audit,
        preApproved: { approvalId: r.approvalId },
      };
      try {
        const outcome = await runStages(decisionStages, req, deps.pipeline);
        if (outcome) throw new GatehouseError('not_actionable', 'The approved statement was queued again.');
        const o = req.policyDecision!.obligations;
        audit.admit();
        const result = await deps.executor.executeSql({
          source: req.source!,
          identity: r.identity,
          sql: r.sql,
          params: r.params,
          maxRows: deps.maxRows,
          redaction: { redactColumns: o.redact_columns, mode: o.pii_mode ?? deps.pipeline.config.pii.default_mode },
        });
        // Fit the rows into the result budget: whole rows only, and say so.
        let rows = result.rows;
        let truncated = result.truncated;
        while (rows.length > 0 && Buffer.byteLength(JSON.stringify(rows)) > r.maxResultBytes / 2) {
          rows = rows.slice(0, Math.floor(rows.length / 2));
          truncated = true;
        }
        await audit.end({ status: 200, decision: 'allow', redactions: result.redactions, error_code: null });
        return { command: result.command, row_count: result.rowCount, columns: result.columns, rows, truncated };
      } catch (err) {
        if (!audit.ended) await audit.end({ status: isGatehouseError(err) ? err.spec.http : 500, decision: auditDecision({ error: err }), error_code: isGatehouseError(err) ? err.code : 'upstream_sql_error' }).catch(() => undefined);
        if (isGatehouseError(err)) throw err;
        throw new GatehouseError('upstream_failed', `The statement failed upstream (SQLSTATE ${(err as { sqlstate?: string }).sqlstate ?? 'unknown'}).`, { cause: err });
      }
    },
  };
}
