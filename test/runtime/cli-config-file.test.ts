// The CLI and `npm start` read different files (spec §9 vs config/development.yaml): the CLI says so on every command where it matters, and names the file it read.
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { baseEnv, ROOT, runCli, startCli } from '../support/cli.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** A working directory like a checkout: config/development.yaml present, no config.yaml. */
async function checkoutLike(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gh-cli-config-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  await mkdir(path.join(dir, 'config'));
  await cp(path.join(ROOT, 'config', 'development.yaml'), path.join(dir, 'config', 'development.yaml'));
  return dir;
}

describe('the configuration the CLI reads', () => {
  it('config check without a file says it is not what npm start uses, and how to get that', async () => {
    const cwd = await checkoutLike();
    const r = await runCli(['config', 'check'], { env: baseEnv(), cwd });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe('# effective configuration (no file; defaults and environment); secrets masked');
    expect(r.stdout.split('\n')[1]).toMatch(/^# NOTE: no configuration file was read .* not config\/development\.yaml, which `npm start` uses/);
    expect(r.stderr).toContain('SERVICE_CONFIG_PATH=config/development.yaml npx gatehouse config check');
    expect(r.stdout).toMatch(/pg_port: 5432/);
  });

  it('with SERVICE_CONFIG_PATH=config/development.yaml it shows what npm start runs, without the note', async () => {
    const cwd = await checkoutLike();
    const r = await runCli(['config', 'check'], { env: baseEnv({ SERVICE_CONFIG_PATH: 'config/development.yaml' }), cwd });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toContain('(file: ');
    expect(r.stdout).not.toContain('NOTE');
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/pg_port: 15432/);
  });

  it('start says it before starting, and the started line names the file it read', { timeout: 120_000 }, async () => {
    const cwd = await checkoutLike();
    const started = await startCli(['start'], { env: baseEnv({ SERVICE_GATEWAY__HTTP_PORT: '0', SERVICE_GATEWAY__PG_PORT: '0', SERVICE_ADMIN__PORT: '0' }), cwd });
    const exit = await started.stop('SIGTERM');
    expect(exit.code).toBe(0);
    const { stdout, stderr } = started.output();
    expect(stderr).toContain('SERVICE_CONFIG_PATH=config/development.yaml npx gatehouse start');
    const line = stdout.split('\n').find((l) => l.includes('"gatehouse started"'))!;
    expect(JSON.parse(line).config_file).toBe('none (defaults and environment)');
  });

  it('a directory without config/development.yaml gets no note', async () => {
    const cwd = await mkdtemp(path.join(tmpdir(), 'gh-cli-config-'));
    cleanups.push(() => rm(cwd, { recursive: true, force: true }));
    const r = await runCli(['config', 'check'], { env: baseEnv(), cwd });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('NOTE');
  });
});
