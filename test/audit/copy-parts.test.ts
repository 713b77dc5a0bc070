// Audit batches copied in parts, in one transaction, straight into their day's partition: the parts' bytes, atomicity and the connection after a failure, which tables a batch may be copied into, and the fallback when a partition changes under the writer.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { AUDIT_COPY_BINARY_STATEMENT, auditBinaryBatch, binaryParts } from '../../src/audit/copy-binary.js';
import { AuditCopyTargets } from '../../src/audit/copy-target.js';
import { AUDIT_FIELDS, type AuditEntry } from '../../src/audit/entry.js';
import { AUDIT_COPY_PART_ROWS, copySealed } from '../../src/audit/insert.js';
import { createDayPartition, dayPartitionName, dayStart } from '../../src/audit/partitions.js';
import { SealChain } from '../../src/audit/seal.js';
import { verifyAudit } from '../../src/audit/verify.js';
import { copyTexts, type CopyIn, type CopyPart } from '../../src/store/copy.js';
import { type MigratedStore, TEST_PG_PORT } from '../support/pg.js';
import { countAuditLike, kyselyVia, makeEntry, migratedStoreForFile } from './support.js';

let migrated: MigratedStore;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let db: Kysely<any>;
let copyIn: CopyIn;
migratedStoreForFile((m) => {
  migrated = m;
  db = m.store.db;
  copyIn = m.store.copyIn!;
});

const DAY = 86_400_000;
const HEADER_BYTES = 19;
const TRAILER = Buffer.from([0xff, 0xff]);

/** A CopyIn that records the statements of each call, over the real one. */
function recording(inner: CopyIn): { copyIn: CopyIn; statements: string[][] } {
  const statements: string[][] = [];
  return {
    statements,
    copyIn: (parts, timeoutMs, after) => {
      statements.push(parts.map((p) => p.statement));
      return inner(parts, timeoutMs, after);
    },
  };
}

const entries = (prefix: string, n: number, base = Date.now()): AuditEntry[] =>
  Array.from({ length: n }, (_, i) => makeEntry({ request_id: `${prefix}${i}`, ts: new Date(base + i).toISOString() }));

describe('binaryParts', () => {
  it('splits a batch into valid COPY files of at most maxRows rows, evenly, every tuple once and in order (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 25 }), (n, maxRows) => {
        const batch = auditBinaryBatch(entries('parts-', n, 1_700_000_000_000))!;
        const parts = binaryParts(batch, maxRows);
        if (n <= maxRows) expect(parts).toEqual([batch.bytes]);
        expect(parts.length).toBe(Math.ceil(n / maxRows));
        const header = batch.bytes.subarray(0, HEADER_BYTES);
        const bodies = parts.map((p) => {
          expect(p.subarray(0, HEADER_BYTES).equals(header)).toBe(true);
          expect(p.subarray(p.length - 2).equals(TRAILER)).toBe(true);
          return p.subarray(HEADER_BYTES, p.length - 2);
        });
        expect(Buffer.concat(bodies).equals(Buffer.concat(batch.tuples))).toBe(true);
        // Each part's rows: count the tuples its body holds by walking the tuples in order.
        let t = 0;
        const sizes = bodies.map((body) => {
          let k = 0;
          for (let at = 0; at < body.length; k++) at += batch.tuples[t + k]!.length;
          t += k;
          return k;
        });
        expect(Math.max(...sizes)).toBeLessThanOrEqual(maxRows);
        expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
      }),
      { numRuns: 200 },
    );
  });

  it('keeps the batch time range the encoder saw', () => {
    const batch = auditBinaryBatch([...entries('range-a-', 3, 5_000), ...entries('range-b-', 2, 1_000)])!;
    expect([batch.minMs, batch.maxMs]).toEqual([1_000, 5_002]);
  });
});

describe('copyTexts', () => {
  const part = (statement: string): CopyPart => ({ statement, data: '' });
  it('one part carries `after` in its own implicit transaction; several open and commit one explicit transaction', () => {
    expect(copyTexts([part('copy a')])).toEqual(['copy a']);
    expect(copyTexts([part('copy a')], 'insert s')).toEqual(['copy a; insert s']);
    expect(copyTexts([part('copy a'), part('copy b'), part('copy c')], 'insert s')).toEqual(['begin; copy a', 'copy b', 'copy c; insert s; commit']);
    expect(copyTexts([part('copy a'), part('copy b')])).toEqual(['begin; copy a', 'copy b; commit']);
  });
});

