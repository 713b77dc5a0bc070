// Catalog scan benchmark (`npm run bench:catalog`): a source of 200 schemas × 100 tables × 20 columns (400k columns); prints the full scan against a bare `pg_dump --schema-only` of the same database (goal ≤ 2×), the worker's peak RSS growth during the scan (goal ≤ 200 MB), and the diff of two snapshots (goal ≤ 2 s).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import type pg from 'pg';
import { createCoordination } from '../src/coord/index.js';
import { configSchema } from '../src/config/index.js';
import { createLogger } from '../src/observability/logger.js';
import { createDataSource } from '../src/store/repos/data-sources.js';
import { latestStructure } from '../src/store/repos/catalog.js';
import { CatalogEvents } from '../src/catalog/events.js';
import { CatalogScanner } from '../src/catalog/scanner.js';
import { diffStructures } from '../src/catalog/diff.js';
import type { CatalogStructure } from '../src/catalog/model.js';
import { createEgressDispatcher } from '../src/egress/agent.js';
import { createTestDatabase, withMigratedStore, TEST_PG_HOST, TEST_PG_PORT } from '../test/support/pg.js';
import { dropRedisPrefix, TEST_REDIS_URL } from '../test/support/redis.js';

const SCHEMAS = Number(process.env.BENCH_CATALOG_SCHEMAS ?? 200);
const TABLES = Number(process.env.BENCH_CATALOG_TABLES ?? 100);
const COLUMNS = Number(process.env.BENCH_CATALOG_COLUMNS ?? 20);
const run = promisify(execFile);
const mb = (n: number) => (n / 1024 / 1024).toFixed(1);

async function build(client: pg.Client): Promise<void> {
  const cols = Array.from({ length: COLUMNS - 1 }, (_, i) => `c${i + 1} ${['text', 'integer', 'timestamptz', 'numeric(12,2)', 'boolean'][i % 5]}${i % 3 === 0 ? ' not null' : ''}`).join(', ');
  for (let s = 0; s < SCHEMAS; s++) {
    const ddl = [`create schema s${s};`];
    for (let t = 0; t < TABLES; t++) ddl.push(`create table s${s}.t${t} (id bigint primary key, ${cols});`);
    await client.query(ddl.join('\n'));
  }
}

async function main(): Promise<void> {
  const source = await createTestDatabase();
  const control = await withMigratedStore();
  const prefix = `ghtest:${randomBytes(6).toString('hex')}:`;
  const coord = createCoordination({ redisUrl: TEST_REDIS_URL, keyPrefix: prefix });
  const egress = createEgressDispatcher({ allowPrivate: () => true, connectTimeoutMs: 5_000 });
  try {
    const owner = await source.connect();
    const t0 = performance.now();
    await build(owner);
    await owner.end();
    console.log(`built ${SCHEMAS} schemas × ${TABLES} tables × ${COLUMNS} columns (${SCHEMAS * TABLES * COLUMNS} columns) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await createDataSource(control.store.db, {
      source_id: 'bench', name: 'bench', source_type: 'postgres', connector_key: null, cache_strategy: 'deterministic_first', enabled: true, metadata: {},
      connection_config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: source.name, user: 'postgres', ssl_mode: 'disable' },
    } as never);
    const config = { ...configSchema.parse({}).catalog, max_nodes: 10_000_000, max_schemas: 100_000, max_tables: 1_000_000, max_columns_per_table: 1_600 };
    const scanner = new CatalogScanner({
      db: control.store.db, coord, config, workerId: 'bench',
      resolveSecret: () => ({ ok: false, problem: 'none' }) as never,
      checkTarget: (id, host) => egress.checkTarget(id, host),
      dispatcherFor: (id) => egress.forSource(id),
      events: new CatalogEvents(coord),
      log: createLogger({ level: 'silent', service: 'bench', role: 'worker' }),
    });

    // Baseline: a bare pg_dump --schema-only of the same database, output discarded.
    // pg_dump takes a lock per table in one transaction: past max_locks_per_transaction × max_connections it cannot run at all.
    const dumpStart = performance.now();
    let dumpMs = Number.NaN;
    try {
      await run('pg_dump', ['--schema-only', '-h', TEST_PG_HOST, '-p', String(TEST_PG_PORT), '-U', 'postgres', '-f', '/dev/null', source.name], { maxBuffer: 1 << 20 });
      dumpMs = performance.now() - dumpStart;
    } catch (err) {
      console.log(`pg_dump --schema-only failed: ${String((err as { stderr?: string }).stderr ?? err).split('\n')[0]} (no baseline at this size)`);
    }

    // Full scan (capture, diff against nothing, store the snapshot), RSS sampled every 10 ms.
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 10);
    const scanStart = performance.now();
    const first = await scanner.scan('bench', 'demand');
    const scanMs = performance.now() - scanStart;
    clearInterval(sampler);
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    if (first.status !== 'ok') throw new Error(`scan failed: ${JSON.stringify(first)}`);

    // Diff of two snapshots: the stored one against a copy with drift in 1% of the tables.
    const stored = (await latestStructure(control.store.db, 'bench'))!.structure as unknown as CatalogStructure;
    const after: CatalogStructure = {
      ...stored,
      relations: stored.relations
        .filter((_, i) => i % 1000 !== 1)
        .map((r, i) => (i % 100 === 0 ? { ...r, columns: [...r.columns.slice(0, -1), { name: 'added', type: 'text', nullable: true, has_default: false }] } : r)),
    };
    const diffStart = performance.now();
    const changes = diffStructures('bench', stored, after);
    const diffMs = performance.now() - diffStart;

    // A second full scan: captures again and diffs against the stored snapshot.
    const second = await (async () => {
      const s = performance.now();
      const r = await scanner.scan('bench', 'demand');
      return { ms: performance.now() - s, r };
    })();

    console.log(`pg_dump --schema-only: ${(dumpMs / 1000).toFixed(2)} s`);
    console.log(`full scan (first, ${first.node_count} nodes): ${(scanMs / 1000).toFixed(2)} s = ${(scanMs / dumpMs).toFixed(2)}× pg_dump (goal ≤ 2×)`);
    console.log(`full scan (second, diffed against the first, ${second.r.status === 'ok' ? second.r.changes : '?'} changes): ${(second.ms / 1000).toFixed(2)} s = ${(second.ms / dumpMs).toFixed(2)}× pg_dump`);
    console.log(`peak RSS growth during the first scan: ${mb(rssPeak - rssBefore)} MB (goal ≤ 200 MB; RSS before ${mb(rssBefore)} MB)`);
    console.log(`diff of two snapshots (${stored.relations.reduce((n, r) => n + r.columns.length, 0)} columns, ${changes.length} changes): ${diffMs.toFixed(0)} ms (goal ≤ 2000 ms)`);
  } finally {
    await egress.close();
    await coord.close();
    await dropRedisPrefix(prefix);
    await control.cleanup();
    await source.drop();
  }
}

await main();
