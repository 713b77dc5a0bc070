// A request held for approval, as a tool answers it: an error result (nothing was executed) that carries the approval id and state.
import type { ApprovalTicket } from '../../pipeline/context.js';
import { structuredResult, type ToolOutcome } from './context.js';

export function queuedOutcome(approval: ApprovalTicket, requestId: string): ToolOutcome {
  const structured = {
    error: 'approval_required',
    message: 'The request is waiting for approval and was not executed.',
    approval_id: approval.id,
    approval_state: approval.state,
    expires_at: approval.expires_at,
    request_id: requestId,
  };
  const text = `approval_required: the request was not executed; it waits for approval ${approval.id} (state ${approval.state}, expires ${approval.expires_at}). Call get_approval with approval_id ${approval.id} to see its state and result.`;
  return { result: structuredResult(structured, text, true), audit: { status: 202, decision: 'require_approval', approval_id: approval.id } };
}
