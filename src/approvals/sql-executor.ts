// The SQL approval executor (src/approvals' SqlApprovalExecutor): an approved statement runs the buffered SQL pipeline again, pre-approved (every decision stage, then once on the source, redacted), with one audit entry.
import { GatehouseError, isGatehouseError } from '../errors/registry.js';
import { auditFailure } from '../pipeline/run.js';
import type { PipelineDeps } from '../pipeline/context.js';
import { runSqlPipeline } from '../pipeline/sql.js';
import type { Auditor } from '../audit/context.js';
import type { PostgresExecutor } from '../connectors/postgres-exec.js';
import type { SqlApprovalExecutor, SqlApprovalRequest, SqlApprovalResult } from './execute.js';

export function sqlApprovalExecutor(deps: { pipeline: PipelineDeps; auditor: Auditor; executor: PostgresExecutor; maxRows: number }): SqlApprovalExecutor {
  return {
    async execute(r: SqlApprovalRequest): Promise<SqlApprovalResult> {
      const audit = deps.auditor.begin({ channel: 'pgwire', request_id: r.requestId, source_id: r.sourceId });
      try {
        const outcome = await runSqlPipeline(
          {
            channel: 'pgwire',
            requestId: r.requestId,
            clientIp: null,
            sourceId: r.sourceId,
            credential: { kind: 'authenticated', identity: r.identity },
            action: { kind: 'sql', sql: r.sql, params: r.params },
            audit,
            preApproved: { approvalId: r.approvalId, approvedRows: r.approvedRows },
          },
          deps.pipeline,
          deps.executor,
          { maxRows: deps.maxRows, maxBytes: r.maxResultBytes },
        );
        if (outcome.kind !== 'rows') throw new GatehouseError('not_actionable', 'The approved statement was queued again.');
        const { command, rowCount, columns, rows, truncated, redactions } = outcome.result;
        await audit.end({ status: 200, decision: 'allow', redactions, error_code: null });
        return { command, row_count: rowCount, columns, rows, truncated };
      } catch (err) {
        if (!isGatehouseError(err)) deps.pipeline.log.error({ err, approval_id: r.approvalId }, 'approved statement failed');
        if (!audit.ended) await audit.end(auditFailure(err)).catch(() => undefined);
        throw err;
      }
    },
  };
}
