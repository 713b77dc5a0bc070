// The `get_approval` tool: the caller's own approval, its state and its execution result (as GET /approvals/{id} answers it); anyone else's is "not found".
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import { getApproval } from '../../approvals/store.js';
import { structuredResult, type ToolDefinition } from './context.js';

const approvalSchema = z.strictObject({
  approval_id: z.number().int().min(1).max(2_147_483_647).describe('The approval_id a query or http_request answered with.'),
});

export const getApprovalTool: ToolDefinition<typeof approvalSchema> = {
  name: 'get_approval',
  title: 'Check an approval',
  description:
    'Shows one of your own approvals: its status (pending, approved, rejected, expired, executed, failed) and, once executed, the result of the request (redacted and bounded as a live answer).',
  schema: approvalSchema,
  readOnly: true,
  async run(args, run) {
    run.audit.set({ approval_id: args.approval_id });
    const row = await getApproval(run.deps.db, args.approval_id);
    // Another identity's approval answers exactly like a missing one, so ids reveal nothing.
    if (!row || row.identity_id !== run.caller.identity.id) throw new GatehouseError('not_found', 'Approval not found.');
    run.audit.set({ source_id: row.source_id });
    const structured = {
      approval_id: row.id,
      status: row.status,
      source_id: row.source_id,
      created_at: new Date(row.created_at).toISOString(),
      expires_at: row.expires_at ? new Date(row.expires_at).toISOString() : null,
      executed_at: row.executed_at ? new Date(row.executed_at).toISOString() : null,
      // Stored bounded (approvals.max_result_bytes) and already redacted by the pipeline's redaction stage.
      result: row.result ?? null,
    };
    const text = `Approval ${row.id} on ${row.source_id}: ${row.status}${row.result ? `\n${JSON.stringify(row.result).slice(0, 4_000)}` : ''}`;
    return { result: structuredResult(structured, text), audit: { operation: 'get_approval' } };
  },
};
