// Migration 0021: seal format 2 (docs/decisions/0031): rows copied in binary and digested as their binary tuples, the batch's ids stored packed (16 bytes each) instead of as uuid[].
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Catalog work only (no table rewrite): a column with a constant default and a dropped NOT NULL change no stored row.
 * Seals stored before keep format 1 (ids as uuid[], digests of the COPY text line); verify reads both.
 */
async function up(db: AnyDb): Promise<void> {
  await sql`alter table audit_seals add column format smallint not null default 1`.execute(db);
  await sql`alter table audit_seals alter column ids drop not null`.execute(db);
  await sql`alter table audit_seals add column id_bytes bytea`.execute(db);
  // Random bytes: never compressible, kept out of line like digests.
  await sql`alter table audit_seals alter column id_bytes set storage external`.execute(db);
  await sql`alter table audit_seals add constraint audit_seals_format_ids check (
      (format = 1 and ids is not null and id_bytes is null) or (format = 2 and ids is null and id_bytes is not null))`.execute(db);
}

/**
 * Back to format 1's columns: a format-2 seal's ids are unpacked into uuid[]. Its digests and hash stay those of format
 * 2, which the verifier of the version before does not know: it reports such seals as altered.
 */
async function down(db: AnyDb): Promise<void> {
  await sql`alter table audit_seals drop constraint audit_seals_format_ids`.execute(db);
  await sql`update audit_seals set ids = array(
      select encode(substr(id_bytes, i * 16 + 1, 16), 'hex')::uuid from generate_series(0, length(id_bytes) / 16 - 1) as i order by i)
    where format = 2`.execute(db);
  await sql`alter table audit_seals alter column ids set not null`.execute(db);
  await sql`alter table audit_seals drop column id_bytes`.execute(db);
  await sql`alter table audit_seals drop column format`.execute(db);
}

export const auditSealFormat: Migration = { up, down };
