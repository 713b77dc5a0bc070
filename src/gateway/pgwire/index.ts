// The wire listener's composition: the governance runtime, the per-source upstream pools and the listener, built from the running services.
import type { Services } from '../../runtime/services.js';
import { buildGovernanceRuntime } from '../../runtime/governance.js';
import { PostgresExecutor, UpstreamPools } from '../../connectors/postgres-exec.js';
import { approvalServiceFor } from '../../approvals/runtime.js';
import { sqlApprovalExecutor } from './approval-executor.js';
import { createWireListener, type WireListener } from './listener.js';

export { createWireListener, type WireListener, type WireListenerDeps } from './listener.js';
export { APPROVAL_REQUIRED_SQLSTATE } from './decide.js';

/** Builds the listener (not yet bound). Egress rules apply to SQL sources as to HTTP ones: a loopback or private upstream needs gateway.egress.allow_private_sources. */
export async function buildWireListener(services: Services): Promise<WireListener> {
  const governance = await buildGovernanceRuntime(services);
  const { config } = services;
  const pools = new UpstreamPools({
    log: services.log.child({ component: 'pgwire-upstream' }),
    resolveSecretRef: (ref) => services.resolveSecretRef(ref),
    checkTarget: (sourceId, host) => governance.egress.checkTarget(sourceId, host),
    maxMessageBytes: config.gateway.limits.pg_message_bytes,
    connectTimeoutMs: config.gateway.timeouts.upstream_connect_ms,
  });
  const executor = new PostgresExecutor(pools, governance.pii);
  // Approved statements run here, in the process that owns the upstream pools (role all/gateway).
  const approvals = await approvalServiceFor(services);
  approvals.registerSqlExecutor(sqlApprovalExecutor({ pipeline: governance.deps, auditor: services.auditor, executor, maxRows: config.gateway.limits.result_rows }));
  return createWireListener({ config, log: services.log.child({ listener: 'pgwire' }), db: services.db, auditor: services.auditor, pipeline: governance.deps, pools });
}
