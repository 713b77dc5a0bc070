// The wire listener's composition: the governance runtime, the per-source upstream pools and the listener, built from the running services.
import type { Services } from '../../runtime/services.js';
import { buildGovernanceRuntime } from '../../runtime/governance.js';
import { postgresRuntimeFor } from '../../connectors/postgres-runtime.js';
import { approvalServiceFor } from '../../approvals/runtime.js';
import { sqlApprovalExecutor } from './approval-executor.js';
import { createWireListener, type WireListener } from './listener.js';

export { createWireListener, type WireListener, type WireListenerDeps } from './listener.js';
export { APPROVAL_REQUIRED_SQLSTATE } from './decide.js';

/** Builds the listener (not yet bound) on the process's shared upstream pools (src/connectors/postgres-runtime.ts). */
export async function buildWireListener(services: Services): Promise<WireListener> {
  const governance = await buildGovernanceRuntime(services);
  const { config } = services;
  const { pools, executor } = await postgresRuntimeFor(services);
  // Approved statements run here, in the process that owns the upstream pools (role all/gateway).
  const approvals = await approvalServiceFor(services);
  approvals.registerSqlExecutor(sqlApprovalExecutor({ pipeline: governance.deps, auditor: services.auditor, executor, maxRows: config.gateway.limits.result_rows }));
  return createWireListener({ config, log: services.log.child({ listener: 'pgwire' }), db: services.db, auditor: services.auditor, pipeline: governance.deps, pools });
}
