// Test fixture: a uniquely named PostgreSQL database on the local server, dropped afterwards.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openControlStore } from '../../src/store/db.js';
import type { ControlStore } from '../../src/store/db.js';
import { migrateToLatest } from '../../src/store/migrate.js';

/** The local server tests use (trust auth for user postgres). */
export const TEST_PG_HOST = '127.0.0.1';
export const TEST_PG_PORT = 5432;
const ADMIN_URL = `postgres://postgres@${TEST_PG_HOST}:${TEST_PG_PORT}/postgres`;

export interface TestDatabase {
  url: string;
  name: string;
  /** A client connected to this database (the test ends it). */
  connect(): Promise<pg.Client>;
  drop(): Promise<void>;
}

/** Runs `fn` on a connection to the maintenance database as the superuser (create and drop databases, read the cluster's catalogs). */
export async function withAdminClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates `gh_test_<random>`; `drop()` terminates its connections first and is safe to call twice. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `gh_test_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  await withAdminClient((c) => c.query(`create database "${name}"`));
  let dropped = false;
  const url = `postgres://postgres@${TEST_PG_HOST}:${TEST_PG_PORT}/${name}`;
  return {
    name,
    url,
    async connect() {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      return client;
    },
    async drop() {
      if (dropped) return;
      dropped = true;
      await withAdminClient(async (c) => {
        await c.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
        await c.query(`drop database if exists "${name}"`);
      });
    },
  };
}

export interface MigratedStore {
  store: ControlStore;
  database: TestDatabase;
  cleanup(): Promise<void>;
}

/** A ControlStore on a fresh database, migrated to head. */
export async function withMigratedStore(opts: { poolMax?: number } = {}): Promise<MigratedStore> {
  const database = await createTestDatabase();
  let store: ControlStore | undefined;
  try {
    store = await openControlStore({
      url: database.url,
      embeddedDir: '/nonexistent-unused',
      poolMax: opts.poolMax ?? 4,
      connectTimeoutMs: 5_000,
      statementTimeoutMs: 30_000,
      ssl: { mode: 'disable' },
    });
    await migrateToLatest(store.db);
  } catch (error) {
    await store?.close();
    await database.drop();
    throw error;
  }
  const opened = store;
  return {
    store: opened,
    database,
    async cleanup() {
      await opened.close();
      await database.drop();
    },
  };
}

/** A fresh temporary directory for an embedded store, removed by `remove()`. */
export async function createTempDir(prefix = 'gh-store-'): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}
