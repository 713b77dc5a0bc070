// Migration 0023: seal format 3 (docs/decisions/0033): a seal stores a short locator per row and a hash of the rows' digests instead of their ids and full digests, so a batch's seal stays inline in its page.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

const FORMATS_0021 = sql`(format = 1 and ids is not null and id_bytes is null) or (format = 2 and ids is null and id_bytes is not null)`;

/**
 * Catalog work only: two nullable columns, a dropped NOT NULL, a storage parameter. The check that ties each format to
 * its columns is added NOT VALID and validated after, which reads the seals without blocking the writer's inserts.
 * `toast_tuple_target` at its maximum keeps a row of up to ≈ 8 kB in its page: a format-3 seal of 500 rows is ≈ 4.2 kB,
 * which the default (2 kB) would move out of line, costing PostgreSQL a TOAST insert per chunk.
 */
async function up(db: AnyDb): Promise<void> {
  await sql`alter table audit_seals add column locators bytea, add column rows_hash bytea`.execute(db);
  await sql`alter table audit_seals alter column digests drop not null`.execute(db);
  // Random bytes: never compressible.
  await sql`alter table audit_seals alter column locators set storage external`.execute(db);
  await sql`alter table audit_seals set (toast_tuple_target = 8160)`.execute(db);
  await sql`alter table audit_seals drop constraint audit_seals_format_ids`.execute(db);
  await sql`alter table audit_seals add constraint audit_seals_format_ids check (
      (format in (1, 2) and (${FORMATS_0021}) and digests is not null and locators is null and rows_hash is null)
      or (format = 3 and ids is null and id_bytes is null and digests is null and locators is not null and rows_hash is not null)) not valid`.execute(db);
  await sql`alter table audit_seals validate constraint audit_seals_format_ids`.execute(db);
}

/**
 * Back to 0021's columns. A format-3 seal names no ids, so it cannot become a seal of an earlier format: it is kept,
 * labelled format 2 with no ids and its locators as digests, which the verifier of the version before reports as an
 * altered seal (its ids do not match its row count) — the same as 0021's down does for format 2.
 */
async function down(db: AnyDb): Promise<void> {
  await sql`alter table audit_seals drop constraint audit_seals_format_ids`.execute(db);
  await sql`update audit_seals set format = 2, id_bytes = ''::bytea, digests = locators where format = 3`.execute(db);
  await sql`alter table audit_seals alter column digests set not null`.execute(db);
  await sql`alter table audit_seals drop column locators, drop column rows_hash`.execute(db);
  await sql`alter table audit_seals reset (toast_tuple_target)`.execute(db);
  await sql`alter table audit_seals add constraint audit_seals_format_ids check (${FORMATS_0021})`.execute(db);
}

export const auditSealLocators: Migration = { up, down };
