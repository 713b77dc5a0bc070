// Test fixture: a whole Gatehouse service (all roles by default) started in-process on free ports, against a fresh PostgreSQL database and the real Redis.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, type ServiceRole } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { startService, type RunningService } from '../../src/runtime/start.js';
import { createTestDatabase, type TestDatabase } from './pg.js';
import { dropRedisPrefix, TEST_REDIS_URL } from './redis.js';
import { startPgBouncer, type PgBouncerHandle } from './pgbouncer.js';

export { TEST_REDIS_URL };

export interface TestService {
  running: RunningService;
  gatewayUrl: string;
  adminUrl: string;
  database: TestDatabase | null;
  /** Environment used to load the configuration (reuse it to start a second replica); without the spool directory, which is each service's own (one process per spool). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

export interface TestServiceOptions {
  /** SERVICE_* overrides, e.g. { SERVICE_AUDIT__DURABILITY_MODE: 'buffered' }. */
  env?: Record<string, string>;
  role?: ServiceRole;
  /** Reuse an existing database (a second replica) instead of creating one. */
  database?: TestDatabase;
  /** Use embedded PGlite and in-process coordination instead of the real servers. */
  embedded?: boolean;
  logLevel?: string;
  /** Where the service's JSON log goes (tests that read what was logged); stdout otherwise. */
  logDestination?: { write(line: string): void };
}

let pooler: Promise<PgBouncerHandle> | null = null;
/** Services of this test process using the pooler: the last one to stop stops it (no bouncer outlives its tests). */
let poolerUsers = 0;

async function releasePooler(): Promise<void> {
  if (--poolerUsers > 0 || pooler === null) return;
  const p = pooler;
  pooler = null;
  await (await p).stop();
}

/**
 * GH_TEST_CONTROL_POOLER=pgbouncer runs every test service's control store through one PgBouncer in transaction mode
 * started for the test process (database.pooler: transaction, migrations on database.direct_url):
 * `GH_TEST_CONTROL_POOLER=pgbouncer npx vitest run test/pgwire/smoke.test.ts test/mcp/smoke.test.ts` (docs/operations.md "PgBouncer").
 */
async function viaPooler(database: TestDatabase): Promise<Record<string, string>> {
  if (process.env.GH_TEST_CONTROL_POOLER !== 'pgbouncer') return {};
  pooler ??= startPgBouncer({ poolSize: 10 });
  poolerUsers++;
  let bouncer: PgBouncerHandle;
  try {
    bouncer = await pooler;
  } catch (err) {
    // Not a user after all: the count stays true, and the next service tries a bouncer of its own.
    poolerUsers--;
    pooler = null;
    throw err;
  }
  return { SERVICE_DATABASE__URL: bouncer.urlOf(database.name), SERVICE_DATABASE__POOLER: 'transaction', SERVICE_DATABASE__DIRECT_URL: database.url };
}

export async function startTestService(opts: TestServiceOptions = {}): Promise<TestService> {
  const stateDir = await mkdtemp(path.join(tmpdir(), 'gh-test-'));
  const ownDatabase = !opts.embedded && !opts.database;
  let database: TestDatabase | null = null;
  let pooled: Record<string, string> = {};
  let ownPrefix: string | undefined;
  /** Undoes what this start made: after stop(), and when the start fails (a configuration refused, a check at start), so no database outlives its test. */
  const release = async (): Promise<void> => {
    if (Object.keys(pooled).length > 0) await releasePooler();
    if (ownDatabase) await database?.drop();
    await dropRedisPrefix(ownPrefix);
    await rm(stateDir, { recursive: true, force: true });
  };
  try {
    database = opts.embedded ? null : (opts.database ?? (await createTestDatabase()));
    pooled = database ? await viaPooler(database) : {};
    const env: Record<string, string> = {
      SERVICE_ENVIRONMENT: 'test',
      SERVICE_GATEWAY__HTTP_PORT: '0',
      SERVICE_GATEWAY__PG_PORT: '0',
      SERVICE_ADMIN__PORT: '0',
      SERVICE_DATABASE__EMBEDDED_DIR: path.join(stateDir, 'pgdata'),
      SERVICE_AUDIT__SPOOL__DIR: path.join(stateDir, 'audit-spool'),
      SERVICE_OBSERVABILITY__LOG_LEVEL: opts.logLevel ?? process.env.GH_TEST_LOG_LEVEL ?? 'silent',
      ...(database ? { SERVICE_DATABASE__URL: database.url, SERVICE_REDIS__URL: TEST_REDIS_URL, SERVICE_REDIS__KEY_PREFIX: `ghtest:${randomBytes(6).toString('hex')}:` } : {}),
      ...pooled,
      ...opts.env,
    };
    // A replica started with another service's env shares its prefix; only the service that made a prefix sweeps it.
    ownPrefix = database !== null && opts.env?.SERVICE_REDIS__KEY_PREFIX === undefined ? env.SERVICE_REDIS__KEY_PREFIX : undefined;
    const loaded = loadConfig({ env, cwd: stateDir });
    if (!loaded.ok) throw new Error(`test configuration invalid:\n${loaded.problems.join('\n')}`);
    const role = opts.role ?? 'all';
    const log = createLogger({ level: loaded.config.observability.log_level, service: 'gatehouse-test', role, ...(opts.logDestination ? { destination: opts.logDestination } : {}) });
    const running = await startService(loaded, role, log);
    const url = (key: string) => {
      const a = running.addresses[key];
      return a ? `http://127.0.0.1:${a.port}` : '';
    };
    let stopped = false;
    return {
      running,
      gatewayUrl: url('gateway.http_port'),
      adminUrl: url('admin.port'),
      database,
      env: Object.fromEntries(Object.entries(env).filter(([k]) => k !== 'SERVICE_AUDIT__SPOOL__DIR')),
      async stop() {
        if (stopped) return;
        stopped = true;
        await running.shutdown('test finished');
        await release();
      },
    };
  } catch (err) {
    // The start's own error is what the caller asserts on; a failed clean-up must not replace it.
    await release().catch(() => undefined);
    throw err;
  }
}
