// The wire listener's composition: the governance runtime, the per-source upstream pools and the listener, built from the running services.
import type { Services } from '../../runtime/services.js';
import { buildGovernanceRuntime } from '../../runtime/governance.js';
import { postgresRuntimeFor } from '../../connectors/postgres-runtime.js';
import { startKeySessionMemo } from '../../identity/index.js';
import { createWireListener, type WireListener } from './listener.js';

export { createWireListener, type WireListener, type WireListenerDeps } from './listener.js';
export { APPROVAL_REQUIRED_SQLSTATE } from './decide.js';

/** Builds the listener (not yet bound) on the process's shared upstream pools (src/connectors/postgres-runtime.ts). */
export async function buildWireListener(services: Services): Promise<WireListener> {
  const governance = await buildGovernanceRuntime(services);
  const { config } = services;
  const { pools, privileges } = await postgresRuntimeFor(services);
  // The governance runtime started it: the process's one revocation subscription serves the wire as well.
  const revocations = await startKeySessionMemo(services);
  const listener = createWireListener({ config, log: services.log.child({ listener: 'pgwire' }), db: services.db, auditor: services.auditor, pipeline: governance.deps, pools, revocations, privileges });
  services.metrics.addGauge('gatehouse_wire_sessions', 'Client connections open on the PostgreSQL wire listener.', [], () => [{ value: listener.sessions() }]);
  return listener;
}
