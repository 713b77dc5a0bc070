// Test fixture: runs the real `gatehouse` CLI (src/main.ts with tsx's loader) as a child process with a controlled environment.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MAIN = path.join(ROOT, 'src', 'main.ts');
/** The built CLI (`npm run build`): what `npm start` and a deployment run, without tsx in the process. */
const BUILT_MAIN = path.join(ROOT, 'dist', 'main.js');
/** tsx as a loader of this Node (by URL, so a test's own working directory need not resolve it). */
const TSX_LOADER = pathToFileURL(path.join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

/** PATH with the project's Node 24 first, and nothing else from the parent environment. */
export function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: `${path.join(ROOT, 'node_modules', '.bin')}:${process.env.PATH ?? '/usr/bin:/bin'}`, HOME: process.env.HOME ?? '/tmp', ...extra };
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Node itself runs the CLI, with tsx as its loader: signals reach the service directly. (The tsx command relays a
 * signal to its child and SIGKILLs it when the child does not confirm within 30 ms, which a loaded machine misses:
 * a graceful SIGTERM then ended with 143.) The CLI runs in its own process group, so a kill reaches the service and
 * any gateway replicas together and nothing outlives a test.
 */
function spawnCli(args: string[], opts: { env: Record<string, string>; cwd: string; built?: boolean }): ChildProcess {
  const entry = opts.built ? [BUILT_MAIN] : ['--import', TSX_LOADER, MAIN];
  return spawn(process.execPath, [...entry, ...args], { env: opts.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
}

function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

export function runCli(args: string[], opts: { env: Record<string, string>; cwd: string; timeoutMs?: number }): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, opts);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => killGroup(child), opts.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

export interface StartedCli {
  child: ChildProcess;
  /** Bound addresses by config key, read from the "gatehouse started" log line. */
  listeners: Record<string, string>;
  output: () => { stdout: string; stderr: string };
  /** Sends the signal and resolves with the exit status. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `gatehouse start` and resolves once it has logged that it started (or rejects with its output if it exits first). */
export function startCli(args: string[], opts: { env: Record<string, string>; cwd: string; timeoutMs?: number; built?: boolean }): Promise<StartedCli> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, opts);
    let stdout = '';
    let stderr = '';
    let started = false;
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on('close', (code, signal) => r({ code, signal })));
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`start timed out\n${stdout}\n${stderr}`));
    }, opts.timeoutMs ?? 45_000);
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (started) return;
      for (const line of stdout.split('\n')) {
        if (!line.includes('"gatehouse started"')) continue;
        started = true;
        clearTimeout(timer);
        const record = JSON.parse(line) as { listeners: Record<string, string> };
        resolve({
          child,
          listeners: record.listeners,
          output: () => ({ stdout, stderr }),
          stop: async (signal = 'SIGTERM') => {
            // SIGTERM goes to the service (the graceful path under test); SIGKILL to the whole group.
            if (signal === 'SIGKILL') killGroup(child);
            else child.kill(signal);
            return exited;
          },
        });
        return;
      }
    });
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    void exited.then(({ code }) => {
      if (!started) {
        clearTimeout(timer);
        reject(Object.assign(new Error(`exited with ${code} before starting\n${stdout}\n${stderr}`), { code, stdout, stderr }));
      }
    });
  });
}
