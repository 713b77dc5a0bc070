// The CLI as operators run it: embedded start, graceful shutdown, a taken port named by its config key, migrate and the migration role.
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { baseEnv, runCli, startCli } from '../support/cli.js';
import { createTestDatabase } from '../support/pg.js';
import { openControlStore } from '../../src/store/db.js';
import { migrationStatus } from '../../src/store/migrate.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gh-cli-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const freePorts = { SERVICE_GATEWAY__HTTP_PORT: '0', SERVICE_GATEWAY__PG_PORT: '0', SERVICE_ADMIN__PORT: '0' };

describe('gatehouse start', () => {
  it('runs every role on the embedded default in development and stops cleanly on SIGTERM', { timeout: 120_000 }, async () => {
    const cwd = await tempDir();
    const started = await startCli(['start'], { env: baseEnv(freePorts), cwd });
    const ready = await fetch(`http://${started.listeners['gateway.http_port']}/ready`);
    const body = (await ready.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
    expect(ready.status).toBe(200);
    expect(body.checks.database?.detail).toBe('embedded store');
    expect(body.checks.redis?.detail).toMatch(/in-process/);
    expect(existsSync(path.join(cwd, '.gatehouse', 'pgdata'))).toBe(true);

    const redirect = await fetch(`http://${started.listeners['admin.port']}/`, { redirect: 'manual' });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('/dashboard/overview');

    const exit = await started.stop('SIGTERM');
    expect(exit.code).toBe(0);
    expect(started.output().stdout).toContain('shutdown complete');
  });

  it('names the config key and its environment variable when a port is taken', async () => {
    const cwd = await tempDir();
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise((r) => blocker.close(() => r())));
    const port = (blocker.address() as net.AddressInfo).port;
    const database = await createTestDatabase();
    cleanups.push(() => database.drop());

    const result = await runCli(['start', '--role', 'gateway'], {
      env: baseEnv({ ...freePorts, SERVICE_GATEWAY__HTTP_PORT: String(port), SERVICE_DATABASE__URL: database.url, SERVICE_REDIS__URL: 'redis://127.0.0.1:6379' }),
      cwd,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`gateway.http_port: port ${port} on 127.0.0.1 is already in use`);
    expect(result.stderr).toContain('SERVICE_GATEWAY__HTTP_PORT');
  });

  it('refuses an unknown role with a usage error', async () => {
    const result = await runCli(['start', '--role', 'everything'], { env: baseEnv(), cwd: await tempDir() });
    expect(result.code).toBe(64);
    expect(result.stderr).toContain('--role must be one of all, gateway, admin, worker, migration');
  });
});

describe('gatehouse migrate', () => {
  it('migrates a fresh database, and the migration role does the same and exits', { timeout: 120_000 }, async () => {
    for (const args of [['migrate'], ['start', '--role', 'migration']]) {
      const database = await createTestDatabase();
      cleanups.push(() => database.drop());
      const result = await runCli(args, { env: baseEnv({ SERVICE_DATABASE__URL: database.url }), cwd: await tempDir() });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain('migrations applied');
      const store = await openControlStore({ url: database.url, embeddedDir: '/nonexistent', poolMax: 1, connectTimeoutMs: 5_000 });
      try {
        expect((await migrationStatus(store.db)).atHead).toBe(true);
      } finally {
        await store.close();
      }
    }
  });
});

describe('gatehouse admin reset-password', () => {
  it('sets a password read from standard input and refuses a weak one without changing anything', { timeout: 120_000 }, async () => {
    const { spawn } = await import('node:child_process');
    const { ROOT } = await import('../support/cli.js');
    const database = await createTestDatabase();
    cleanups.push(() => database.drop());
    const env = baseEnv({ SERVICE_DATABASE__URL: database.url });
    const cwd = await tempDir();
    expect((await runCli(['migrate'], { env, cwd })).code).toBe(0);
    const store = await openControlStore({ url: database.url, embeddedDir: '/nonexistent', poolMax: 1, connectTimeoutMs: 5_000 });
    cleanups.push(() => store.close());
    const { ensureBootstrapOwner } = await import('../../src/admin/auth/bootstrap.js');
    const { verifyPassword } = await import('../../src/admin/auth/passwords.js');
    await ensureBootstrapOwner(store.db, null);

    const run = (password: string) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(path.join(ROOT, 'node_modules', '.bin', 'tsx'), [path.join(ROOT, 'src', 'main.ts'), 'admin', 'reset-password', 'admin'], { env, cwd });
        let stderr = '';
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        child.on('close', (code) => resolve({ code, stderr }));
        child.stdin.end(`${password}\n`);
      });
    const hashOf = async () => (await store.db.selectFrom('admin_users').select(['password_hash', 'must_change_password']).where('username', '=', 'admin').executeTakeFirstOrThrow());

    const before = await hashOf();
    const weak = await run('short');
    expect(weak.code).toBe(64);
    expect((await hashOf()).password_hash).toBe(before.password_hash);

    const strong = 'a-Long-and-new-passphrase-42';
    const ok = await run(strong);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).not.toContain(strong);
    const after = await hashOf();
    expect(after.must_change_password).toBe(false);
    expect(await verifyPassword(after.password_hash!, strong)).toBe(true);
  });
});
