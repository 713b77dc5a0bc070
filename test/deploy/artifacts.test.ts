// deploy/ checked with what runs here (no Docker daemon): the compose file through the compose client's own `config`, each role's environment through Gatehouse's configuration loader, the Dockerfile's shape, and the Helm chart's sources (values used exist and are documented); test/deploy/helm.test.ts renders the chart with Helm itself.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { leafPaths } from '../../scripts/config-doc.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const DEPLOY = path.join(ROOT, 'deploy');
const CHART = path.join(DEPLOY, 'helm', 'gatehouse');

const SECRETS = {
  GATEHOUSE_DB_PASSWORD: 'compose-test-db-password-0123456789',
  GATEHOUSE_SIGNING_SECRET: 'compose-test-signing-secret-0123456789abcdef',
  GATEHOUSE_PEPPER: 'compose-test-pepper-0123456789abcdefghijkl',
  GATEHOUSE_BOOTSTRAP_PASSWORD: 'compose-test-bootstrap-password-1',
};

/** The compose client: the `docker compose` plugin where installed, else Debian's docker-compose. */
function composeCommand(): string[] {
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  return ['docker-compose'];
}

function compose(args: string[], env: Record<string, string>) {
  const [cmd, ...pre] = composeCommand();
  return spawnSync(cmd!, [...pre, '-f', path.join(DEPLOY, 'compose.yaml'), ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: tmpdir(), ...env }, encoding: 'utf8' });
}

const envName = (key: string) => `SERVICE_${key.toUpperCase().replace(/\./g, '__')}`;
const KNOWN_ENV = new Set(leafPaths().map(envName));

describe('deploy/compose.yaml', () => {
  const rendered = compose(['config'], SECRETS);

  test('the compose client accepts it', () => {
    expect(rendered.stderr.replace(/.*version.*obsolete.*\n?/i, '')).not.toMatch(/error/i);
    expect(rendered.status).toBe(0);
  });

  test('it holds no usable credential: without the secrets it refuses to render, naming each', () => {
    const refused = compose(['config'], {});
    expect(refused.status).not.toBe(0);
    expect(refused.stderr + refused.stdout).toMatch(/GATEHOUSE_(DB_PASSWORD|SIGNING_SECRET|PEPPER|BOOTSTRAP_PASSWORD)/);
    const file = readFileSync(path.join(DEPLOY, 'compose.yaml'), 'utf8');
    for (const secret of Object.values(SECRETS)) expect(file).not.toContain(secret);
  });

  test('PostgreSQL, Redis, a migration job, two gateways, an admin and a worker, hardened, each role started with its own command', () => {
    const doc = parse(rendered.stdout) as { services: Record<string, { command?: string[]; read_only?: boolean; cap_drop?: string[]; depends_on?: Record<string, { condition: string }>; environment?: Record<string, string>; ports?: unknown[] }> };
    const s = doc.services;
    expect(Object.keys(s).sort()).toEqual(['admin', 'gateway-1', 'gateway-2', 'migrate', 'postgres', 'redis', 'worker']);
    expect(s.migrate!.command).toEqual(['migrate']);
    for (const [name, role] of [['gateway-1', 'gateway'], ['gateway-2', 'gateway'], ['admin', 'admin'], ['worker', 'worker']] as const) {
      expect(s[name]!.command).toEqual(['start', '--role', role]);
      expect(s[name]!.depends_on!.migrate!.condition).toBe('service_completed_successfully');
    }
    for (const name of ['migrate', 'gateway-1', 'gateway-2', 'admin', 'worker']) {
      expect(s[name]!.read_only).toBe(true);
      expect(s[name]!.cap_drop).toEqual(['ALL']);
    }
  });

  test('each Gatehouse service\'s environment is a valid configuration for its role', () => {
    const doc = parse(rendered.stdout) as { services: Record<string, { command: string[]; environment: Record<string, string> }> };
    for (const name of ['migrate', 'gateway-1', 'gateway-2', 'admin', 'worker']) {
      const env = doc.services[name]!.environment;
      for (const key of Object.keys(env).filter((k) => k.startsWith('SERVICE_'))) expect(KNOWN_ENV, `${name}: ${key}`).toContain(key);
      const role = doc.services[name]!.command.includes('--role') ? doc.services[name]!.command.at(-1)! : 'migration';
      const loaded = loadConfig({ env: { ...env, SERVICE_SERVICE_ROLE: role }, cwd: mkdtempSync(path.join(tmpdir(), 'gh-compose-')) });
      expect(loaded.ok ? [] : loaded.problems, name).toEqual([]);
    }
  });
});

describe('deploy/Dockerfile', () => {
  const dockerfile = readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8');
  const lines = dockerfile.split('\n').filter((l) => !l.startsWith('#'));

  test('multi-stage, non-root, gatehouse entrypoint with a role, HEALTHCHECK on /health, the spec ports', () => {
    expect(lines.filter((l) => l.startsWith('FROM ')).length).toBeGreaterThanOrEqual(3);
    expect(lines.filter((l) => l.startsWith('USER ')).at(-1)).toBe('USER node');
    expect(dockerfile).toMatch(/^ENTRYPOINT \["gatehouse"\]$/m);
    expect(dockerfile).toMatch(/^CMD \["start", "--role", "gateway"\]$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK /m);
    expect(dockerfile).toContain('127.0.0.1:3000/health');
    expect(dockerfile).toMatch(/^EXPOSE 3000 5432 9090$/m);
  });

  test('everything it copies from the repository exists', () => {
    for (const line of lines.filter((l) => l.startsWith('COPY ') && !l.includes('--from='))) {
      const parts = line.split(/\s+/).slice(1).filter((p) => !p.startsWith('--'));
      for (const source of parts.slice(0, -1)) expect(existsSync(path.join(ROOT, source)), source).toBe(true);
    }
    expect(existsSync(path.join(DEPLOY, 'Dockerfile.dockerignore'))).toBe(true);
  });
});

describe('deploy/helm/gatehouse', () => {
  const values = parse(readFileSync(path.join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
  const readme = readFileSync(path.join(CHART, 'README.md'), 'utf8');
  const templates = readdirSync(path.join(CHART, 'templates')).map((f) => ({ file: f, text: readFileSync(path.join(CHART, 'templates', f), 'utf8') }));
  const lookup = (p: string): unknown => p.split('.').reduce<unknown>((o, k) => (o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), values);

  test('Chart.yaml names the release line', () => {
    const chart = parse(readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as Record<string, string>;
    expect(chart.apiVersion).toBe('v2');
    expect(chart.appVersion).toBe((JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
  });

  test('every .Values path a template uses exists in values.yaml', () => {
    // `$v` is the helpers' name for .Values where their context is a dict (templates/_helpers.tpl).
    const used = new Set(templates.flatMap((t) => [...t.text.matchAll(/(?:\.Values|\$v)\.([A-Za-z0-9_.]+)/g)].map((m) => m[1]!)));
    expect(used.size).toBeGreaterThan(20);
    for (const p of used) expect(lookup(p), p).not.toBeUndefined();
  });

  test('every value is documented in the chart README', () => {
    const leaves = (o: unknown, prefix: string): string[] =>
      o !== null && typeof o === 'object' && !Array.isArray(o) && Object.keys(o).length > 0 && !['resources', 'podSecurityContext', 'securityContext'].includes(prefix.split('.').pop()!)
        ? Object.entries(o as Record<string, unknown>).flatMap(([k, v]) => leaves(v, prefix ? `${prefix}.${k}` : k))
        : [prefix];
    for (const key of leaves(values, '')) expect(readme, key).toContain(`\`${key}\``);
  });
});
