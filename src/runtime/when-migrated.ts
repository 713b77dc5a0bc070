// Start-up work that needs the control tables: run now when migrations are at head, else as soon as they are (a replica may start before `gatehouse migrate` runs).
import { migrationStatus } from '../store/migrate.js';
import { StoreUnavailableError } from '../store/errors.js';
import type { Services } from './services.js';

const POLL_MS = 1_000;

export async function whenMigrated(services: Pick<Services, 'db' | 'log' | 'onClose'>, what: string, fn: () => Promise<void>): Promise<void> {
  const now = await migrationStatus(services.db).catch((err: unknown) => {
    // The store may be unreachable at start (the service starts not ready): the task waits like for a migration.
    if (err instanceof StoreUnavailableError) return null;
    throw err;
  });
  if (now?.atHead) return fn();
  services.log.warn({ task: what }, now === null ? 'control store unreachable; deferred until it answers and is migrated' : 'control store migrations are pending; deferred until they are applied');
  let timer: NodeJS.Timeout | null = null;
  let running = false;
  timer = setInterval(() => {
    if (running) return;
    running = true;
    migrationStatus(services.db)
      .then(async (status) => {
        if (!status.atHead || timer === null) return;
        clearInterval(timer);
        timer = null;
        await fn();
        services.log.info({ task: what }, 'deferred start-up task done');
      })
      .catch((err: unknown) => {
        if (err instanceof StoreUnavailableError) services.log.debug({ task: what, reason: err.reason }, 'deferred start-up task waits for the control store');
        else services.log.error({ err, task: what }, 'deferred start-up task failed');
      })
      .finally(() => {
        running = false;
      });
  }, POLL_MS);
  timer.unref();
  services.onClose(async () => {
    if (timer) clearInterval(timer);
    timer = null;
  });
}
