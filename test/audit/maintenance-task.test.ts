// The worker's partition maintenance task: it maintains under the coordination lock, skips a run while another worker holds the lock, and still maintains (without the lock) when the coordination store is down.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { AUDIT_PARTITIONS_LOCK, auditPartitionsTask } from '../../src/audit/maintenance-task.js';
import { dayPartitionName, dayStart, listPartitions } from '../../src/audit/partitions.js';
import { MemoryCoordination, RedisCoordination, type Coordination } from '../../src/coord/index.js';
import type { Services } from '../../src/runtime/services.js';
import { type MigratedStore } from '../support/pg.js';
import { migratedStoreForFile } from './support.js';
import { freePort } from '../support/ports.js';

let migrated: MigratedStore;
migratedStoreForFile((m) => {
  migrated = m;
});

const tomorrow = dayPartitionName(dayStart(new Date(), 1));

/** The task's log lines, by level and message. */
function recordingLog() {
  const lines: string[] = [];
  const record = (level: string) => (_obj: object, msg?: string) => void lines.push(`${level} ${msg ?? ''}`);
  return { lines, debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') };
}

function taskWith(coord: Coordination, log = recordingLog()) {
  const services = { db: migrated.store.db, coord, log, config: { audit: { partitions: { months_ahead: 3, retention_days: 36_500 } } } } as unknown as Services;
  return { task: auditPartitionsTask(services), log };
}

async function hasTomorrow(): Promise<boolean> {
  return (await listPartitions(migrated.store.db)).some((p) => p.name === tomorrow);
}

describe('audit partitions task', () => {
  it('runs every ten minutes and just after each UTC midnight, and at start', () => {
    const { task } = taskWith(new MemoryCoordination());
    expect(task).toMatchObject({ name: 'audit-partitions', intervalMs: 600_000, runAtStart: true });
    expect(task.alsoAt!(new Date('2026-12-07T23:59:59.000Z')).toISOString()).toBe('2026-12-08T00:00:05.000Z');
  });

  it('skips a run while another worker holds the lock, and maintains once it is free', async () => {
    const coord = new MemoryCoordination();
    try {
      await sql`drop table ${sql.id(tomorrow)}`.execute(migrated.store.db);
      const other = await coord.acquireLock(AUDIT_PARTITIONS_LOCK, 60_000);
      expect(other).not.toBeNull();
      const busy = taskWith(coord);
      await busy.task.run();
      expect(await hasTomorrow()).toBe(false);
      expect(busy.log.lines).toEqual(['debug another worker is maintaining the audit partitions']);
      await other!.release();
      await taskWith(coord).task.run();
      expect(await hasTomorrow()).toBe(true);
    } finally {
      await coord.close();
    }
  });

  it('maintains without the lock when the coordination store is unavailable, and says so', async () => {
    const coord = new RedisCoordination({ url: `redis://127.0.0.1:${await freePort()}`, keyPrefix: 'gh:test:maintenance:' });
    try {
      await sql`drop table ${sql.id(tomorrow)}`.execute(migrated.store.db);
      const { task, log } = taskWith(coord);
      await task.run();
      expect(await hasTomorrow()).toBe(true);
      expect(log.lines).toContain('warn coordination store unavailable: audit partitions maintained without the lock');
    } finally {
      await coord.close();
    }
  });
});
