// Crash test (docs/audit.md "The 'exactly once' guarantees"): a process spools entries while PostgreSQL is unreachable and is SIGKILLed; a restarted writer delivers every entry once.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sql } from 'kysely';
import { AuditWriter } from '../../src/audit/writer.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { auditConfig, makeEntry, recordingLogger, tempSpoolDir, waitFor } from './support.js';
import { insertAuditEntries } from '../../src/audit/insert.js';
import { freePort } from '../support/ports.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

let migrated: MigratedStore;
beforeAll(async () => {
  migrated = await withMigratedStore();
});
afterAll(async () => {
  await migrated?.cleanup();
});

/** Runs the child until it has reported `count` durable entries, then SIGKILLs it. */
async function spoolInChildAndKill(spoolDir: string, count: number): Promise<string[]> {
  // node --import tsx, not the tsx CLI: SIGKILL must hit the process that writes, not a wrapper.
  const child = spawn(path.join(root, 'node_modules/.bin/node'), ['--import', 'tsx', path.join(here, 'fixtures/spool-child.ts'), spoolDir, String(await freePort()), String(count)], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ids: string[] = [];
  let buffered = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('child did not finish spooling')), 30_000);
    child.on('exit', (code) => reject(new Error(`child exited early (${code})`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        if (line === 'DONE') {
          clearTimeout(timer);
          resolve();
        } else ids.push(line);
      }
    });
  });
  child.removeAllListeners('exit');
  const exited = new Promise((r) => child.on('exit', r));
  child.kill('SIGKILL');
  await exited;
  return ids;
}

it('entries spooled by a SIGKILLed process arrive exactly once after restart, even after a partial replay', async () => {
  const spool = await tempSpoolDir();
  try {
    const ids = await spoolInChildAndKill(spool.dir, 300);
    expect(ids).toHaveLength(300);
    // Several segments (segment_bytes 4096 in the child) and the dead child's lock are left behind.
    const files = await readdir(spool.dir);
    expect(files.filter((f) => f.endsWith('.spool')).length).toBeGreaterThan(3);
    expect(files).toContain('spool.lock');

    // A crash mid-replay: part of the spool already reached PostgreSQL before the process died.
    const { AuditSpool } = await import('../../src/audit/spool.js');
    const peek = new AuditSpool({ dir: spool.dir, maxBytes: 1 << 30, segmentBytes: 4096, logger: recordingLogger() });
    const firstBatch: Parameters<typeof insertAuditEntries>[1][number][] = [];
    await peek.replay(async (batch) => {
      if (firstBatch.length === 0) {
        firstBatch.push(...batch);
        await insertAuditEntries(migrated.store.db, batch);
      }
      throw new Error('simulated crash mid-replay');
    }, 50).catch((error: unknown) => {
      if (!String(error).includes('simulated crash')) throw error;
    });
    await peek.close();
    expect(firstBatch.length).toBeGreaterThan(0);

    const writer = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir } }), logger: recordingLogger() });
    await writer.start();
    await waitFor(() => writer.stats().spooled_entries === 0, 15_000, 'replay after restart');
    // New writes keep working alongside.
    await writer.write(makeEntry({ request_id: 'crash-after-restart' }));
    await writer.close();

    const { rows } = await sql<{ id: string }>`select id::text as id from audit_entries where request_id like 'crash-%' order by request_id`.execute(migrated.store.db);
    const stored = rows.map((r) => r.id);
    expect(stored).toHaveLength(301);
    expect(new Set(stored).size).toBe(301);
    expect(new Set(stored)).toEqual(new Set([...ids, ...stored.filter((id) => !ids.includes(id))]));
    for (const id of ids) expect(stored).toContain(id);
    expect((await readdir(spool.dir)).filter((f) => f.endsWith('.spool'))).toEqual([]);
  } finally {
    await spool.remove();
  }
});
