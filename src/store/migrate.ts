// Applies and reports control-store migrations: Kysely's Migrator over the static list, under a Gatehouse advisory lock.
import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';
import { Migrator, NO_MIGRATIONS } from 'kysely/migration';
import type { Migration, MigrationResultSet } from 'kysely/migration';
import { migrations as allMigrations } from './migrations/index.js';
import { MigrationError } from './errors.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** Kysely's bookkeeping table (its default name). */
const MIGRATION_TABLE = 'kysely_migration';

/**
 * Key of the session-level advisory lock held while migrating: "gatehouse" as an int8, distinct
 * from Kysely's own key (3853314791062309107) so it can never self-deadlock against it.
 */
const GATEHOUSE_MIGRATION_LOCK = 7_451_812_397_136_203_001n;

export interface MigrateOptions {
  /** The migrations to apply; the full static list unless a test passes a prefix of it. */
  migrations?: Readonly<Record<string, Migration>>;
  /** How long to wait for another instance that is migrating (default 60 s). */
  lockWaitMs?: number;
}

export interface MigrationStatus {
  atHead: boolean;
  applied: string[];
  pending: string[];
  /** Applied in the database but unknown to this build (a newer build migrated it): not at head. */
  unknown: string[];
}

/**
 * Why our own lock when Kysely's Migrator already locks (checked in kysely 0.29.9):
 * on PostgreSQL, Migrator creates `kysely_migration` and `kysely_migration_lock` *before* taking
 * any lock (tolerating a concurrent creator by re-checking after a failure), then takes the
 * session advisory lock 3853314791062309107 with a 1 h lock_timeout and runs every pending
 * migration in one transaction. On PGlite its lock is a no-op (one connection). So its lock
 * already keeps two starting instances from applying the same migration twice; ours adds a
 * bounded wait with a clear error, serializes the table bootstrap too, and behaves the same on
 * both stores. The whole run is one transaction: a failing migration leaves nothing behind.
 */
async function withMigrationLock<T>(db: AnyDb, lockWaitMs: number, run: (trx: Transaction<unknown>) => Promise<T>): Promise<T> {
  return db.connection().execute(async (conn) => {
    const deadline = Date.now() + lockWaitMs;
    for (;;) {
      const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${sql.lit(GATEHOUSE_MIGRATION_LOCK)}) as locked`.execute(conn);
      if (rows[0]?.locked) break;
      if (Date.now() >= deadline) {
        throw new MigrationError(`another instance held the migration lock for more than ${lockWaitMs} ms`, null);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    try {
      return await conn.transaction().execute(async (trx) => {
        // The pool's statement_timeout bounds requests, not schema changes on a large table.
        await sql`set local statement_timeout = 0`.execute(trx);
        return run(trx as Transaction<unknown>);
      });
    } finally {
      // Releases ours and, should a failure path ever skip it, Kysely's: this pooled session
      // must not go back to the pool holding a lock that would block the next migration forever.
      await sql`select pg_advisory_unlock_all()`.execute(conn);
    }
  });
}

/**
 * Runs one migration step inside a savepoint. Migrator is given our transaction, and after a
 * failing statement it still has to run its own unlock query: rolling back to the savepoint
 * keeps the transaction usable so that query succeeds and the failure keeps the migration's name.
 */
function inSavepoint(step: (db: AnyDb) => Promise<void>): (db: AnyDb) => Promise<void> {
  return async (db) => {
    await sql`savepoint gatehouse_migration`.execute(db);
    try {
      await step(db);
    } catch (error) {
      await sql`rollback to savepoint gatehouse_migration`.execute(db);
      throw error;
    }
    await sql`release savepoint gatehouse_migration`.execute(db);
  };
}

function migratorFor(db: AnyDb, list: Readonly<Record<string, Migration>>): Migrator {
  const guarded: Record<string, Migration> = {};
  for (const [name, m] of Object.entries(list)) {
    guarded[name] = { up: inSavepoint(m.up), ...(m.down ? { down: inSavepoint(m.down) } : {}) };
  }
  return new Migrator({ db, provider: { getMigrations: async () => guarded } });
}

/** Turns a Migrator result set into the applied names, or throws MigrationError naming the failed one. */
function unwrap(result: MigrationResultSet, what: string): string[] {
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName ?? null;
    const reason = result.error instanceof Error ? result.error.message : String(result.error);
    const message = failed ? `${what}: migration ${failed} failed: ${reason}` : `${what} failed: ${reason}`;
    throw new MigrationError(message, failed, { cause: result.error });
  }
  return (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** Applies every pending migration; returns the names applied in this run (empty when at head). */
export async function migrateToLatest(db: AnyDb, options: MigrateOptions = {}): Promise<{ applied: string[] }> {
  const list = options.migrations ?? allMigrations;
  const applied = await withMigrationLock(db, options.lockWaitMs ?? 60_000, async (trx) =>
    unwrap(await migratorFor(trx, list).migrateToLatest(), 'migrate to latest'),
  );
  return { applied };
}

/**
 * Migrates up or down to `target` (a migration name, or null for "no migrations"). For operators
 * rolling back a release and for tests; returns the names run (in the order they ran).
 */
export async function migrateTo(db: AnyDb, target: string | null, options: MigrateOptions = {}): Promise<{ ran: string[] }> {
  const list = options.migrations ?? allMigrations;
  if (target !== null && !(target in list)) throw new MigrationError(`unknown migration ${target}`, target);
  const ran = await withMigrationLock(db, options.lockWaitMs ?? 60_000, async (trx) =>
    unwrap(await migratorFor(trx, list).migrateTo(target ?? NO_MIGRATIONS), `migrate to ${target ?? 'zero'}`),
  );
  return { ran };
}

/** Read-only: compares the database's applied migrations with this build's list (readiness: "migrations at head"). */
export async function migrationStatus(db: AnyDb, options: Pick<MigrateOptions, 'migrations'> = {}): Promise<MigrationStatus> {
  const known = Object.keys(options.migrations ?? allMigrations).sort();
  const { rows: exists } = await sql<{ present: boolean }>`select to_regclass(${MIGRATION_TABLE}) is not null as present`.execute(db);
  let appliedInDb: string[] = [];
  if (exists[0]?.present) {
    const { rows } = await sql<{ name: string }>`select name from ${sql.table(MIGRATION_TABLE)} order by name`.execute(db);
    appliedInDb = rows.map((r) => r.name);
  }
  const appliedSet = new Set(appliedInDb);
  const knownSet = new Set(known);
  const applied = known.filter((n) => appliedSet.has(n));
  const pending = known.filter((n) => !appliedSet.has(n));
  const unknown = appliedInDb.filter((n) => !knownSet.has(n));
  return { atHead: pending.length === 0 && unknown.length === 0, applied, pending, unknown };
}
