// Test fixture: a private PostgreSQL cluster (initdb in a temp dir, postgres on a free loopback port) that a test can kill and restart to stage an outage.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './ports.js';

export interface PgServerHandle {
  readonly port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  readonly url: string;
  /** Kills the postmaster and its backends with SIGKILL (a crash) and waits until they are gone; idempotent. */
  kill(): Promise<void>;
  /** Starts the cluster again on the same port and data directory (crash recovery runs); data survives. */
  start(): Promise<void>;
  readonly running: boolean;
  /** A client on the cluster's `postgres` database (the caller ends it). */
  connect(): Promise<pg.Client>;
  /** Kills the cluster and removes its directory. */
  remove(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const START_TIMEOUT_MS = 20_000;

function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  if (versions.length === 0) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql/*/bin');
  versions.sort((a, b) => Number(b) - Number(a));
  return join(root, versions[0]!, 'bin');
}

/** initdb and postgres refuse to run as root: as root, they run as the `postgres` system user. */
export function runAs(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** Postmasters still running when the test process exits are killed, so a failed test leaves no cluster behind. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) killGroup(child);
});

function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function ready(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`postgres exited during start (${child.exitCode ?? child.signalCode})`);
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      return;
    } catch {
      await client.end().catch(() => undefined);
      if (Date.now() > deadline) throw new Error(`postgres not ready within ${START_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

export interface PgServerOptions {
  /** Extra server settings (`-c name=value`), e.g. ssl=on with its certificate files. */
  readonly settings?: Readonly<Record<string, string>>;
}

/** Creates and starts a throwaway cluster (trust authentication, fsync off, user postgres). */
export async function startPgServer(opts: PgServerOptions = {}): Promise<PgServerHandle> {
  const bin = binDir();
  const user = runAs();
  const dir = mkdtempSync(join(tmpdir(), 'gh-pg-'));
  const data = join(dir, 'data');
  if (user) chownSync(dir, user.uid, user.gid);
  chmodSync(dir, 0o700);
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8', '--locale=C'], {
    encoding: 'utf8',
    ...(user ?? {}),
  });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
  }
  return serveCluster(dir, data, opts);
}

/**
 * A streaming standby of `primary`: `pg_basebackup -R` into a temp dir (a fast checkpoint; initdb's trust rules allow replication from
 * 127.0.0.1), started read-only on its own port. `pg_wal_replay_pause()` on it stages replication lag.
 */
export async function startStandby(primary: PgServerHandle, opts: PgServerOptions = {}): Promise<PgServerHandle> {
  const bin = binDir();
  const user = runAs();
  const dir = mkdtempSync(join(tmpdir(), 'gh-pg-standby-'));
  const data = join(dir, 'data');
  if (user) chownSync(dir, user.uid, user.gid);
  chmodSync(dir, 0o700);
  const backup = spawnSync(join(bin, 'pg_basebackup'), ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', data, '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync'], { encoding: 'utf8', ...(user ?? {}) });
  if (backup.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`pg_basebackup failed: ${backup.stderr || backup.stdout}`);
  }
  return serveCluster(dir, data, { settings: { hot_standby: 'on', ...opts.settings } });
}

async function serveCluster(dir: string, data: string, opts: PgServerOptions): Promise<PgServerHandle> {
  const bin = binDir();
  const user = runAs();
  const port = await freePort();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | null = null;

  const start = async (): Promise<void> => {
    if (child !== null) return;
    const c = spawn(
      join(bin, 'postgres'),
      ['-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dir}`, '-c', 'fsync=off', '-c', 'max_connections=60', ...Object.entries(opts.settings ?? {}).flatMap(([k, v]) => ['-c', `${k}=${v}`])],
      { stdio: ['ignore', 'ignore', 'pipe'], detached: true, ...(user ?? {}) },
    );
    let stderr = '';
    c.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    live.add(c);
    child = c;
    try {
      await ready(url, c);
    } catch (err) {
      await kill();
      throw new Error(`${(err as Error).message}\n${stderr}`, { cause: err });
    }
  };

  const kill = async (): Promise<void> => {
    const c = child;
    if (c === null) return;
    child = null;
    live.delete(c);
    if (c.exitCode === null && c.signalCode === null) {
      const exited = new Promise<void>((r) => c.once('exit', () => r()));
      killGroup(c);
      await exited;
    }
    // Backends are in the postmaster's process group; wait until the port is free of them too.
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline && spawnSync('pgrep', ['-g', String(c.pid)]).status === 0) await new Promise((r) => setTimeout(r, 20));
  };

  const remove = async (): Promise<void> => {
    await kill();
    rmSync(dir, { recursive: true, force: true });
  };

  await start();
  return {
    port,
    url,
    kill,
    start,
    get running() {
      return child !== null;
    },
    async connect() {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      return client;
    },
    remove,
    [Symbol.asyncDispose]: remove,
  };
}
