// The buffered SQL pipeline (the MCP `query` tool, approved statements): the shared decision stages, then the statement once on its PostgreSQL source, redacted as the policy decision says, its rows fitted to a byte budget.
import { GatehouseError } from '../errors/registry.js';
import { UpstreamSqlError, type PostgresExecutor, type SqlResult } from '../connectors/postgres-exec.js';
import { isWriteOperation, type GovernedRequest, type PipelineDeps, type StageOutcome } from './context.js';
import { decisionStages } from './decide.js';
import { recordWriteIntent, runStages } from './run.js';
import { auditColumns, changesStructure, errorMayQuoteRedacted, provenanceRedaction, withheldErrorFields } from './columns.js';

export type SqlOutcome = StageOutcome | { readonly kind: 'rows'; readonly result: SqlResult };

export interface SqlLimits {
  /** Rows read from the upstream at most; more set `truncated`. */
  readonly maxRows: number;
  /** The answer's byte budget: whole rows are dropped until their JSON takes at most half of it (the rest is the envelope's). */
  readonly maxBytes: number;
}

/** Whole rows only, within the byte budget, and `truncated` says when rows were dropped. */
function fitRows(result: SqlResult, maxBytes: number): SqlResult {
  let rows = result.rows;
  let truncated = result.truncated;
  while (rows.length > 0 && Buffer.byteLength(JSON.stringify(rows)) > maxBytes / 2) {
    rows = rows.slice(0, Math.floor(rows.length / 2));
    truncated = true;
  }
  return rows === result.rows ? result : { ...result, rows, rowCount: rows.length, truncated };
}

/** Decides the statement with the stages every front door runs and, when allowed, executes it; the caller renders the outcome and ends the audit entry. */
export async function runSqlPipeline(req: GovernedRequest, deps: PipelineDeps, executor: PostgresExecutor, limits: SqlLimits): Promise<SqlOutcome> {
  const action = req.action;
  if (action.kind !== 'sql') throw new TypeError('runSqlPipeline needs a SQL action');
  const decided = await runStages(decisionStages, req, deps);
  if (decided) return decided;
  const source = req.source!;
  if (source.source_type !== 'postgres') throw new GatehouseError('invalid_request', 'SQL runs on PostgreSQL sources only.');
  // Strict audit: a write, or any approved statement, must not reach the upstream unless its entry can be recorded.
  if (isWriteOperation(req.operation) || req.preApproved) await recordWriteIntent(req);
  const o = req.policyDecision!.obligations;
  let result: SqlResult;
  let byProvenance: string[] = [];
  try {
    result = await executor.executeSql({
      source,
      identity: req.identity!,
      sql: action.sql,
      params: action.params,
      maxRows: limits.maxRows,
      redaction: {
        redactColumns: o.redact_columns,
        mode: o.pii_mode ?? deps.config.pii.default_mode,
        // The same decision the wire relay makes per RowDescription (pipeline/columns.ts).
        forceColumns: (fields) => {
          const force = provenanceRedaction(req, fields);
          byProvenance = fields.filter((_, i) => force[i]).map((f) => f.name);
          return force;
        },
      },
    });
  } catch (err) {
    if (!(err instanceof UpstreamSqlError)) throw err;
    req.audit.addReason(`upstream: SQLSTATE ${err.sqlstate}`);
    if (errorMayQuoteRedacted(req)) {
      throw new GatehouseError('upstream_sql_error', withheldErrorFields(err.fields).get('M'), { details: { sqlstate: err.sqlstate } });
    }
    // The message is already sanitized (no host, user, database or password of the source).
    throw new GatehouseError('upstream_sql_error', `The statement failed upstream: ${err.message} (SQLSTATE ${err.sqlstate}).`, { details: { sqlstate: err.sqlstate } });
  }
  if (req.columnAnalysis !== undefined) auditColumns(req, byProvenance);
  // A statement that may change the structure has committed (the executor runs it on its own): drop the cached one.
  if (changesStructure(req)) deps.structures.invalidate(req.sourceId);
  return { kind: 'rows', result: fitRows(result, limits.maxBytes) };
}
