// Catalog test fixtures: a migrated control store, Redis coordination under a private prefix, a scratch source database with schemas, quoted names, views and a partitioned table, and a login role without SELECT on any of it.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createCoordination, type Coordination } from '../../src/coord/index.js';
import { configSchema, type Config } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { createDataSource } from '../../src/store/repos/data-sources.js';
import { CatalogEvents } from '../../src/catalog/events.js';
import { CatalogScanner } from '../../src/catalog/scanner.js';
import { createEgressDispatcher } from '../../src/egress/agent.js';
import { createTestDatabase, withMigratedStore, TEST_PG_HOST, TEST_PG_PORT, type MigratedStore, type TestDatabase } from '../support/pg.js';
import { dropRedisPrefix, TEST_REDIS_URL } from '../support/redis.js';

export const FIXTURE_SQL = `
create schema sales;
create schema "Mixed Case";
create table public.users (id serial primary key, email text not null, name text, created_at timestamptz default now());
create table sales.orders (id bigint primary key, user_id int references public.users (id), amount numeric(10,2), note varchar(40));
create table "Mixed Case"."Users" ("Id" int primary key, "E.mail" text);
create view public.user_emails as select id, email from public.users;
create materialized view sales.order_totals as select user_id, sum(amount) as total from sales.orders group by user_id;
create table public.events (id int, at date not null, payload jsonb) partition by range (at);
create table public.events_2024 partition of public.events for values from ('2024-01-01') to ('2025-01-01');
insert into public.users (email, name) values ('secret-row@example.com', 'Row Data');
`;

export interface SourceDatabase {
  db: TestDatabase;
  /** A login role with no SELECT on any table and no USAGE on the extra schemas. */
  role: string;
  /** The connection_config of a postgres source that logs in as that role. */
  config: Record<string, unknown>;
  sql(text: string): Promise<pg.QueryResult>;
  close(): Promise<void>;
}

/** A scratch source database loaded with `fixture` and a scanning role without SELECT. */
export async function createSourceDatabase(fixture = FIXTURE_SQL): Promise<SourceDatabase> {
  const db = await createTestDatabase();
  const role = `gh_cat_${randomBytes(5).toString('hex')}`;
  const owner = await db.connect();
  await owner.query(fixture);
  await owner.query(`create role ${role} login`);
  return {
    db,
    role,
    config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: db.name, user: role, ssl_mode: 'disable' },
    sql: (text) => owner.query(text),
    async close() {
      await owner.end().catch(() => undefined);
      await db.drop();
      const admin = new pg.Client({ connectionString: `postgres://postgres@${TEST_PG_HOST}:${TEST_PG_PORT}/postgres` });
      await admin.connect();
      await admin.query(`drop role if exists ${role}`).catch(() => undefined);
      await admin.end();
    },
  };
}

export interface CatalogWorld {
  control: MigratedStore;
  source: TestDatabase;
  /** The login role the source is registered with: no SELECT on any table, no USAGE on the extra schemas. */
  role: string;
  sourceId: string;
  coord: Coordination;
  prefix: string;
  /** Runs SQL on the source database as its owner (postgres). */
  sql(text: string): Promise<pg.QueryResult>;
  scanner(overrides?: Partial<Config['catalog']>, workerId?: string): { scanner: CatalogScanner; events: CatalogEvents };
  close(): Promise<void>;
}

export async function catalogWorld(opts: { fixture?: string } = {}): Promise<CatalogWorld> {
  const control = await withMigratedStore();
  const src = await createSourceDatabase(opts.fixture);
  const source = src.db;
  const role = src.role;
  const prefix = `ghtest:${randomBytes(6).toString('hex')}:`;
  const coord = createCoordination({ redisUrl: TEST_REDIS_URL, keyPrefix: prefix });
  const sourceId = `cat-${randomBytes(3).toString('hex')}`;
  await createDataSource(control.store.db, {
    source_id: sourceId,
    name: sourceId,
    source_type: 'postgres',
    connector_key: null,
    connection_config: src.config,
    cache_strategy: 'deterministic_first',
    enabled: true,
    metadata: {},
  } as never);
  const log = createLogger({ level: 'silent', service: 'catalog-test', role: 'worker' });
  const egress = createEgressDispatcher({ allowPrivate: () => true, connectTimeoutMs: 5_000 });
  const config = configSchema.parse({}).catalog;
  return {
    control,
    source,
    role,
    sourceId,
    coord,
    prefix,
    sql: (text) => src.sql(text),
    scanner(overrides = {}, workerId = 'test-worker') {
      const events = new CatalogEvents(coord);
      const scanner = new CatalogScanner({
        db: control.store.db,
        coord,
        config: { ...config, ...overrides },
        workerId,
        resolveSecret: () => ({ ok: false, problem: 'no secrets in this test' }) as never,
        checkTarget: (id, host) => egress.checkTarget(id, host),
        dispatcherFor: (id) => egress.forSource(id),
        events,
        log,
      });
      return { scanner, events };
    },
    async close() {
      await egress.close();
      await coord.close();
      await dropRedisPrefix(prefix);
      await src.close();
      await control.cleanup();
    },
  };
}
