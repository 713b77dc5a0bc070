// Test fixture: a real PgBouncer (Debian's) on a free loopback port in transaction pooling mode, in front of a PostgreSQL server; as root it runs as the postgres user, as PgBouncer refuses root.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { runAs } from './pg-server.js';
import { freePort } from './ports.js';

export interface PgBouncerHandle {
  readonly port: number;
  /** The URL of `database` through the pooler. */
  urlOf(database: string): string;
  /** A query on PgBouncer's admin console (`SHOW POOLS`, `SHOW STATS`): its rows. */
  admin(command: string): Promise<Array<Record<string, unknown>>>;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** The server PgBouncer forwards to (default the shared 127.0.0.1:5432). */
  serverPort?: number;
  /** Server connections per database and user (default 5); 1 makes every client share one server session. */
  poolSize?: number;
  /** Startup parameters PgBouncer accepts and drops (`ignore_startup_parameters`), as operators set it for some drivers. */
  ignoreStartupParameters?: string[];
}

/** Started bouncers, killed when the test process exits so a failed test leaves none behind. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export async function startPgBouncer(opts: PgBouncerOptions = {}): Promise<PgBouncerHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'gh-pgbouncer-'));
  const user = runAs();
  const port = await freePort();
  writeFileSync(join(dir, 'users.txt'), '"postgres" ""\n');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=127.0.0.1 port=${opts.serverPort ?? 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      'admin_users = postgres',
      'pool_mode = transaction',
      `default_pool_size = ${opts.poolSize ?? 5}`,
      'max_client_conn = 500',
      // PgBouncer's own default: DISCARD ALL is sent only in session mode, so nothing cleans up after a client here.
      'server_reset_query =',
      ...(opts.ignoreStartupParameters ? [`ignore_startup_parameters = ${opts.ignoreStartupParameters.join(',')}`] : []),
      '',
    ].join('\n'),
  );
  if (user) chownSync(dir, user.uid, user.gid);
  for (const f of ['users.txt', 'pgbouncer.ini']) if (user) chownSync(join(dir, f), user.uid, user.gid);
  const child = spawn('pgbouncer', [join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'], ...(user ?? {}) });
  live.add(child);
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`pgbouncer not listening within 10 s\n${output}`)), 10_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      if (/listening on 127\.0\.0\.1/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`pgbouncer exited (${code})\n${output}`));
    });
  });
  return {
    port,
    urlOf: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async admin(command) {
      const c = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/pgbouncer` });
      await c.connect();
      try {
        // The admin console speaks the simple protocol only.
        return (await c.query({ text: command, queryMode: 'simple' } as pg.QueryConfig)).rows as Array<Record<string, unknown>>;
      } finally {
        await c.end();
      }
    },
    async stop() {
      live.delete(child);
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((r) => child.once('exit', () => r()));
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
