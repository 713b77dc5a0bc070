// Spool corruption and refusal: damaged records are reported and skipped, valid ones kept; strict mode with no sink refuses with audit_unavailable.
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { AuditWriter } from '../../src/audit/writer.js';
import { AuditSpool, decodeSegment, encodeRecord, RECORD_HEADER_BYTES } from '../../src/audit/spool.js';
import { isGatehouseError } from '../../src/errors/registry.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { auditConfig, kyselyVia, makeEntry, recordingLogger, tempSpoolDir, waitFor, TcpProxy } from './support.js';
import type { AuditEntry } from '../../src/audit/entry.js';

let migrated: MigratedStore;
beforeAll(async () => {
  migrated = await withMigratedStore();
});
afterAll(async () => {
  await migrated?.cleanup();
});

describe('corrupted spool segments', () => {
  it('decodes every split of a record as truncated, never as an entry', () => {
    const rec = encodeRecord(makeEntry());
    for (let cut = 1; cut < rec.length; cut++) {
      const d = decodeSegment(rec.subarray(0, cut));
      expect(d.entries).toEqual([]);
      expect(d.corrupt).toHaveLength(1);
    }
    expect(decodeSegment(rec).entries).toHaveLength(1);
  });

  it('a bad checksum and a truncated tail are reported and skipped; the valid entries before and after reach PostgreSQL', async () => {
    const spool = await tempSpoolDir();
    const logger = recordingLogger();
    try {
      const first = Array.from({ length: 10 }, (_, i) => makeEntry({ request_id: `corrupt-a-${i}` }));
      const second = Array.from({ length: 4 }, (_, i) => makeEntry({ request_id: `corrupt-b-${i}` }));
      const records = first.map(encodeRecord);
      // Flip one payload byte of record 4: its checksum no longer matches.
      records[4]!.writeUInt8(records[4]!.readUInt8(RECORD_HEADER_BYTES + 10) ^ 0xff, RECORD_HEADER_BYTES + 10);
      await writeFile(path.join(spool.dir, 'segment-000000000001.spool'), Buffer.concat(records));
      // Second segment: three whole records, then the fourth torn in half (a crash mid-write).
      const torn = encodeRecord(second[3]!);
      await writeFile(path.join(spool.dir, 'segment-000000000002.spool'), Buffer.concat([...second.slice(0, 3).map(encodeRecord), torn.subarray(0, torn.length >> 1)]));

      const writer = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: 'buffered', spool: { dir: spool.dir } }), logger });
      await writer.start();
      await waitFor(() => writer.stats().spooled_entries === 0, 10_000, 'replay');
      expect(writer.stats().spool_corrupt_records).toBe(2);
      await writer.close();

      const reports = logger.records.filter((r) => r.msg?.includes('corrupted'));
      expect(reports.map((r) => (r.obj as { reason: string }).reason).sort()).toEqual(['bad_checksum', 'truncated']);
      const { rows } = await sql<{ request_id: string }>`select request_id from audit_entries where request_id like 'corrupt-%'`.execute(migrated.store.db);
      const expected = [...first.filter((_, i) => i !== 4), ...second.slice(0, 3)].map((e) => e.request_id).sort();
      expect(rows.map((r) => r.request_id).sort()).toEqual(expected);
    } finally {
      await spool.remove();
    }
  });

  it('rotates segments at segment_bytes, refuses beyond max_bytes and frees space after replay', async () => {
    const spool = await tempSpoolDir();
    try {
      const size = encodeRecord(makeEntry()).length;
      const s = new AuditSpool({ dir: spool.dir, maxBytes: size * 10 + 10, segmentBytes: size * 3 + 1, logger: recordingLogger() });
      await s.append(Array.from({ length: 10 }, () => makeEntry()));
      expect(s.entries).toBe(10);
      expect(s.segmentCount).toBe(4);
      await expect(s.append([makeEntry()])).rejects.toMatchObject({ code: 'spool_full' });
      expect(s.available).toBe(false);
      const seen: AuditEntry[] = [];
      expect(await s.replay(async (b) => void seen.push(...b), 4)).toBe(10);
      expect(s.entries).toBe(0);
      expect(s.bytes).toBe(0);
      await s.append([makeEntry()]);
      await s.close();
      // Replayed in append order.
      expect(seen.map((e) => e.ts)).toEqual([...seen.map((e) => e.ts)].sort());
    } finally {
      await spool.remove();
    }
  });
});

