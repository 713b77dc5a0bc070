// Migration 0013: catalog changes may be renames (a relation, column or schema whose oid or attnum proves it kept its identity; docs/catalog.md "Drift").
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

async function up(db: AnyDb): Promise<void> {
  await sql`alter table catalog_changes drop constraint catalog_changes_kind_check,
    add constraint catalog_changes_kind_check check (kind in ('added', 'removed', 'renamed', 'changed', 'type_changed'))`.execute(db);
}

async function down(db: AnyDb): Promise<void> {
  await sql`delete from catalog_changes where kind = 'renamed'`.execute(db);
  await sql`alter table catalog_changes drop constraint catalog_changes_kind_check,
    add constraint catalog_changes_kind_check check (kind in ('added', 'removed', 'changed', 'type_changed'))`.execute(db);
}

export const catalogRenames: Migration = { up, down };
