// The approval service of a composition root, built once on the shared governance runtime (so approved requests run through the live pipeline's deps).
import { buildGovernanceRuntime } from '../runtime/governance.js';
import { perServices, type Services } from '../runtime/services.js';
import { notifierFor } from '../notify/index.js';
import { ApprovalExecutor } from './execute.js';
import { ApprovalService, claimTimeoutMsFor, sweepApprovals } from './service.js';
import { sqlApprovalExecutor } from './sql-executor.js';
import { postgresRuntimeFor } from '../connectors/postgres-runtime.js';

async function createApprovalService(services: Services): Promise<ApprovalService> {
  const governance = await buildGovernanceRuntime(services);
  const log = services.log.child({ component: 'approvals' });
  // The executor asks the service for the SQL executor at run time: the wire listener may register it after this is built.
  let service: ApprovalService | null = null;
  const executor = new ApprovalExecutor({
    cipher: governance.cipher,
    pipeline: governance.deps,
    auditor: services.auditor,
    log,
    maxResultBytes: services.config.approvals.max_result_bytes,
    sqlExecutor: () => service?.sqlExecutor ?? null,
  });
  service = new ApprovalService({
    db: services.db,
    notifier: notifierFor(services),
    log,
    claimTimeoutMs: claimTimeoutMsFor(services.config.gateway.timeouts.upstream_request_ms),
    executor,
  });
  // Approved SQL runs on the process's shared upstream pools, so any process that decides approvals (admin or all) can execute them.
  const { executor: postgres } = await postgresRuntimeFor(services);
  service.registerSqlExecutor(sqlApprovalExecutor({ pipeline: governance.deps, auditor: services.auditor, executor: postgres, maxRows: services.config.gateway.limits.result_rows }));
  return service;
}

/** The process's approval service (admin decisions, recovery, the SQL executor registration point). */
export const approvalServiceFor: (services: Services) => Promise<ApprovalService> = perServices(createApprovalService);

/** The worker task of docs/approvals.md (spec §3 expiry): expiry and stale execution claims; needs only the store and the notifier. */
export function approvalSweepTask(services: Services) {
  return {
    name: 'approvals-sweep',
    intervalMs: services.config.worker.sweep_interval_seconds * 1000,
    runAtStart: true,
    run: async () => {
      await sweepApprovals({
        db: services.db,
        notifier: notifierFor(services),
        log: services.log.child({ component: 'approvals' }),
        claimTimeoutMs: claimTimeoutMsFor(services.config.gateway.timeouts.upstream_request_ms),
      });
    },
  };
}