describe('a batch in parts, in one transaction', () => {
  it('stores every part or none: a failing last part, or a failing statement after it, leaves nothing, and the one connection is usable at once', async () => {
    const one = kyselyVia(TEST_PG_PORT, migrated.database.name, { max: 1 });
    try {
      const stored = entries('atom-old-', 2);
      const batchOf = (list: AuditEntry[]): Buffer => auditBinaryBatch(list)!.bytes;
      const copy = (data: Buffer): CopyPart => ({ statement: AUDIT_COPY_BINARY_STATEMENT, data });
      expect(await one.copyIn([copy(batchOf(stored))], 10_000)).toBe(2);
      // The third part repeats a stored entry: the first two parts were copied in the same transaction.
      const fresh = entries('atom-new-', 6);
      await expect(one.copyIn([copy(batchOf(fresh.slice(0, 3))), copy(batchOf(fresh.slice(3))), copy(batchOf([stored[0]!]))], 10_000)).rejects.toMatchObject({ code: '23505' });
      expect((await countAuditLike(db, 'atom-new-')).total).toBe(0);
      // A statement after the last part fails: the parts are rolled back with it.
      await expect(one.copyIn([copy(batchOf(fresh.slice(0, 3))), copy(batchOf(fresh.slice(3)))], 10_000, 'select 1 / 0')).rejects.toMatchObject({ code: '22012' });
      expect((await countAuditLike(db, 'atom-new-')).total).toBe(0);
      // The same (only) connection, not left in an aborted transaction: the parts now commit.
      expect(await one.copyIn([copy(batchOf(fresh.slice(0, 3))), copy(batchOf(fresh.slice(3)))], 10_000)).toBe(6);
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from audit_entries where request_id like 'atom-new-%'`.execute(one.db);
      expect(rows[0]!.n).toBe(6);
    } finally {
      await one.close();
    }
  });

  it('a batch of more than AUDIT_COPY_PART_ROWS rows is copied in parts under one seal that verifies', async () => {
    const base = Date.now();
    const batch = entries('sealed-parts-', AUDIT_COPY_PART_ROWS * 2 + 7, base);
    const rec = recording(copyIn);
    const chain = new SealChain();
    const { stored, seal } = await copySealed(db, rec.copyIn, batch, 10_000, chain, { targets: new AuditCopyTargets(db) });
    expect(rec.statements.map((s) => s.length)).toEqual([3]);
    expect(stored).toBe(batch.length);
    chain.stored(seal!);
    const report = await verifyAudit(db, { from: new Date(base - 1), to: new Date(base + batch.length + 1) });
    expect(report.problems).toEqual([]);
    expect(report.rows_checked).toBe(batch.length);
  });
});

describe('where a batch is copied', () => {
  it("a batch of one day goes straight into that day's partition, without a column list when the columns are AUDIT_FIELDS in order", async () => {
    const targets = new AuditCopyTargets(db);
    const now = Date.now();
    const target = await targets.targetFor(now, now);
    const name = `public.${dayPartitionName(new Date(now))}`;
    expect(target).toMatchObject({ partition: name, statement: `copy ${name} from stdin with (format binary)` });
    const rec = recording(copyIn);
    const batch = entries('direct-', 5, now);
    expect((await copySealed(db, rec.copyIn, batch, 10_000, undefined, { targets })).stored).toBe(5);
    expect(rec.statements).toEqual([[target.statement]]);
    const { rows } = await sql<{ t: string }>`select tableoid::regclass::text as t from audit_entries where request_id like 'direct-%'`.execute(db);
    expect(new Set(rows.map((r) => r.t))).toEqual(new Set([dayPartitionName(new Date(now))]));
  });

  it('a batch spanning midnight, a day without a partition, or a table of that name that is not a partition goes through the parent', async () => {
    const targets = new AuditCopyTargets(db);
    // Both days have partitions: the batch is still one COPY through the parent, which routes each row.
    const midnight = dayStart(new Date(Date.UTC(new Date().getUTCFullYear() + 9, 0, 11))).getTime();
    for (const d of [midnight - DAY, midnight]) await createDayPartition(db, new Date(d));
    expect((await targets.targetFor(midnight - DAY, midnight - 1)).partition).toBe(`public.${dayPartitionName(new Date(midnight - DAY))}`);
    expect((await targets.targetFor(midnight - 1, midnight + 1)).partition).toBeNull();
    const rec = recording(copyIn);
    const spanning = entries('midnight-', 4, midnight - 2);
    expect((await copySealed(db, rec.copyIn, spanning, 10_000, new SealChain(), { targets })).stored).toBe(4);
    expect(rec.statements).toEqual([[AUDIT_COPY_BINARY_STATEMENT]]);
    const far = dayStart(new Date(Date.UTC(new Date().getUTCFullYear() + 9, 2, 3))).getTime();
    expect((await targets.targetFor(far, far + 10)).partition).toBeNull();
    // A lookalike table, never attached: rows copied into it would be lost to the audit log.
    const lookalike = dayPartitionName(new Date(far + DAY));
    await sql`create table ${sql.id(lookalike)} (like audit_entries)`.execute(db);
    try {
      expect(await targets.targetFor(far + DAY, far + DAY + 10)).toEqual({ partition: null, statement: AUDIT_COPY_BINARY_STATEMENT, guard: null });
    } finally {
      await sql`drop table ${sql.id(lookalike)}`.execute(db);
    }
  });

  it('a partition whose columns are in another order is copied into with the column list, and stores the same rows', async () => {
    const day = dayStart(new Date(Date.UTC(new Date().getUTCFullYear() + 9, 5, 6)));
    const name = dayPartitionName(day);
    const reversed = [...AUDIT_FIELDS].reverse();
    const { rows: defs } = await sql<{ col: string; def: string }>`select a.attname as col, format_type(a.atttypid, a.atttypmod) || case when a.attnotnull then ' not null' else '' end as def
        from pg_attribute a where a.attrelid = 'audit_entries'::regclass and a.attnum > 0 and not a.attisdropped`.execute(db);
    const typeOf = new Map(defs.map((d) => [d.col, d.def]));
    const { rows: checks } = await sql<{ name: string; def: string }>`select conname as name, pg_get_constraintdef(oid) as def from pg_constraint
        where conrelid = 'audit_entries'::regclass and contype = 'c'`.execute(db);
    const columns = reversed.map((c) => `${c} ${typeOf.get(c)}`);
    await sql.raw(`create table ${name} (${[...columns, ...checks.map((c) => `constraint ${c.name} ${c.def}`)].join(', ')})`).execute(db);
    await sql`alter table audit_entries attach partition ${sql.id(name)} for values from (${sql.lit(day.toISOString())}) to (${sql.lit(new Date(day.getTime() + DAY).toISOString())})`.execute(db);
    const targets = new AuditCopyTargets(db);
    const target = await targets.targetFor(day.getTime(), day.getTime() + 5);
    expect(target).toMatchObject({ partition: `public.${name}`, statement: `copy public.${name} (${AUDIT_FIELDS.join(', ')}) from stdin with (format binary)` });
    const batch = entries('reordered-', 4, day.getTime());
    expect((await copySealed(db, copyIn, batch, 10_000, undefined, { targets })).stored).toBe(4);
    const { rows } = await sql<{ request_id: string; ts: Date }>`select request_id, ts from audit_entries where request_id like 'reordered-%' order by ts`.execute(db);
    expect(rows.map((r) => [r.request_id, r.ts.getTime()])).toEqual(batch.map((e) => [e.request_id, Date.parse(e.ts)]));
  });

  it('a partition dropped or detached after it was looked up: the batch goes through the parent, which stores it, and the day is looked up again', async () => {
    const day = dayStart(new Date(Date.UTC(new Date().getUTCFullYear() + 9, 7, 8)));
    const name = dayPartitionName(day);
    expect(await createDayPartition(db, day)).toBe(true);
    const targets = new AuditCopyTargets(db);
    expect((await targets.targetFor(day.getTime(), day.getTime())).partition).toBe(`public.${name}`);
    await sql`drop table ${sql.id(name)}`.execute(db);
    const rec = recording(copyIn);
    const dropped = entries('stale-dropped-', 3, day.getTime());
    // The parent then meets a day without a partition, creates it and copies again.
    expect((await copySealed(db, rec.copyIn, dropped, 10_000, new SealChain(), { targets })).stored).toBe(3);
    expect(rec.statements).toEqual([[`copy public.${name} from stdin with (format binary)`], [AUDIT_COPY_BINARY_STATEMENT], [AUDIT_COPY_BINARY_STATEMENT]]);
    expect((await countAuditLike(db, 'stale-dropped-')).total).toBe(3);

    // Detached, the table still exists and takes rows: the guard after the COPY rolls them back within the minute the
    // day's answer is kept, and the parent, finding no partition for the day (the table's name is taken), refuses.
    // The day's partition is the one the parent created above.
    const sameMinute = new AuditCopyTargets(db);
    expect((await sameMinute.targetFor(day.getTime(), day.getTime())).partition).toBe(`public.${name}`);
    await sql`alter table audit_entries detach partition ${sql.id(name)}`.execute(db);
    const detached = entries('stale-detached-', 3, day.getTime());
    const rec2 = recording(copyIn);
    await expect(copySealed(db, rec2.copyIn, detached, 10_000, new SealChain(), { targets: sameMinute })).rejects.toMatchObject({ code: '23514' });
    expect(rec2.statements[0]).toEqual([`copy public.${name} from stdin with (format binary)`]);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.id(name)} where request_id like 'stale-detached-%'`.execute(db);
    expect(rows[0]!.n).toBe(0);
    expect((await countAuditLike(db, 'stale-detached-')).total).toBe(0);
    // Looked up again, the day has no partition.
    expect((await sameMinute.targetFor(day.getTime(), day.getTime())).partition).toBeNull();
    await sql`drop table ${sql.id(name)}`.execute(db);
  });

  it("rows a partition's own CHECK constraint refuses fail once: not taken for a stale partition and copied again through the parent", async () => {
    const day = dayStart(new Date(Date.UTC(new Date().getUTCFullYear() + 9, 9, 10)));
    const name = dayPartitionName(day);
    expect(await createDayPartition(db, day)).toBe(true);
    try {
      await sql`alter table ${sql.id(name)} add constraint gh_no_ok_status check (status <> 200)`.execute(db);
      const targets = new AuditCopyTargets(db);
      const rec = recording(copyIn);
      await expect(copySealed(db, rec.copyIn, entries('checked-', 3, day.getTime()), 10_000, new SealChain(), { targets }))
        .rejects.toMatchObject({ code: '23514', constraint: 'gh_no_ok_status' });
      expect(rec.statements).toEqual([[`copy public.${name} from stdin with (format binary)`]]);
      expect((await countAuditLike(db, 'checked-')).total).toBe(0);
    } finally {
      await sql`drop table ${sql.id(name)}`.execute(db);
    }
  });
});

describe('where a batch is copied: what the catalog must say', () => {
  it('a partition being detached (DETACH … CONCURRENTLY cut after its first step) is not copied into, and keeps no rows', async () => {
    const day = dayStart(new Date(Date.UTC(new Date().getUTCFullYear() + 9, 9, 10)));
    const name = dayPartitionName(day);
    expect(await createDayPartition(db, day)).toBe(true);
    // A transaction holding a lock on the parent makes the detach wait in its second step; cancelled there, the partition
    // stays "detach pending".
    const holder = kyselyVia(TEST_PG_PORT, migrated.database.name, { max: 1 });
    const detacher = kyselyVia(TEST_PG_PORT, migrated.database.name, { max: 1 });
    try {
      await holder.db.transaction().setIsolationLevel('repeatable read').execute(async (trx) => {
        await sql`select 1 from audit_entries limit 1`.execute(trx);
        const { pid } = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(detacher.db)).rows[0]!;
        const detaching = sql`alter table audit_entries detach partition ${sql.id(name)} concurrently`.execute(detacher.db).catch((e: unknown) => e);
        await waitForPending(name);
        await sql`select pg_cancel_backend(${pid})`.execute(db);
        expect(await detaching).toMatchObject({ code: '57014' });
      });
      expect(await isPending(name)).toBe(true);
      const targets = new AuditCopyTargets(db);
      expect((await targets.targetFor(day.getTime(), day.getTime())).partition).toBeNull();
      // Through the parent, whose routing finds no partition for the day: refused, nothing kept anywhere.
      await expect(copySealed(db, copyIn, entries('pending-', 3, day.getTime()), 10_000, new SealChain(), { targets })).rejects.toMatchObject({ code: '23514' });
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.id(name)}`.execute(db);
      expect(rows[0]!.n).toBe(0);
    } finally {
      await holder.close();
      await detacher.close();
      await sql`alter table audit_entries detach partition ${sql.id(name)} finalize`.execute(db).catch(() => undefined);
      await sql`drop table if exists ${sql.id(name)}`.execute(db);
    }
  });

  it('a day partitioned further (not a plain table) is not copied into by name: the parent routes into its sub-partition', async () => {
    const day = dayStart(new Date(Date.UTC(new Date().getUTCFullYear() + 9, 10, 12)));
    const name = dayPartitionName(day);
    const to = new Date(day.getTime() + DAY).toISOString();
    await sql`create table ${sql.id(name)} partition of audit_entries for values from (${sql.lit(day.toISOString())}) to (${sql.lit(to)}) partition by range (ts)`.execute(db);
    await sql`create table ${sql.id(`${name}_all`)} partition of ${sql.id(name)} for values from (${sql.lit(day.toISOString())}) to (${sql.lit(to)})`.execute(db);
    try {
      const targets = new AuditCopyTargets(db);
      expect((await targets.targetFor(day.getTime(), day.getTime() + 5)).partition).toBeNull();
      const rec = recording(copyIn);
      expect((await copySealed(db, rec.copyIn, entries('subpartitioned-', 3, day.getTime()), 10_000, new SealChain(), { targets })).stored).toBe(3);
      expect(rec.statements).toEqual([[AUDIT_COPY_BINARY_STATEMENT]]);
      const { rows } = await sql<{ t: string }>`select distinct tableoid::regclass::text as t from audit_entries where request_id like 'subpartitioned-%'`.execute(db);
      expect(rows.map((r) => r.t)).toEqual([`${name}_all`]);
    } finally {
      await sql`drop table ${sql.id(name)}`.execute(db);
    }
  });

  it('a role that may insert into audit_entries but not into the partition copies through the parent, and stores', async () => {
    const role = `gh_copy_${Math.random().toString(36).slice(2, 8)}`;
    await sql.raw(`create role ${role} login`).execute(db);
    const via = kyselyVia(TEST_PG_PORT, migrated.database.name, { max: 1, user: role });
    try {
      await sql.raw(`grant usage on schema public to ${role}; grant select, insert on audit_entries, audit_seals to ${role}`).execute(db);
      const now = Date.now();
      const name = dayPartitionName(new Date(now));
      await sql.raw(`revoke insert on ${name} from ${role}`).execute(db);
      const targets = new AuditCopyTargets(via.db);
      expect((await targets.targetFor(now, now)).partition).toBeNull();
      const rec = recording(via.copyIn);
      expect((await copySealed(via.db, rec.copyIn, entries('role-', 3, now), 10_000, undefined, { targets })).stored).toBe(3);
      expect(rec.statements).toEqual([[AUDIT_COPY_BINARY_STATEMENT]]);
      expect((await countAuditLike(db, 'role-')).total).toBe(3);
    } finally {
      await via.close();
      await sql.raw(`drop owned by ${role}; drop role ${role}`).execute(db);
    }
  });

  it('a table of the same name earlier on the search_path takes no rows: the partition is named by its schema', async () => {
    const one = kyselyVia(TEST_PG_PORT, migrated.database.name, { max: 1 });
    const now = Date.now();
    const name = dayPartitionName(new Date(now));
    await sql.raw(`create schema gh_shadow; create table gh_shadow.${name} (like audit_entries)`).execute(db);
    try {
      await sql.raw(`set search_path = gh_shadow, public`).execute(one.db);
      const targets = new AuditCopyTargets(one.db);
      const rec = recording(one.copyIn);
      expect((await copySealed(one.db, rec.copyIn, entries('shadowed-', 3, now), 10_000, undefined, { targets })).stored).toBe(3);
      expect(rec.statements).toEqual([[`copy public.${name} from stdin with (format binary)`]]);
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.id('gh_shadow', name)}`.execute(db);
      expect(rows[0]!.n).toBe(0);
      expect((await countAuditLike(db, 'shadowed-')).total).toBe(3);
    } finally {
      await one.close();
      await sql.raw('drop schema gh_shadow cascade').execute(db);
    }
  });
});

async function isPending(name: string): Promise<boolean> {
  const { rows } = await sql<{ p: boolean }>`select i.inhdetachpending as p from pg_inherits i where i.inhrelid = to_regclass(${name})`.execute(db);
  return rows[0]?.p === true;
}

async function waitForPending(name: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await isPending(name)) {
      // Past its first step (committed), now waiting for the open snapshot.
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
        where datname = current_database() and query like 'alter table audit_entries detach partition%' and wait_event_type = 'Lock'`.execute(db);
      if (rows[0]!.n > 0) return;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  const { rows } = await sql<{ q: string; w: string | null; s: string }>`select query as q, wait_event_type || ':' || wait_event as w, state as s from pg_stat_activity where datname = current_database()`.execute(db);
  throw new Error(`${name} never became detach-pending (pending ${await isPending(name)}): ${JSON.stringify(rows)}`);
}
