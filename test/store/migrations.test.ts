// Migrations on a fresh PostgreSQL database: every table, head status, down to zero and back, pending detection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { openControlStore } from '../../src/store/db.js';
import type { ControlStore } from '../../src/store/db.js';
import { migrateTo, migrateToLatest, migrationStatus } from '../../src/store/migrate.js';
import { migrations } from '../../src/store/migrations/index.js';
import { MigrationError } from '../../src/store/errors.js';
import { createTestDatabase } from '../support/pg.js';
import type { TestDatabase } from '../support/pg.js';
import { FOUNDATION_TABLES } from './control-tables.js';


async function publicTables(store: ControlStore): Promise<string[]> {
  const { rows } = await sql<{ table_name: string }>`
    select table_name from information_schema.tables
    where table_schema = 'public' and table_name not like 'kysely_%' order by table_name`.execute(store.db);
  return rows.map((r) => r.table_name);
}

describe('migrations on PostgreSQL', () => {
  let database: TestDatabase;
  let store: ControlStore;
  const all = Object.keys(migrations);
  const head = all[all.length - 1]!;

  beforeAll(async () => {
    database = await createTestDatabase();
    store = await openControlStore({ url: database.url, embeddedDir: '/unused', poolMax: 2, connectTimeoutMs: 5_000, ssl: { mode: 'disable' } });
  });
  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  it('reports every migration pending on an empty database without creating anything', async () => {
    const status = await migrationStatus(store.db);
    expect(status).toEqual({ atHead: false, applied: [], pending: all, unknown: [] });
    expect(await publicTables(store)).toEqual([]);
  });

  it('applies every migration, creates every control table, and is then at head', async () => {
    const { applied } = await migrateToLatest(store.db);
    expect(applied).toEqual(all);
    expect(await publicTables(store)).toEqual(expect.arrayContaining(FOUNDATION_TABLES));
    expect(await migrationStatus(store.db)).toEqual({ atHead: true, applied: all, pending: [], unknown: [] });
    // Idempotent: a second run applies nothing.
    expect((await migrateToLatest(store.db)).applied).toEqual([]);
  });

  it('migrates down to zero (every table gone) and back up', async () => {
    const down = await migrateTo(store.db, null);
    expect(down.ran).toEqual([...all].reverse());
    expect(await publicTables(store)).toEqual([]);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_proc where proname like 'gatehouse_%'`.execute(store.db);
    expect(rows[0]!.n).toBe(0);
    expect((await migrationStatus(store.db)).pending).toEqual(all);
    expect((await migrateToLatest(store.db)).applied).toEqual(all);
    expect(await publicTables(store)).toEqual(expect.arrayContaining(FOUNDATION_TABLES));
  });

  it('reports pending (not at head) when this build knows a migration the database lacks', async () => {
    const extended = { ...migrations, '9999_later': { up: async () => undefined } };
    const status = await migrationStatus(store.db, { migrations: extended });
    expect(status.atHead).toBe(false);
    expect(status.pending).toEqual(['9999_later']);
  });

  it('reports the last migration pending after rolling it back, and applies it again', async () => {
    const previous = all.length > 1 ? all[all.length - 2]! : null;
    expect((await migrateTo(store.db, previous)).ran).toEqual([head]);
    expect(await migrationStatus(store.db)).toMatchObject({ atHead: false, pending: [head] });
    expect((await migrateToLatest(store.db)).applied).toEqual([head]);
    expect((await migrationStatus(store.db)).atHead).toBe(true);
  });

  it('reports not at head when the database has a migration this build does not know', async () => {
    const { [head]: _dropped, ...older } = migrations;
    const status = await migrationStatus(store.db, { migrations: older });
    expect(status.atHead).toBe(false);
    expect(status.unknown).toEqual([head]);
  });

  it('names the failing migration and leaves nothing of it behind', async () => {
    const broken = {
      ...migrations,
      '9998_broken': {
        up: async (db: Parameters<NonNullable<(typeof migrations)[string]>['up']>[0]) => {
          await sql`create table half_done (id int)`.execute(db);
          await sql`select * from no_such_table`.execute(db);
        },
      },
    };
    const error = await migrateToLatest(store.db, { migrations: broken }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as MigrationError).migration).toBe('9998_broken');
    expect((error as MigrationError).message).toContain('9998_broken');
    expect(await publicTables(store)).not.toContain('half_done');
    expect((await migrationStatus(store.db, { migrations: broken })).pending).toEqual(['9998_broken']);
  });

  it('lets two instances migrate at once: one applies, the other finds nothing to do', async () => {
    await migrateTo(store.db, null);
    const other = await openControlStore({ url: database.url, embeddedDir: '/unused', poolMax: 2, connectTimeoutMs: 5_000, ssl: { mode: 'disable' } });
    try {
      const [a, b] = await Promise.all([migrateToLatest(store.db), migrateToLatest(other.db)]);
      expect([...a.applied, ...b.applied].sort()).toEqual(all);
      expect((await migrationStatus(other.db)).atHead).toBe(true);
    } finally {
      await other.close();
    }
  });
});
