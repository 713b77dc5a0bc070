// deploy/ checked with what runs here (no Docker daemon, no Helm): the compose file through the compose client's own `config`, each role's environment through Gatehouse's configuration loader, the Dockerfile's shape, and the Helm chart statically (values used exist and are documented, every SERVICE_* key is real, the production environment it sets passes the start-up invariants).
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
    const used = new Set(templates.flatMap((t) => [...t.text.matchAll(/\.Values\.([A-Za-z0-9_.]+)/g)].map((m) => m[1]!)));
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

  test('Deployments per role, the migration hook, Services on the spec ports, probes, PDB and HPA are there', () => {
    const all = templates.map((t) => t.text).join('\n');
    for (const kind of ['Deployment', 'Job', 'Service', 'PodDisruptionBudget', 'HorizontalPodAutoscaler']) expect(all).toContain(`kind: ${kind}`);
    for (const role of ['gateway', 'admin', 'worker']) expect(all).toContain(`args: [start, --role, ${role}]`);
    expect(all).toContain('helm.sh/hook: pre-install,pre-upgrade');
    expect(all).toContain('httpGet: { path: /ready, port: http }');
    expect(all).toContain('httpGet: { path: /health, port: http }');
    expect(values.gateway).toMatchObject({ service: { httpPort: 3000, pgPort: 5432 } });
    expect(values.admin).toMatchObject({ service: { port: 9090 } });
    // Secrets only by reference: no template or value holds one.
    expect(all).not.toMatch(/kind: Secret\b/);
    expect(all.match(/valueFrom: \{ secretKeyRef/g)!.length).toBe(5);
  });

  test('the environment it gives every container names real keys and passes the production invariants', () => {
    const helpers = templates.find((t) => t.file === '_helpers.tpl')!.text;
    const block = helpers.slice(helpers.indexOf('define "gatehouse.env"'), helpers.indexOf('define "gatehouse.volumeMounts"'));
    const env: Record<string, string> = {};
    const secretSample = (key: string) => (key.includes('url') ? (key.includes('redis') ? 'rediss://:pw@redis.internal:6380/0' : 'postgres://gatehouse:pw@db.internal:5432/gatehouse') : `sample-secret-${key}-0123456789abcdefghijklmnop`);
    // Entries outside `if` blocks: `- name: X` followed by `value: <literal or .Values path>` or `valueFrom: secretKeyRef`.
    const unconditional = block.replace(/\{\{- if [\s\S]*?\{\{- end \}\}/g, '').replace(/\{\{- range [\s\S]*?\{\{- end \}\}/g, '');
    for (const m of unconditional.matchAll(/- name: (\S+)\n\s+(value|valueFrom): (.+)/g)) {
      const [, name, kind, raw] = m as unknown as [string, string, string, string];
      if (kind === 'valueFrom') {
        env[name] = secretSample(/key: \{\{ \.Values\.secrets\.keys\.(\w+)/.exec(raw)![1]!.toLowerCase());
        continue;
      }
      const ref = /\{\{ (?:mul )?\.Values\.([\w.]+)(?: (\d+))?/.exec(raw);
      env[name] = ref ? String(ref[2] ? Number(lookup(ref[1]!)) * Number(ref[2]) : lookup(ref[1]!)) : raw.replace(/^"(.*)"$/, '$1');
    }
    expect(Object.keys(env).length).toBeGreaterThan(20);
    for (const key of Object.keys(env).filter((k) => k.startsWith('SERVICE_'))) expect(KNOWN_ENV, key).toContain(key);
    for (const role of ['gateway', 'admin', 'worker']) {
      const loaded = loadConfig({ env: { ...env, SERVICE_SERVICE_ROLE: role }, cwd: mkdtempSync(path.join(tmpdir(), 'gh-helm-')) });
      expect(loaded.ok ? [] : loaded.problems, role).toEqual([]);
      if (loaded.ok) expect(loaded.config.environment).toBe('production');
    }
  });

});
