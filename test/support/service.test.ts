// The service fixture cleans up after a start that fails: the database it made for the service is dropped, so a refused start leaves nothing behind on the shared PostgreSQL.
import { createServer, type Server } from 'node:net';
import { expect, test, vi } from 'vitest';
import type * as PgSupport from './pg.js';

/** Names of the databases startTestService made, in order (the real createTestDatabase, observed). */
const made = vi.hoisted(() => [] as string[]);
vi.mock('./pg.js', async (importOriginal) => {
  const real = await importOriginal<typeof PgSupport>();
  return {
    ...real,
    createTestDatabase: async () => {
      const database = await real.createTestDatabase();
      made.push(database.name);
      return database;
    },
  };
});

const { startTestService } = await import('./service.js');
const { withAdminClient } = await import('./pg.js');

async function exists(name: string): Promise<boolean> {
  return withAdminClient(async (c) => (await c.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1);
}

test('a start whose configuration is refused drops the database it made', async () => {
  made.length = 0;
  await expect(startTestService({ env: { SERVICE_GATEWAY__HTTP_PORT: 'not-a-port' } })).rejects.toThrow(/test configuration invalid/);
  expect(made).toHaveLength(1);
  expect(await exists(made[0]!)).toBe(false);
});

test('a start that fails after the store was migrated (its port taken) drops the database too', async () => {
  made.length = 0;
  const taken: Server = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as { port: number }).port;
  try {
    await expect(startTestService({ role: 'gateway', env: { SERVICE_GATEWAY__HTTP_PORT: String(port) } })).rejects.toThrow();
  } finally {
    await new Promise<void>((resolve) => taken.close(() => resolve()));
  }
  expect(made).toHaveLength(1);
  expect(await exists(made[0]!)).toBe(false);
});

test('a service that started and stopped leaves no database either', async () => {
  made.length = 0;
  const svc = await startTestService({ role: 'gateway' });
  expect(await exists(made[0]!)).toBe(true);
  await svc.stop();
  expect(await exists(made[0]!)).toBe(false);
});
