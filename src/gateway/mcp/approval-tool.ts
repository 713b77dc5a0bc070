// The `get_approval` tool: the caller's own approval, its state and its execution result (as GET /approvals/{id} answers it); anyone else's is "not found".
import { z } from 'zod';
import { agentApproval } from '../../approvals/agent-route.js';
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
    // The same view and the same "not found" for someone else's approval as GET /approvals/{id}.
    const { id, ...view } = await agentApproval(run.deps.db, run.caller.identity, args.approval_id);
    run.audit.set({ source_id: view.source_id });
    const structured = { approval_id: id, ...view };
    const text = `Approval ${id} on ${view.source_id}: ${view.status}${view.result ? `\n${JSON.stringify(view.result).slice(0, 4_000)}` : ''}`;
    return { result: structuredResult(structured, text), audit: { operation: 'get_approval' } };
  },
};