describe('no sink available', () => {
  let proxy: TcpProxy;
  let via: ReturnType<typeof kyselyVia>;
  beforeAll(async () => {
    proxy = await TcpProxy.start({ host: '127.0.0.1', port: 5432 });
    via = kyselyVia(proxy.port, migrated.database.name, { connectTimeoutMs: 500 });
    proxy.cut();
  });
  afterAll(async () => {
    await via?.close();
    await proxy?.close();
  });

  it('strict: PostgreSQL unreachable and spool full → write rejects with audit_unavailable (503), health and admit report it', async () => {
    const spool = await tempSpoolDir();
    const writer = new AuditWriter({ db: via.db, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir, max_bytes: 100, segment_bytes: 100 } }), logger: recordingLogger() });
    try {
      await writer.start();
      const error = await writer.write(makeEntry()).catch((e: unknown) => e);
      expect(isGatehouseError(error) && error.code).toBe('audit_unavailable');
      expect(isGatehouseError(error) && error.spec.http).toBe(503);
      expect(writer.health().ok).toBe(false);
      expect(() => writer.admit()).toThrow(expect.objectContaining({ code: 'audit_unavailable' }));
      expect(writer.stats().failed).toBe(1);
    } finally {
      await writer.close();
      await spool.remove();
    }
  });

  it('strict: PostgreSQL unreachable and the spool directory unusable → audit_unavailable', async () => {
    const spool = await tempSpoolDir();
    const file = path.join(spool.dir, 'not-a-dir');
    await writeFile(file, 'x');
    const writer = new AuditWriter({ db: via.db, config: auditConfig({ durability_mode: 'strict', spool: { dir: path.join(file, 'spool') } }), logger: recordingLogger() });
    try {
      await writer.start();
      await expect(writer.write(makeEntry())).rejects.toMatchObject({ code: 'audit_unavailable' });
      expect(writer.health()).toMatchObject({ ok: false });
    } finally {
      await writer.close();
      await spool.remove();
    }
  });

  it('strict: PostgreSQL unreachable but spool fine → durable in the spool (fsynced file holds the entry)', async () => {
    const spool = await tempSpoolDir();
    const writer = new AuditWriter({ db: via.db, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir } }), logger: recordingLogger() });
    try {
      await writer.start();
      const entry = makeEntry();
      await writer.write(entry);
      expect(writer.health().ok).toBe(true);
      const name = (await readdir(spool.dir)).find((n) => n.endsWith('.spool'))!;
      expect(decodeSegment(await readFile(path.join(spool.dir, name))).entries.map((e) => e.id)).toEqual([entry.id]);
    } finally {
      await writer.close();
      await spool.remove();
    }
  });

  it('buffered: buffer and spool full → fail_closed refuses, fail_open drops and counts; readiness fails', async () => {
    for (const strictness of ['fail_closed', 'fail_open'] as const) {
      const spool = await tempSpoolDir();
      await mkdir(spool.dir, { recursive: true });
      const writer = new AuditWriter({
        db: via.db,
        config: auditConfig({ durability_mode: 'buffered', strictness, buffer_max_entries: 3, batch_size: 100, flush_interval_ms: 60_000, spool: { dir: spool.dir, max_bytes: 100, segment_bytes: 100 } }),
        logger: recordingLogger(),
      });
      try {
        await writer.start();
        for (let i = 0; i < 3; i++) await writer.write(makeEntry());
        const fourth = writer.write(makeEntry());
        if (strictness === 'fail_closed') {
          await expect(fourth).rejects.toMatchObject({ code: 'audit_unavailable' });
          expect(() => writer.admit()).toThrow();
        } else {
          await fourth;
          expect(writer.stats().dropped).toBe(1);
          expect(() => writer.admit()).not.toThrow();
        }
        expect(writer.health().ok).toBe(false);
      } finally {
        await writer.close();
        await spool.remove();
      }
    }
  });
});
