// The worker's audit partition maintenance: when it runs (every ten minutes and just after each UTC midnight) and that one worker at a time runs it.
import { CoordinationError, whileHolding } from '../coord/index.js';
import type { Services } from '../runtime/services.js';
import type { PeriodicTask } from '../worker/worker.js';
import { justAfterMidnight, maintainPartitions, type PartitionMaintenanceResult } from './partitions.js';

/** The coordination lock one worker holds while it maintains the audit partitions, and its lease (renewed while held). */
export const AUDIT_PARTITIONS_LOCK = 'audit-partitions';
const AUDIT_PARTITIONS_LOCK_TTL_MS = 60_000;

/**
 * Daily partitions get their search indexes soon after their day ends (docs/decisions/0024): every ten minutes, and
 * seconds after each UTC midnight, so a day just closed is not searched without them for up to ten. One worker at a
 * time across replicas: every replica's run comes due at the same moment after midnight, and two CREATE INDEX
 * CONCURRENTLY on one table can deadlock (40P01). Maintenance needs only PostgreSQL: with the coordination store
 * unavailable it runs without the lock (a deadlock then fails one run; partitions with a build in progress are left
 * alone either way) rather than not at all.
 */
export function auditPartitionsTask(services: Pick<Services, 'db' | 'coord' | 'log' | 'config'>): PeriodicTask {
  const partitions = services.config.audit.partitions;
  const maintain = (): Promise<PartitionMaintenanceResult> =>
    maintainPartitions(services.db, { monthsAhead: partitions.months_ahead, retentionDays: partitions.retention_days, now: new Date() });
  return {
    name: 'audit-partitions',
    intervalMs: 600_000,
    alsoAt: justAfterMidnight,
    runAtStart: true,
    run: async () => {
      let result: PartitionMaintenanceResult;
      try {
        const held = await whileHolding(services.coord, AUDIT_PARTITIONS_LOCK, AUDIT_PARTITIONS_LOCK_TTL_MS, maintain);
        if (held.busy) return services.log.debug({ task: 'audit-partitions' }, 'another worker is maintaining the audit partitions');
        result = held.value;
      } catch (err) {
        if (!(err instanceof CoordinationError)) throw err;
        services.log.warn({ task: 'audit-partitions', err: { code: err.code } }, 'coordination store unavailable: audit partitions maintained without the lock');
        result = await maintain();
      }
      // Index builds and the seals' time order (which audit verify reads by) are worth a line too: each can take minutes.
      if (result.created.length + result.dropped.length + result.indexed.length + result.busy.length > 0 || result.retired || result.sealOrder) services.log.info(result, 'audit partitions maintained');
    },
  };
}
