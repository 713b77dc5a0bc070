// scripts/test-setup.sh, which npm test (pretest) and .ci/run both run: its check mode reports each requirement and one line of what to run, and changes nothing.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/cli.js';
import { freePort } from '../support/ports.js';

const SCRIPT = path.join(ROOT, 'scripts', 'test-setup.sh');
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

function run(args: string[], env: Record<string, string> = {}, wrap: string[] = []): Promise<{ code: number; stdout: string; stderr: string }> {
  const [cmd, ...pre] = wrap.length > 0 ? wrap : [SCRIPT];
  return new Promise((resolve) => {
    execFile(cmd!, [...pre, ...(wrap.length > 0 ? [SCRIPT] : []), ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * A PATH holding every command of the system's bin and sbin directories except the named ones: a machine without those
 * clients. The first directory holding a name wins, as on a PATH; a name is linked once (a merged /usr lists each twice).
 */
async function pathWithout(names: string[]): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gh-path-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const linked = new Set(names);
  for (const from of ['/usr/local/bin', '/usr/bin', '/bin', '/usr/local/sbin', '/usr/sbin', '/sbin']) {
    if (!existsSync(from)) continue;
    for (const name of await readdir(from)) {
      if (linked.has(name)) continue;
      linked.add(name);
      await symlink(path.join(from, name), path.join(dir, name));
    }
  }
  return dir;
}

describe('scripts/test-setup.sh --check', () => {
  it('on this machine: every requirement ok, "ready", exit 0', async () => {
    const r = await run(['--check']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    // The core requirements, in order; capabilities add their own checks (chromium, tesseract, ...) after them.
    expect(lines.slice(0, 8)).toEqual([
      'test-setup: ok postgresql 127.0.0.1:5432',
      'test-setup: ok redis 127.0.0.1:6379',
      'test-setup: ok psql',
      'test-setup: ok pgbench',
      'test-setup: ok psycopg2 (/usr/bin/python3)',
      'test-setup: ok curl',
      'test-setup: ok jq',
      'test-setup: ok openssl',
    ]);
    for (const line of lines.slice(8, -1)) expect(line).toMatch(/^test-setup: ok \S/);
    expect(lines.at(-1)).toBe('test-setup: ready');
  });

  it('reports what is missing and ends with one line saying what to run; it starts and installs nothing', async () => {
    const [pgPort, redisPort] = [await freePort(), await freePort()];
    const PATH = await pathWithout(['psql', 'pgbench', 'pg_isready', 'jq']);
    const r = await run(['--check'], { PATH, GATEHOUSE_TEST_PG_PORT: String(pgPort), GATEHOUSE_TEST_REDIS_PORT: String(redisPort) });
    expect(r.code).toBe(1);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toContain(`test-setup: missing postgresql 127.0.0.1:${pgPort}: nothing listens there`);
    expect(lines).toContain(`test-setup: missing redis 127.0.0.1:${redisPort}: no PONG`);
    expect(lines).toContain('test-setup: missing psql: Debian package postgresql-client');
    expect(lines).toContain('test-setup: missing pgbench: Debian package postgresql-contrib');
    expect(lines).toContain('test-setup: missing jq: Debian package jq');
    expect(lines.at(-1)).toBe(
      'test-setup: not ready: run: sudo apt-get install -y postgresql-client postgresql-contrib jq; then start postgresql redis on 127.0.0.1 (sudo scripts/test-setup.sh starts installed ones)',
    );
    // Check mode changed nothing: the ports are still closed.
    for (const port of [pgPort, redisPort]) {
      await expect(new Promise((resolve, reject) => net.connect(port, '127.0.0.1').on('connect', resolve).on('error', reject))).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    }
  });

  it('without --check and without root, a missing requirement is one line naming what to run, and exit 1', async () => {
    if (process.getuid?.() !== 0) return expect(process.getuid?.()).not.toBe(0);
    const port = await freePort();
    // setpriv drops to nobody: the ensure mode must then not try to start or install anything.
    const r = await run([], { GATEHOUSE_TEST_REDIS_PORT: String(port) }, ['/usr/bin/setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups']);
    expect(r.code).toBe(1);
    expect(r.stdout.trim().split('\n')).toEqual([`test-setup: not ready (not root, so no service was started and no package installed): missing redis; run: start redis on 127.0.0.1 (sudo scripts/test-setup.sh starts installed ones)`]);
  });

  it('is what npm test runs first and what .ci/run runs', async () => {
    const pkg = (await import('../../package.json', { with: { type: 'json' } })).default as { scripts: Record<string, string> };
    expect(pkg.scripts.pretest).toBe('scripts/test-setup.sh');
    const { readFile } = await import('node:fs/promises');
    expect(await readFile(path.join(ROOT, '.ci', 'run'), 'utf8')).toMatch(/^scripts\/test-setup\.sh$/m);
  });
});
