// Test fixtures for the configuration suite: the real CLI in a child process with a minimal environment, temp dirs, and a valid production configuration to break one thing at a time.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { afterAll, expect } from 'vitest';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = path.join(ROOT, 'node_modules', '.bin');
const TSX = path.join(BIN, 'tsx');
const MAIN = path.join(ROOT, 'src', 'main.ts');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `gatehouse <args>` with PATH and HOME only, plus `vars`. The project's Node 24 comes
 * first on PATH because tsx starts through `#!/usr/bin/env node`.
 */
export function runCli(args: string[], opts: { cwd: string; vars?: Record<string, string>; timeoutMs?: number }): Promise<CliResult> {
  const env = { PATH: `${BIN}:${process.env.PATH ?? '/usr/bin:/bin'}`, HOME: process.env.HOME ?? '/tmp', ...opts.vars };
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, [MAIN, ...args], { env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export const configCheck = (opts: { cwd: string; vars?: Record<string, string> }) => runCli(['config', 'check'], opts);

/** A fresh temp directory, removed by the returned function. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'gh-config-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A fresh temp dir per call, all removed after the calling test file. Call at module level. */
export function tempDirs(): () => string {
  const cleanups: Array<() => void> = [];
  afterAll(() => cleanups.forEach((c) => c()));
  return () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    return t.dir;
  };
}

export function writeYaml(dir: string, tree: unknown, name = 'config.yaml'): string {
  const file = path.join(dir, name);
  writeFileSync(file, stringify(tree));
  return file;
}

/** The problem lines of a failed `config check` (stderr after the header). */
export function problemLines(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('  '))
    .map((l) => l.trim());
}

/** Exit 2, the header counts `count` problems, one line starts with `keyPath:`, and no secret appears anywhere. */
export function expectConfigFailure(result: CliResult, keyPath: string, opts: { count?: number; secrets?: string[] } = {}): void {
  const context = `stdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
  expect(result.code, context).toBe(2);
  const lines = problemLines(result.stderr);
  if (opts.count !== undefined) {
    expect(result.stderr, context).toContain(`gatehouse: the configuration has ${opts.count} problem${opts.count === 1 ? '' : 's'}:`);
    expect(lines, context).toHaveLength(opts.count);
  }
  expect(
    lines.some((l) => l.startsWith(`${keyPath}:`) || l.startsWith(`${keyPath} `)),
    `no problem line names ${keyPath}\n${context}`,
  ).toBe(true);
  expectNoSecrets(result, opts.secrets ?? []);
}

export function expectNoSecrets(result: CliResult, secrets: string[]): void {
  for (const s of secrets) {
    expect(s.length, 'a secret sentinel must be non-trivial').toBeGreaterThanOrEqual(8);
    expect(result.stdout.includes(s), `secret leaked to stdout: ${result.stdout}`).toBe(false);
    expect(result.stderr.includes(s), `secret leaked to stderr: ${result.stderr}`).toBe(false);
  }
}

type Tree = Record<string, unknown>;

export interface ProductionCase {
  /** The YAML tree, written to `config.yaml` in the temp dir by `write()`. */
  yaml: Tree;
  /** SERVICE_* variables and the variables the `env:` references name. */
  vars: Record<string, string>;
  /** Every secret value in the case: none may appear in any output. */
  secrets: string[];
  write(): void;
}

/**
 * A fully valid production configuration: every secret through an `env:` reference of at least
 * 32 characters, database URL with a password and verify-full TLS against a CA file in `dir`,
 * Redis URL with a password, secure cookies, PostgreSQL listener behind a declared TLS offload,
 * strict audit, OIDC over HTTPS.
 */
export function productionCase(dir: string): ProductionCase {
  const caFile = path.join(dir, 'ca.pem');
  writeFileSync(caFile, '-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n');
  const secrets = {
    GH_SIGNING: 'signing-secret-0123456789abcdefghijklmnop',
    GH_PEPPER: 'pepper-secret-0123456789abcdefghijklmnopq',
    GH_OIDC_CLIENT: 'oidc-client-secret-0123456789abcdefghij',
    GH_APPROVAL_KEY: 'approval-enc-key-0123456789abcdefghijklm',
    GH_SLACK_TOKEN: 'xoxb-slack-token-0123456789abcdefghijkl',
  };
  const dbPassword = 'DbPassw0rd-Secret-9f8e7d';
  const redisPassword = 'RedisPassw0rd-Secret-1a2b3c';
  const bootstrapPassword = 'Bootstrap-Owner-Passw0rd-77';
  const c: ProductionCase = {
    yaml: {
      environment: 'production',
      service_role: 'all',
      gateway: { pg_tls: { trusted_tls_offload: true }, tls: { trusted_tls_offload: true } },
      admin: { signing_secret_ref: 'env:GH_SIGNING', cookie: { secure: true }, tls: { trusted_tls_offload: true } },
      database: { url: `postgres://gatehouse:${dbPassword}@db.internal:5432/gatehouse?sslmode=verify-full`, ssl_mode: 'verify-full', ssl_ca_file: caFile },
      redis: { url: `redis://:${redisPassword}@redis.internal:6379/0` },
      auth: {
        api_key_pepper_ref: 'env:GH_PEPPER',
        legacy_unpeppered_keys_allowed: false,
        oidc: {
          enabled: true,
          issuer_url: 'https://idp.example.com/realms/gatehouse',
          admin_client_id: 'gatehouse-admin',
          admin_client_secret_ref: 'env:GH_OIDC_CLIENT',
          admin_redirect_uri: 'https://gatehouse.example.com/auth/oidc/callback',
          allow_insecure_endpoints: false,
        },
      },
      audit: { durability_mode: 'strict' },
      approvals: { encryption_key_ref: 'env:GH_APPROVAL_KEY' },
      notifications: { enabled: true, slack_bot_token_ref: 'env:GH_SLACK_TOKEN', slack_channel: '#approvals' },
    },
    vars: { ...secrets, SERVICE_ADMIN__BOOTSTRAP_PASSWORD: bootstrapPassword },
    secrets: [...Object.values(secrets), dbPassword, redisPassword, bootstrapPassword],
    write: () => writeYaml(dir, c.yaml),
  };
  return c;
}

/** Sets `dotted` in a tree (creating sections), or deletes it when value is undefined. */
export function setIn(tree: Tree, dotted: string, value: unknown): void {
  const keys = dotted.split('.');
  let node = tree;
  for (const k of keys.slice(0, -1)) {
    if (typeof node[k] !== 'object' || node[k] === null) node[k] = {};
    node = node[k] as Tree;
  }
  const last = keys[keys.length - 1]!;
  if (value === undefined) delete node[last];
  else node[last] = value;
}
