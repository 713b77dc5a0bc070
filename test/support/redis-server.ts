// Test fixture: a dedicated redis-server on a free loopback port that a test can stop and restart to stage an outage.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

export interface RedisServerHandle {
  readonly port: number;
  /** redis://127.0.0.1:<port> */
  readonly url: string;
  /** Kills the server abruptly (SIGKILL, like a crash) and waits until it has exited; idempotent. */
  stop(): Promise<void>;
  /** Starts the server again on the same port (stopping it first if it runs); data does not survive. */
  restart(): Promise<void>;
  /** Freezes the process (SIGSTOP): connections stay open but nothing answers, like a hung server or a blackholed network. */
  pause(): void;
  /** Thaws a paused server (SIGCONT). */
  resume(): void;
  readonly running: boolean;
  [Symbol.asyncDispose](): Promise<void>;
}

const READY_LINE = /Ready to accept connections/;
const START_TIMEOUT_MS = 10_000;

/** Servers still running when the test process exits are killed, so a failed test leaves no redis-server behind. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * Starts redis-server on the port in a fresh directory and resolves once it logged `ready`. `args(dir)` replaces the
 * arguments after `--port` (a sentinel's configuration file lives in its directory).
 */
export function launchRedis(port: number, args: (dir: string) => string[] = (dir) => ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], ready = READY_LINE): Promise<{ child: ChildProcess; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'gh-redis-'));
  const extra = args(dir);
  // A configuration file, when given, must come first.
  const argv = extra[0]?.endsWith('.conf') ? [extra[0], '--port', String(port), ...extra.slice(1)] : ['--port', String(port), ...extra];
  const child = spawn('redis-server', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const fail = (reason: string): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      live.delete(child);
      rmSync(dir, { recursive: true, force: true });
      reject(new Error(`redis-server on port ${port} ${reason}\n${output.slice(-2000)}`));
    };
    const timer = setTimeout(() => fail(`not ready within ${START_TIMEOUT_MS} ms`), START_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      if (ready.test(output)) {
        clearTimeout(timer);
        child.off('exit', onExit);
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        child.stderr?.resume();
        resolve({ child, dir });
      }
    };
    const onExit = (code: number | null): void => fail(`exited early (code ${code})`);
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.once('exit', onExit);
    child.once('error', (error) => fail(`could not start: ${error.message}`));
  });
}

export async function killRedis(child: ChildProcess): Promise<void> {
  live.delete(child);
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await exited;
}

/** Starts a throwaway redis-server (no persistence) on a free 127.0.0.1 port. */
export async function startRedisServer(): Promise<RedisServerHandle> {
  let port = 0;
  let current: { child: ChildProcess; dir: string } | null = null;
  // Another process may take the free port between our probe and redis' bind: try a few ports.
  for (let attempt = 1; current === null; attempt++) {
    port = await freePort();
    try {
      current = await launchRedis(port);
    } catch (error) {
      if (attempt >= 3) throw error;
    }
  }

  const stop = async (): Promise<void> => {
    if (current === null) return;
    const { child, dir } = current;
    current = null;
    await killRedis(child);
    rmSync(dir, { recursive: true, force: true });
  };

  const restart = async (): Promise<void> => {
    await stop();
    // The killed listener's port is free at once (redis sets SO_REUSEADDR); retry briefly in case it is not.
    for (let attempt = 1; ; attempt++) {
      try {
        current = await launchRedis(port);
        return;
      } catch (error) {
        if (attempt >= 5) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  };

  const signal = (name: 'SIGSTOP' | 'SIGCONT'): void => {
    if (current === null) throw new Error('redis-server is not running');
    current.child.kill(name);
  };

  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop,
    restart,
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    get running() {
      return current !== null;
    },
    [Symbol.asyncDispose]: stop,
  };
}
