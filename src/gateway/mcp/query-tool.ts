// The `query` tool: one SQL statement on a PostgreSQL source through the buffered SQL pipeline (the wire listener's decision stages, then the shared executor); bounded rows, redaction from the policy decision.
import { z } from 'zod';
import { runSqlPipeline } from '../../pipeline/sql.js';
import { SOURCE_ID_PATTERN, SOURCE_ID_RULE, governedRequest, structuredResult, type ToolDefinition } from './context.js';
import { queuedOutcome } from './queued.js';

const TEXT_ROWS = 20;
const TEXT_CHARS = 4_000;
/** PostgreSQL's Bind message counts parameters in 16 bits. */
const MAX_PARAMS = 65_535;

const param = z.union([z.string(), z.number(), z.boolean(), z.null(), z.record(z.string(), z.unknown()), z.array(z.unknown())]);

export function querySchema(maxRowsLimit: number) {
  return z.strictObject({
    source_id: z.string().regex(SOURCE_ID_PATTERN, SOURCE_ID_RULE),
    sql: z.string().min(1, 'must not be empty'),
    params: z.array(param).max(MAX_PARAMS).optional().describe('Values for $1, $2, … in order; objects and arrays are sent as JSON text, null as SQL NULL.'),
    max_rows: z.number().int().min(1).max(maxRowsLimit).default(Math.min(100, maxRowsLimit)).describe(`Rows to return at most (1..${maxRowsLimit}, default 100); more rows set truncated.`),
  });
}

function textTable(columns: string[], rows: (string | null)[][], rowCount: number, truncated: boolean, command: string): string {
  const head = `${command || 'OK'}: ${rowCount} row${rowCount === 1 ? '' : 's'}${truncated ? ' (truncated)' : ''}`;
  if (columns.length === 0) return head;
  const lines = [columns.join('\t'), ...rows.slice(0, TEXT_ROWS).map((r) => r.map((v) => (v === null ? 'NULL' : v)).join('\t'))];
  let text = `${head}\n${lines.join('\n')}`;
  if (rows.length > TEXT_ROWS) text += `\n… ${rows.length - TEXT_ROWS} more rows in the structured result`;
  return text.length > TEXT_CHARS ? `${text.slice(0, TEXT_CHARS)}\n… (see the structured result)` : text;
}

export function queryTool(limits: { maxRows: number; responseBytes: number }): ToolDefinition<ReturnType<typeof querySchema>> {
  return {
    name: 'query',
    title: 'Run SQL on a PostgreSQL source',
    description:
      'Runs one SQL statement on a PostgreSQL source you are granted, under the same rules as the database wire listener: your source roles, policies, rate limits and approvals apply, and policy-redacted or personal data columns arrive redacted. Returns {columns, rows, row_count, truncated}; values are in PostgreSQL text format. A write that needs approval is not executed: the result is an error carrying approval_id (check it with get_approval).',
    schema: querySchema(limits.maxRows),
    readOnly: false,
    async run(args, run) {
      const req = governedRequest(run, args.source_id, { kind: 'sql', sql: args.sql, params: args.params ?? [] });
      run.audit.set({ source_id: args.source_id, bytes_in: Buffer.byteLength(args.sql) });
      // The wire's decision stages and the approval executor's execution: a statement gets the same answer through psql and MCP.
      const outcome = await runSqlPipeline(req, run.deps.pipeline, await run.deps.postgres(), { maxRows: args.max_rows, maxBytes: limits.responseBytes });
      if (outcome.kind === 'queued') return queuedOutcome(outcome.approval, run.caller.requestId);
      const { columns, rows, truncated, command, redactions } = outcome.result;
      const structured = { columns, rows, row_count: rows.length, truncated, command };
      return {
        result: structuredResult(structured, textTable(columns, rows, rows.length, truncated, command)),
        audit: { status: 200, redactions },
      };
    },
  };
}
