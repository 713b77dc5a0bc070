// endRecorded answers "recorded at once" only for an entry the audit writer took into its buffer, so the relay holds no output on it; strict durability and a spooled entry are still waited for.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { Auditor } from '../../src/audit/context.js';
import { AuditWriter } from '../../src/audit/writer.js';
import { RECORDED_AT_ONCE, endRecorded } from '../../src/gateway/pgwire/decide.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { auditConfig, recordingLogger, tempSpoolDir } from '../audit/support.js';

let migrated: MigratedStore;
beforeAll(async () => {
  migrated = await withMigratedStore();
});
afterAll(async () => {
  await migrated?.cleanup();
});

async function withWriter(config: Record<string, unknown>, body: (end: (requestId: string) => Promise<boolean>, writer: AuditWriter) => Promise<void>): Promise<void> {
  const spool = await tempSpoolDir();
  const logger = recordingLogger();
  const writer = new AuditWriter({ db: migrated.store.db, config: auditConfig({ ...config, spool: { dir: spool.dir } }), logger });
  await writer.start();
  const auditor = new Auditor({ port: writer, logger });
  const d = { pipeline: { log: logger } } as unknown as Parameters<typeof endRecorded>[0];
  try {
    await body((requestId) => endRecorded(d, auditor.begin({ channel: 'pgwire', request_id: requestId }), { status: 200, decision: 'allow' }), writer);
  } finally {
    await writer.close();
    await spool.remove();
  }
}

async function stored(requestId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from audit_entries where request_id = ${requestId}`.execute(migrated.store.db);
  return rows[0]!.n;
}

describe('endRecorded', () => {
  it('buffered, with room in the buffer: recorded at once, and the entry is stored by the next flush', async () => {
    await withWriter({ durability_mode: 'buffered' }, async (end, writer) => {
      const recorded = end('at-once-buffered');
      expect(recorded).toBe(RECORDED_AT_ONCE);
      expect(await recorded).toBe(true);
      await writer.flush();
      expect(await stored('at-once-buffered')).toBe(1);
    });
  });

  it('strict: waited for, and true once the entry is committed', async () => {
    await withWriter({ durability_mode: 'strict' }, async (end) => {
      const recorded = end('at-once-strict');
      expect(recorded).not.toBe(RECORDED_AT_ONCE);
      expect(await recorded).toBe(true);
      expect(await stored('at-once-strict')).toBe(1);
    });
  });

  it('buffered, with the buffer full: the entry goes to the spool and is waited for', async () => {
    await withWriter({ durability_mode: 'buffered', buffer_max_entries: 1, batch_size: 100, flush_interval_ms: 60_000 }, async (end, writer) => {
      expect(end('at-once-first')).toBe(RECORDED_AT_ONCE);
      const spilled = end('at-once-spilled');
      expect(spilled).not.toBe(RECORDED_AT_ONCE);
      expect(await spilled).toBe(true);
      await writer.flush();
    });
  });
});
