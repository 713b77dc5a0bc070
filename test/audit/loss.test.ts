// Loss test (docs/audit.md "The 'exactly once' guarantees"): PostgreSQL vanishes partway through a stream of entries and returns; exactly N arrive, none twice, in both modes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { AuditWriter } from '../../src/audit/writer.js';
import { verifyAudit } from '../../src/audit/verify.js';
import { withMigratedStore, type MigratedStore, TEST_PG_HOST, TEST_PG_PORT } from '../support/pg.js';
import { auditConfig, kyselyVia, makeEntry, recordingLogger, sleep, TcpProxy, tempSpoolDir, waitFor } from './support.js';

describe('audit loss test: PostgreSQL unreachable partway', () => {
  let migrated: MigratedStore;
  let proxy: TcpProxy;
  let viaProxy: ReturnType<typeof kyselyVia>;

  beforeAll(async () => {
    migrated = await withMigratedStore();
    proxy = await TcpProxy.start({ host: TEST_PG_HOST, port: TEST_PG_PORT });
    // Not openControlStore: its pool has no error listener on checked-out clients (reported to the store owner).
    viaProxy = kyselyVia(proxy.port, migrated.database.name);
  });

  afterAll(async () => {
    await viaProxy?.close();
    await proxy?.close();
    await migrated?.cleanup();
  });

  async function counts(requestPrefix: string): Promise<{ total: number; distinct: number }> {
    const { rows } = await sql<{ total: number; distinct: number }>`
      select count(*)::int as total, count(distinct id)::int as distinct from audit_entries where request_id like ${requestPrefix + '%'}`.execute(migrated.store.db);
    return rows[0]!;
  }

  for (const mode of ['strict', 'buffered'] as const) {
    it(`${mode}: N entries written across a cut and a restore are stored exactly once`, async () => {
      const spool = await tempSpoolDir();
      const logger = recordingLogger();
      const writer = new AuditWriter({
        db: viaProxy.db,
        // As in production on PostgreSQL: fresh batches by COPY, the spool replayed by INSERT … ON CONFLICT.
        copyIn: viaProxy.copyIn,
        config: auditConfig({ durability_mode: mode, batch_size: 50, flush_interval_ms: 20, spool: { dir: spool.dir } }),
        logger,
        insertTimeoutMs: 2_000,
      });
      await writer.start();
      const startedAt = new Date();
      const N = 1_500;
      const group = 25;
      const prefix = `loss-${mode}-`;
      try {
        for (let i = 0; i < N; i += group) {
          if (i === 450) proxy.cut();
          if (i === 1_050) proxy.restore();
          const writes: Promise<void>[] = [];
          for (let j = i; j < Math.min(N, i + group); j++) writes.push(writer.write(makeEntry({ request_id: `${prefix}${j}` })));
          // Every write must be accepted: PostgreSQL is down, but the spool is there.
          await Promise.all(writes);
          await sleep(5);
        }
        await writer.flush();
        await waitFor(async () => writer.stats().spooled_entries === 0 && (await counts(prefix)).total >= N, 20_000, 'the spool to drain into PostgreSQL');
        const stats = writer.stats();
        // The cut must really have sent entries through the spool, or this test proves nothing.
        expect(stats.replayed).toBeGreaterThan(0);
        expect(stats.failed).toBe(0);
        expect(logger.records.some((r) => r.msg?.includes('unreachable'))).toBe(true);
      } finally {
        proxy.restore();
        await writer.close();
        await spool.remove();
      }
      expect(await counts(prefix)).toEqual({ total: N, distinct: N });
      // Failed attempts, spooled batches and their replays leave intact seal chains (docs/decisions/0024).
      const report = await verifyAudit(migrated.store.db, { from: startedAt, to: new Date(Date.now() + 1_000) });
      expect(report.problems).toEqual([]);
      expect(report.rows_checked).toBeGreaterThanOrEqual(N);
    });
  }
});
