// The write-intent journal: open intents survive a stop and come back once, completed ones never; a torn tail is skipped; a strict writer that cannot record an intent refuses the write.
import { appendFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sql } from 'kysely';
import { IntentJournal, OUTCOME_UNKNOWN } from '../../src/audit/intents.js';
import { AuditWriter } from '../../src/audit/writer.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { auditConfig, makeEntry, recordingLogger, tempSpoolDir, waitFor } from './support.js';

let migrated: MigratedStore;
beforeAll(async () => {
  migrated = await withMigratedStore();
});
afterAll(async () => migrated?.cleanup());

it('returns exactly the intents never completed, survives a torn tail, and leaves no file once all are done', async () => {
  const spool = await tempSpoolDir();
  try {
    const journal = new IntentJournal({ dir: spool.dir, logger: recordingLogger() });
    expect(await journal.recover()).toEqual([]);
    const entries = Array.from({ length: 6 }, (_, i) => makeEntry({ request_id: `intent-${i}`, method: 'POST', decision: 'allow' }));
    await Promise.all(entries.map((e) => journal.record(e)));
    for (const e of entries.slice(0, 4)) journal.complete(e.id);
    await journal.close();
    // A crash mid-append leaves half a record at the end.
    const [file] = (await readdir(spool.dir)).filter((f) => f.startsWith('intents-'));
    await appendFile(path.join(spool.dir, file!), Buffer.from([0, 0, 1, 0, 9, 9]));

    const next = new IntentJournal({ dir: spool.dir, logger: recordingLogger() });
    const open = await next.recover();
    expect(open.map((e) => e.request_id)).toEqual(['intent-4', 'intent-5']);
    await next.discardRecovered();
    expect((await readdir(spool.dir)).filter((f) => f.startsWith('intents-'))).toEqual([]);
    await next.record(makeEntry({ request_id: 'intent-6' }));
    next.complete(open[0]!.id); // not this journal's: ignored
    await next.close();
    expect((await readdir(spool.dir)).filter((f) => f.startsWith('intents-'))).toHaveLength(1);
  } finally {
    await spool.remove();
  }
});

it('a writer turns the previous run\'s open intents into outcome_unknown entries once; a written entry completes its intent', async () => {
  const spool = await tempSpoolDir();
  try {
    const first = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir } }), logger: recordingLogger() });
    await first.start();
    const finished = makeEntry({ request_id: 'intent-finished', method: 'POST', decision: 'allow', status: 0, upstream_status: null });
    const cut = makeEntry({ request_id: 'intent-cut', method: 'PUT', decision: 'allow', status: 0, upstream_status: null });
    await first.recordIntent(finished);
    await first.recordIntent(cut);
    await first.write({ ...finished, status: 201 });
    await first.close();

    const second = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir } }), logger: recordingLogger() });
    await second.start();
    await waitFor(() => second.stats().spooled_entries === 0, 10_000, 'replay');
    await second.close();
    const third = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: 'strict', spool: { dir: spool.dir } }), logger: recordingLogger() });
    await third.start();
    await third.close();

    const { rows } = await sql<{ request_id: string; status: number; error_code: string | null }>`select request_id, status, error_code from audit_entries where request_id like 'intent-%' order by request_id`.execute(migrated.store.db);
    expect(rows).toEqual([
      { request_id: 'intent-cut', status: 0, error_code: OUTCOME_UNKNOWN },
      { request_id: 'intent-finished', status: 201, error_code: null },
    ]);
  } finally {
    await spool.remove();
  }
});

it('strict: a write whose intent cannot be recorded is refused (audit_unavailable); buffered fail_open lets it go on', async () => {
  const spool = await tempSpoolDir();
  try {
    // The spool directory is a file: neither the spool nor the journal can exist.
    const notADir = path.join(spool.dir, 'file');
    await writeFile(notADir, 'x');
    const strict = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: 'strict', spool: { dir: notADir } }), logger: recordingLogger() });
    await strict.start();
    await expect(strict.recordIntent(makeEntry({ method: 'POST' }))).rejects.toMatchObject({ code: 'audit_unavailable' });
    await strict.close();
    const lenient = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: 'buffered', strictness: 'fail_open', spool: { dir: notADir } }), logger: recordingLogger() });
    await lenient.start();
    await expect(lenient.recordIntent(makeEntry({ method: 'POST' }))).resolves.toBeUndefined();
    await lenient.close();
  } finally {
    await spool.remove();
  }
});
