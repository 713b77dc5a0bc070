// The agent side of approvals on the gateway (DESIGN §8): `GET /approvals/{id}` with the agent's key reads its own approval's state and result; anyone else's is 404; every read is audited.
import type { FastifyInstance } from 'fastify';
import type { Auditor } from '../audit/context.js';
import { auditFailure } from '../pipeline/run.js';
import { GatehouseError } from '../errors/registry.js';
import type { AgentIdentity } from '../identity/index.js';
import type { Db } from '../store/repos/util.js';
import { getApproval } from './store.js';

export interface AgentApprovalRouteDeps {
  db: Db;
  auditor: Auditor;
  authenticate(authorization: string | undefined): Promise<AgentIdentity>;
}

/** One approval as its agent sees it: state and result, nothing of the request or who decided. */
export interface AgentApprovalView {
  id: number;
  status: string;
  source_id: string;
  created_at: string;
  expires_at: string | null;
  executed_at: string | null;
  result: unknown;
}

/** The caller's own approval (GET /approvals/{id}, MCP get_approval); another identity's answers exactly like a missing one, so ids reveal nothing (not 403). */
export async function agentApproval(db: Db, identity: Pick<AgentIdentity, 'id'>, id: number): Promise<AgentApprovalView> {
  const row = await getApproval(db, id);
  if (!row || row.identity_id !== identity.id) throw new GatehouseError('not_found', 'Approval not found.');
  return {
    id: row.id,
    status: row.status,
    source_id: row.source_id,
    created_at: row.created_at.toISOString(),
    expires_at: row.expires_at?.toISOString() ?? null,
    executed_at: row.executed_at?.toISOString() ?? null,
    // Stored bounded (approvals.max_result_bytes) and already redacted by the pipeline's redaction stage.
    result: row.result ?? null,
  };
}

const ID = /^[1-9][0-9]{0,9}$/;
const MAX_ID = 2_147_483_647;

export function registerAgentApprovalRoute(app: FastifyInstance, deps: AgentApprovalRouteDeps): void {
  app.get<{ Params: { approval_id: string } }>('/approvals/:approval_id', async (req) => {
    // One entry per request, as on the proxy and for MCP's get_approval: reads, refusals and unknown ids alike.
    const audit = deps.auditor.begin({ channel: 'http', request_id: req.id, client_ip: req.ip, method: 'GET', path: req.url.split('?')[0]!.slice(0, 64), operation: 'get_approval', action: 'approval.read' });
    try {
      // Who asks comes first: an anonymous caller learns nothing, not even whether the id is well formed.
      const identity = await deps.authenticate(req.headers.authorization);
      audit.set({ identity_id: identity.id });
      const raw = req.params.approval_id;
      if (!ID.test(raw) || Number(raw) > MAX_ID) throw new GatehouseError('invalid_request', 'The approval id must be a positive integer.');
      audit.set({ approval_id: Number(raw) });
      const view = await agentApproval(deps.db, identity, Number(raw));
      audit.set({ source_id: view.source_id });
      await audit.end({ status: 200, decision: 'allow' });
      return view;
    } catch (err) {
      if (!audit.ended) await audit.end(auditFailure(err));
      throw err;
    }
  });
}
