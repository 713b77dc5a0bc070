// Start-up work that needs the control tables: run now when migrations are at head, else as soon as they are (a replica may start before `gatehouse migrate` runs).
import { migrationStatus } from '../store/migrate.js';
import type { Services } from './services.js';

const POLL_MS = 1_000;

export async function whenMigrated(services: Pick<Services, 'db' | 'log' | 'onClose'>, what: string, fn: () => Promise<void>): Promise<void> {
  if ((await migrationStatus(services.db)).atHead) return fn();
  services.log.warn({ task: what }, 'control store migrations are pending; deferred until they are applied');
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
      .catch((err: unknown) => services.log.error({ err, task: what }, 'deferred start-up task failed'))
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
