// Prevents two gateway processes started from one directory from sharing the default audit spool: the second refuses to start and names audit.spool.dir; gateway.processes keeps one spool per process.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { baseEnv, runCli, startCli, type StartedCli } from '../support/cli.js';
import { createTestDatabase } from '../support/pg.js';
import { TEST_REDIS_URL } from '../support/redis.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

const freePorts = { SERVICE_GATEWAY__HTTP_PORT: '0', SERVICE_GATEWAY__PG_PORT: '0', SERVICE_ADMIN__PORT: '0' };

it('a second gateway on the same spool refuses to start and names audit.spool.dir; its own spool lets it start', { timeout: 90_000 }, async () => {
  const cwd = await mkdtemp(path.join(tmpdir(), 'gh-spool-'));
  cleanups.push(() => rm(cwd, { recursive: true, force: true }));
  const database = await createTestDatabase();
  cleanups.push(() => database.drop());
  const env = baseEnv({ ...freePorts, SERVICE_DATABASE__URL: database.url, SERVICE_REDIS__URL: TEST_REDIS_URL, SERVICE_REDIS__KEY_PREFIX: `ghspool:${path.basename(cwd)}:` });

  const first: StartedCli = await startCli(['start', '--role', 'gateway'], { env, cwd });
  cleanups.push(() => first.stop('SIGKILL'));
  expect(await readdir(path.join(cwd, '.gatehouse', 'audit-spool'))).toContain('spool.lock');

  const second = await runCli(['start', '--role', 'gateway'], { env, cwd, timeoutMs: 45_000 });
  expect(second.code).toBe(1);
  expect(second.stdout).not.toContain('"gatehouse started"');
  expect(second.stderr).toContain('audit.spool.dir');
  expect(second.stderr).toContain('SERVICE_AUDIT__SPOOL__DIR');
  expect(second.stderr).toContain(`in use by process ${first.child.pid}`);

  // With a spool of its own, the same second process starts.
  const own = await startCli(['start', '--role', 'gateway'], { env: { ...env, SERVICE_AUDIT__SPOOL__DIR: path.join(cwd, 'second-spool') }, cwd });
  cleanups.push(() => own.stop('SIGKILL'));
  expect(await readdir(path.join(cwd, 'second-spool'))).toContain('spool.lock');
});
