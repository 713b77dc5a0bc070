// deploy/helm/gatehouse linted and rendered by the real Helm (v4.1.4, fetched by scripts/test-setup.sh), every rendered manifest schema-checked against the Kubernetes API schemas, each role's environment loaded by Gatehouse's configuration loader, and non-default values rendered as the chart README documents (docs/deployment.md "What was verified here").
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IJob } from 'kubernetes-models/batch/v1/Job';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import type { IService } from 'kubernetes-models/v1/Service';
import { beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { credentialUrlPaths, secretRefPaths, secretValuePaths } from '../../src/config/schema.js';
import { leafPaths } from '../../scripts/config-doc.js';
import { CHART, HELM_VERSION, helm, helmLint, helmTemplate, renderChart, type Manifest } from '../support/helm.js';
import { schemaProblems } from '../support/kubernetes-schema.js';

const PRODUCTION_VALUES = path.join(CHART, 'ci', 'production-values.yaml');

const envName = (key: string) => `SERVICE_${key.toUpperCase().replace(/\./g, '__')}`;
const KNOWN_ENV = new Set(leafPaths().map(envName));
/** Settings that hold a secret or may embed one (src/config/schema.ts): the chart may only pass them by reference. */
const SECRET_SETTINGS = new Set([...credentialUrlPaths, ...secretValuePaths, ...secretRefPaths].map(envName));

/** Values sets rendered once each; every one must pass lint, the schemas and the configuration loader. */
const TLS_ON = { tls: { httpOffload: false, httpSecretName: 'gatehouse-http-tls', gatewayClientCaSecretName: 'gatehouse-agent-ca', pgOffload: false, pgSecretName: 'gatehouse-pg-tls' } };
const EXTERNAL_SECRET = {
  secrets: {
    name: 'vault-gatehouse',
    keys: { databaseUrl: 'db', redisUrl: 'cache', signingSecret: 'signing', apiKeyPepper: 'pepper', bootstrapPassword: 'owner' },
    databaseCa: { name: 'corp-ca', key: 'bundle.pem' },
  },
};
const NO_AUTOSCALING = { gateway: { replicas: 4, autoscaling: { enabled: false } } };
const LEAN = { gateway: { pgEnabled: false }, migration: { enabled: false }, metrics: { podAnnotations: false } };
const EXTRA_SECRETS = {
  extraEnv: { SERVICE_OBSERVABILITY__LOG_LEVEL: 'warn' },
  extraSecretEnv: [
    { name: 'SERVICE_DATABASE__READ_URL', secretName: 'gatehouse-replica', key: 'url' },
    { name: 'SERVICE_APPROVALS__ENCRYPTION_KEY_REF', secretName: 'gatehouse-extra', key: 'approvals-key' },
    { name: 'SERVICE_AUTH__OIDC__ADMIN_CLIENT_SECRET_REF', secretName: 'gatehouse-extra', key: 'oidc-client-secret' },
    { name: 'EXTRA_TOKEN', secretName: 'gatehouse-extra', key: 'extra-token' },
  ],
};
const SERVICE_PORTS = { gateway: { service: { httpPort: 80, pgPort: 6432 } }, admin: { service: { port: 443 } } };
const VALUE_SETS: Record<string, Array<string | Record<string, unknown>>> = {
  default: [],
  production: [PRODUCTION_VALUES],
  'tls on': [TLS_ON],
  'external secret': [EXTERNAL_SECRET],
  'autoscaling off': [NO_AUTOSCALING],
  'no wire listener, migration or metrics annotations': [LEAN],
  'extra secrets': [EXTRA_SECRETS],
  'other service ports': [SERVICE_PORTS],
};

const renders = new Map<string, Manifest[]>();
const rendered = (set: keyof typeof VALUE_SETS) => {
  if (!renders.has(set)) renders.set(set, renderChart(CHART, VALUE_SETS[set]));
  return renders.get(set)!;
};

// --- reading the rendered objects

const of = <T>(ms: Manifest[], kind: string) => ms.filter((m) => m.kind === kind) as unknown as Array<T & Manifest>;
const named = <T>(ms: Manifest[], kind: string, suffix: string): T & Manifest => {
  const found = of<T>(ms, kind).find((m) => m.metadata.name === `gh-gatehouse-${suffix}`);
  if (!found) throw new Error(`no ${kind} gh-gatehouse-${suffix} rendered`);
  return found;
};

interface Workload {
  name: string;
  role: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  pod: IPodSpec;
  container: IContainer;
}

/** Every pod the chart runs: the Deployments and the migration Job, each with its one container and the role it starts. */
function workloads(ms: Manifest[]): Workload[] {
  const pods = [...of<IDeployment>(ms, 'Deployment'), ...of<IJob>(ms, 'Job')].map((w) => ({ name: w.metadata.name, template: w.spec!.template }));
  return pods.map(({ name, template }) => {
    expect(template.spec!.containers, name).toHaveLength(1);
    const container = template.spec!.containers[0]!;
    const args = container.args ?? [];
    const role = args[0] === 'migrate' ? 'migration' : args[0] === 'start' && args[1] === '--role' ? args[2]! : `unknown (${args.join(' ')})`;
    return { name, role, labels: template.metadata?.labels ?? {}, annotations: template.metadata?.annotations ?? {}, pod: template.spec!, container };
  });
}
const role = (ms: Manifest[], r: string) => workloads(ms).find((w) => w.role === r)!;

const envOf = (c: IContainer) => new Map((c.env ?? []).map((e) => [e.name, e]));
const selects = (selector: Record<string, string> | undefined, labels: Record<string, string>) =>
  selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

/** The environment a container would see, with a sample for each Secret key it references (long enough for production). */
function containerEnvironment(c: IContainer): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef) {
      env[e.name] = /^SERVICE_DATABASE__\w*URL$/.test(e.name) ? 'postgres://gatehouse:pw@db.internal:5432/gatehouse' : e.name === 'SERVICE_REDIS__URL' ? 'rediss://:pw@redis.internal:6380/0' : `sample-${e.valueFrom.secretKeyRef.key}-0123456789abcdefghijklmnopqrstuvwxyz`;
    } else throw new Error(`${e.name}: neither a value nor a secretKeyRef`);
  }
  return env;
}

/** The volume a file path is served from in this pod: a mount above it, and for a Secret with items, an item at that path. */
function volumeFor(w: Workload, file: string) {
  const mount = (w.container.volumeMounts ?? []).find((m) => file.startsWith(`${m.mountPath}/`));
  if (!mount) return undefined;
  const volume = (w.pod.volumes ?? []).find((v) => v.name === mount.name);
  const relative = file.slice(mount.mountPath.length + 1);
  if (volume?.secret?.items && !volume.secret.items.some((i) => i.path === relative)) return undefined;
  return { mount, volume };
}

beforeAll(() => {
  const version = helm(['version', '--template', '{{.Version}}']);
  expect(version.stdout, `Helm at .tools/helm/helm (scripts/test-setup.sh): ${version.stderr}`).toBe(HELM_VERSION);
});

describe(`deploy/helm/gatehouse through Helm ${HELM_VERSION}`, () => {
  test.each([
    ['the default values', []],
    ['ci/production-values.yaml', [PRODUCTION_VALUES]],
  ] as const)('helm lint --strict passes with %s, without a warning', (_name, values) => {
    const run = helmLint(CHART, [...values]);
    const output = run.stdout + run.stderr;
    expect(output).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    expect(output).not.toMatch(/\[(WARNING|ERROR)\]/);
    expect(run.status, output).toBe(0);
  });

  test('every rendered manifest of every values set passes the Kubernetes API schemas: types, required fields, no unknown field', async () => {
    const all = Object.keys(VALUE_SETS).flatMap((set) => rendered(set).map((m) => ({ ...m, metadata: { ...m.metadata, name: `${m.metadata.name} [${set}]` } })));
    expect(all.length).toBeGreaterThan(40);
    expect(await schemaProblems(all)).toEqual([]);
  }, 120_000);

  test('a Deployment per role, each starting its role, and the migration Job as a pre-install/pre-upgrade hook', () => {
    const ms = rendered('default');
    expect(of<IDeployment>(ms, 'Deployment').map((d) => d.metadata.name).sort()).toEqual(['gh-gatehouse-admin', 'gh-gatehouse-gateway', 'gh-gatehouse-worker']);
    expect(workloads(ms).map((w) => [w.name, w.role]).sort()).toEqual([
      ['gh-gatehouse-admin', 'admin'],
      ['gh-gatehouse-gateway', 'gateway'],
      ['gh-gatehouse-migrate-1', 'migration'],
      ['gh-gatehouse-worker', 'worker'],
    ]);
    for (const d of of<IDeployment>(ms, 'Deployment')) expect(selects(d.spec!.selector.matchLabels, d.spec!.template.metadata!.labels!), d.metadata.name).toBe(true);
    const job = of<IJob>(ms, 'Job')[0]!;
    expect(job.metadata.annotations!['helm.sh/hook']!.split(',').sort()).toEqual(['pre-install', 'pre-upgrade']);
    expect(job.metadata.annotations!['helm.sh/hook-delete-policy']).toContain('before-hook-creation');
    expect(job.spec!.template.spec!.restartPolicy).toBe('Never');
    expect(envOf(job.spec!.template.spec!.containers[0]!).get('SERVICE_SERVICE_ROLE')?.value).toBe('migration');
    // The services do not migrate on start: the hook did (docs/operations.md "Upgrades").
    for (const w of workloads(ms)) expect(envOf(w.container).get('SERVICE_DATABASE__MIGRATE_ON_START')?.value, w.name).toBe('false');
  });

  test('Services carry the spec ports (gateway 3000 and 5432, admin 9090) to the same ports of the pods they select, and only those pods', () => {
    const ms = rendered('default');
    const expected = { gateway: { http: 3000, pgwire: 5432 }, admin: { http: 9090 } } as const;
    for (const [component, ports] of Object.entries(expected)) {
      const svc = named<IService>(ms, 'Service', component);
      const w = role(ms, component);
      for (const other of workloads(ms)) expect(selects(svc.spec!.selector, other.labels), `${svc.metadata.name} selects ${other.name}`).toBe(other.name === w.name);
      expect(Object.fromEntries(svc.spec!.ports!.map((p) => [p.name, p.port]))).toEqual(ports);
      for (const p of svc.spec!.ports!) {
        const target = w.container.ports!.find((cp) => cp.name === p.targetPort || cp.containerPort === p.targetPort);
        expect(target?.containerPort, `${svc.metadata.name} ${p.name}`).toBe(p.port);
      }
    }
    expect(role(ms, 'worker').container.ports ?? []).toEqual([]);
  });

  test('readiness on /ready and liveness on /health, over HTTP, on a port the container declares; the worker and the Job have none', () => {
    const ms = rendered('default');
    for (const r of ['gateway', 'admin']) {
      const c = role(ms, r).container;
      const ports = new Set((c.ports ?? []).map((p) => p.name));
      expect(c.readinessProbe?.httpGet?.path, r).toBe('/ready');
      expect(c.livenessProbe?.httpGet?.path, r).toBe('/health');
      for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe].filter((p) => p !== undefined)) {
        expect(ports.has(String(probe.httpGet!.port)), `${r} probe port ${probe.httpGet!.port}`).toBe(true);
        expect(probe.httpGet!.scheme ?? 'HTTP', r).toBe('HTTP');
      }
    }
    for (const r of ['worker', 'migration']) expect(role(ms, r).container.readinessProbe ?? role(ms, r).container.livenessProbe, r).toBeUndefined();
    // A pod told to stop gets its drain time (gateway.timeouts.shutdown_grace_ms) and then some.
    const gateway = role(ms, 'gateway');
    expect(gateway.pod.terminationGracePeriodSeconds! * 1000).toBeGreaterThan(Number(envOf(gateway.container).get('SERVICE_GATEWAY__TIMEOUTS__SHUTDOWN_GRACE_MS')!.value));
  });

  test('PodDisruptionBudgets select the gateways and the admin and leave room for a drain; the HPA scales the gateway Deployment, which leaves replicas to it', () => {
    for (const set of ['default', 'production'] as const) {
      const ms = rendered(set);
      const hpa = named<IHorizontalPodAutoscaler>(ms, 'HorizontalPodAutoscaler', 'gateway');
      const gateway = named<IDeployment>(ms, 'Deployment', 'gateway');
      expect(hpa.spec!.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: gateway.metadata.name });
      expect(gateway.spec!.replicas, set).toBeUndefined();
      expect(hpa.spec!.metrics![0]!.resource!.name).toBe('cpu');
      // CPU utilisation is measured against the request: without one the HPA cannot act.
      expect(role(ms, 'gateway').container.resources?.requests?.cpu, set).toBeDefined();
      const replicas = { gateway: hpa.spec!.minReplicas!, admin: named<IDeployment>(ms, 'Deployment', 'admin').spec!.replicas! };
      for (const [component, min] of Object.entries(replicas)) {
        const pdb = named<IPodDisruptionBudget>(ms, 'PodDisruptionBudget', component);
        for (const w of workloads(ms)) expect(selects(pdb.spec!.selector!.matchLabels, w.labels), `${pdb.metadata.name} selects ${w.name}`).toBe(w.role === component);
        expect(Number(pdb.spec!.minAvailable), `${set} ${component}`).toBeLessThan(min);
      }
    }
  });

  test('object names and label values fit the API\'s rules (DNS labels of at most 63 characters) even for the longest release name Helm accepts', () => {
    const release = `gatehouse-${'x'.repeat(43)}`;
    expect(release).toHaveLength(53);
    const ms = renderChart(CHART, [], release);
    const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
    const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
    for (const m of ms) {
      expect(m.metadata.name.length, m.metadata.name).toBeLessThanOrEqual(63);
      expect(m.metadata.name).toMatch(m.kind === 'Service' ? /^[a-z]([-a-z0-9]*[a-z0-9])?$/ : dnsLabel);
      for (const value of Object.values(m.metadata.labels ?? {})) expect(value.length <= 63 && labelValue.test(value), `${m.metadata.name}: label ${value}`).toBe(true);
    }
    for (const kind of new Set(ms.map((m) => m.kind))) {
      const names = ms.filter((m) => m.kind === kind).map((m) => m.metadata.name);
      expect(new Set(names).size, kind).toBe(names.length);
    }
    const gateway = of<IDeployment>(ms, 'Deployment').find((d) => d.metadata.name.endsWith('-gateway'))!;
    expect(of<IHorizontalPodAutoscaler>(ms, 'HorizontalPodAutoscaler')[0]!.spec!.scaleTargetRef.name).toBe(gateway.metadata.name);
  });

  test('every pod runs as a non-root user with a read-only root filesystem, no privilege escalation, no capabilities and the runtime seccomp profile', () => {
    for (const set of Object.keys(VALUE_SETS)) {
      for (const w of workloads(rendered(set))) {
        const where = `${set}: ${w.name}`;
        expect(w.pod.securityContext?.runAsNonRoot, where).toBe(true);
        expect(w.pod.securityContext?.runAsUser, where).not.toBe(0);
        expect(w.pod.securityContext?.seccompProfile?.type, where).toBe('RuntimeDefault');
        expect(w.container.securityContext?.readOnlyRootFilesystem, where).toBe(true);
        expect(w.container.securityContext?.allowPrivilegeEscalation, where).toBe(false);
        expect(w.container.securityContext?.privileged ?? false, where).toBe(false);
        expect(w.container.securityContext?.capabilities?.drop, where).toContain('ALL');
        expect(w.container.securityContext?.capabilities?.add ?? [], where).toEqual([]);
        // With a read-only root the audit spool must be on a writable volume (audit.spool.dir).
        const spool = volumeFor(w, `${envOf(w.container).get('SERVICE_AUDIT__SPOOL__DIR')!.value}/x`);
        expect(spool?.volume?.emptyDir, where).toBeDefined();
        expect(spool?.mount.readOnly ?? false, where).toBe(false);
      }
    }
  });

  test('secrets only by reference: no Secret rendered, every secret-bearing setting from a secretKeyRef of the configured Secret, no credential in a literal', () => {
    for (const [set, secretName] of [['default', 'gatehouse'], ['production', 'gatehouse-prod'], ['external secret', 'vault-gatehouse']] as const) {
      const ms = rendered(set);
      expect(ms.filter((m) => m.kind === 'Secret' || m.kind === 'ConfigMap'), set).toEqual([]);
      for (const w of workloads(ms)) {
        const env = envOf(w.container);
        const fromSecret = (name: string) => env.get(name)?.valueFrom?.secretKeyRef?.name === secretName;
        const secretSettings = [...env.keys()].filter((k) => SECRET_SETTINGS.has(k));
        expect(secretSettings.sort(), `${set}: ${w.name}`).toEqual(['SERVICE_ADMIN__BOOTSTRAP_PASSWORD', 'SERVICE_ADMIN__SIGNING_SECRET_REF', 'SERVICE_AUTH__API_KEY_PEPPER_REF', 'SERVICE_DATABASE__URL', 'SERVICE_REDIS__URL']);
        for (const name of secretSettings) {
          const value = env.get(name)!.value;
          const ok = value === undefined ? fromSecret(name) : value.startsWith('env:') && fromSecret(value.slice(4));
          expect(ok, `${set}: ${w.name} ${name} = ${value ?? 'valueFrom'}`).toBe(true);
        }
        for (const e of env.values()) expect(e.value ?? '', `${set}: ${w.name} ${e.name}`).not.toMatch(/:\/\/[^/\s]*:[^@/\s]*@/);
        for (const e of env.values()) if (e.valueFrom?.secretKeyRef) expect(e.valueFrom.secretKeyRef.name, `${set}: ${w.name} ${e.name}`).toBe(secretName);
      }
    }
  });

  test.each(Object.keys(VALUE_SETS))('each role\'s rendered environment (%s) is a valid production configuration, with every file it names mounted', (set) => {
    const ms = rendered(set);
    expect(workloads(ms).length).toBeGreaterThanOrEqual(3);
    for (const w of workloads(ms)) {
      const env = containerEnvironment(w.container);
      expect(new Set((w.container.env ?? []).map((e) => e.name)).size, `${w.name}: a variable set twice`).toBe((w.container.env ?? []).length);
      for (const key of Object.keys(env).filter((k) => k.startsWith('SERVICE_'))) expect(KNOWN_ENV, `${w.name}: ${key}`).toContain(key);
      for (const [key, value] of Object.entries(env).filter(([k, v]) => /_FILE$/.test(k) && v.startsWith('/'))) expect(volumeFor(w, value), `${w.name}: ${key} ${value}`).toBeDefined();
      const loaded = loadConfig({ env: { SERVICE_SERVICE_ROLE: w.role, ...env }, cwd: mkdtempSync(path.join(tmpdir(), 'gh-helm-')) });
      expect(loaded.ok ? [] : loaded.problems, `${set}: ${w.name}`).toEqual([]);
      if (loaded.ok) {
        expect(loaded.config.environment).toBe('production');
        expect(loaded.config.service_role).toBe(w.role);
      }
    }
  });
});

describe('deploy/helm/gatehouse with non-default values, as its README documents them', () => {
  test('tls.httpSecretName and tls.pgSecretName: every listener serves TLS from its mounted Secret, no offload is declared, and the probes speak HTTPS', () => {
    const ms = rendered('tls on');
    for (const r of ['gateway', 'admin']) {
      const w = role(ms, r);
      const env = envOf(w.container);
      const section = r === 'gateway' ? 'GATEWAY' : 'ADMIN';
      expect(env.get(`SERVICE_${section}__TLS__TRUSTED_TLS_OFFLOAD`)?.value, r).toBe('false');
      for (const file of ['CERT_FILE', 'KEY_FILE']) expect(volumeFor(w, env.get(`SERVICE_${section}__TLS__${file}`)!.value!)?.volume?.secret?.secretName, r).toBe('gatehouse-http-tls');
      for (const probe of [w.container.readinessProbe, w.container.livenessProbe, w.container.startupProbe].filter((p) => p !== undefined)) expect(probe.httpGet!.scheme, r).toBe('HTTPS');
      expect(w.annotations['prometheus.io/scheme'], r).toBe('https');
    }
    const gateway = role(ms, 'gateway');
    const env = envOf(gateway.container);
    expect(env.get('SERVICE_GATEWAY__PG_TLS__TRUSTED_TLS_OFFLOAD')?.value).toBe('false');
    expect(env.get('SERVICE_GATEWAY__PG_TLS__REQUIRE_CLIENT_TLS')?.value).toBe('true');
    for (const file of ['CERT_FILE', 'KEY_FILE']) expect(volumeFor(gateway, env.get(`SERVICE_GATEWAY__PG_TLS__${file}`)!.value!)?.volume?.secret?.secretName).toBe('gatehouse-pg-tls');
    // Mutual TLS on the gateway's HTTP listener: the agents' CA from its own Secret, in the gateways only.
    const ca = volumeFor(gateway, env.get('SERVICE_GATEWAY__TLS__CLIENT_CA_FILE')!.value!);
    expect(ca?.volume?.secret).toEqual({ secretName: 'gatehouse-agent-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] });
    expect(ca?.mount.readOnly).toBe(true);
    const admin = role(ms, 'admin');
    expect([...envOf(admin.container).keys()].filter((k) => k.includes('CLIENT_CA'))).toEqual([]);
    expect((admin.pod.volumes ?? []).map((v) => v.secret?.secretName)).not.toContain('gatehouse-agent-ca');
    // The defaults: offload declared, no certificate mounted, probes over HTTP.
    const plain = role(rendered('default'), 'gateway');
    expect(envOf(plain.container).get('SERVICE_GATEWAY__TLS__TRUSTED_TLS_OFFLOAD')?.value).toBe('true');
    expect([...envOf(plain.container).keys()].filter((k) => k.endsWith('_FILE'))).toEqual(['SERVICE_DATABASE__SSL_CA_FILE']);
  });

  test('production without TLS or a declared offload, mutual TLS without TLS, and a budget that keeps every pod are refused by Helm, naming the value to set', () => {
    for (const [values, name] of [
      [{ tls: { httpOffload: false } }, 'tls.httpSecretName'],
      [{ tls: { pgOffload: false } }, 'tls.pgSecretName'],
      [{ tls: { gatewayClientCaSecretName: 'agents-ca' } }, 'tls.gatewayClientCaSecretName'],
      [{ gateway: { pdb: { minAvailable: 2 } } }, 'gateway.pdb.minAvailable: 2 is not below gateway.autoscaling.minReplicas (2)'],
      [{ gateway: { autoscaling: { enabled: false }, replicas: 3, pdb: { minAvailable: 3 } } }, 'gateway.pdb.minAvailable: 3 is not below gateway.replicas (3)'],
      [{ gateway: { pdb: { minAvailable: '100%' } } }, 'gateway.pdb.minAvailable: "100%"'],
      // A share keeps its pods rounded up, as Kubernetes rounds it: 60% of 2 pods, or 1% of 1, is all of them.
      [{ gateway: { pdb: { minAvailable: '60%' } } }, 'gateway.pdb.minAvailable: "60%" keeps 2 of the 2 pods of gateway.autoscaling.minReplicas'],
      [{ admin: { pdb: { minAvailable: '1%' } } }, 'admin.pdb.minAvailable: "1%" keeps 1 of the 1 pods of admin.replicas'],
      [{ admin: { pdb: { minAvailable: 1 } } }, 'admin.pdb.minAvailable: 1 is not below admin.replicas (1)'],
    ] as const) {
      const run = helmTemplate(CHART, [values]);
      expect(run.status, JSON.stringify(values)).not.toBe(0);
      // `helm install` renders the same way; `helm lint` would only log it (its lint mode makes `fail` non-fatal).
      expect(run.stderr).toContain(name);
    }
    // Without the wire listener its TLS does not matter; a budget below the pods, or of none, is fine.
    expect(helmTemplate(CHART, [{ tls: { pgOffload: false }, gateway: { pgEnabled: false } }]).status).toBe(0);
    expect(helmTemplate(CHART, [{ admin: { replicas: 2, pdb: { minAvailable: 1 } }, gateway: { pdb: { minAvailable: '50%' } } }]).status).toBe(0);
    expect(helmTemplate(CHART, [{ admin: { pdb: { minAvailable: '0%' } }, gateway: { autoscaling: { minReplicas: 3 }, pdb: { minAvailable: '66%' } } }]).status).toBe(0);
  });

  test('spool.maxBytes: the spool stops at its bound, 32 MiB short of its volume', () => {
    for (const [set, maxBytes] of [['default', 1_073_741_824], ['production', 1_073_741_824]] as const) {
      for (const w of workloads(rendered(set))) {
        const env = envOf(w.container);
        expect(env.get('SERVICE_AUDIT__SPOOL__MAX_BYTES')?.value, w.name).toBe(String(maxBytes));
        const spool = volumeFor(w, `${env.get('SERVICE_AUDIT__SPOOL__DIR')!.value}/x`);
        expect(String(spool?.volume?.emptyDir?.sizeLimit), w.name).toBe(String(maxBytes + 32 * 1024 * 1024));
      }
    }
    const small = helmTemplate(CHART, [{ spool: { maxBytes: 268_435_456 } }]);
    expect(small.status, small.stderr).toBe(0);
    expect(small.stdout).toContain('sizeLimit: 301989888');
  });

  test('secrets.name, secrets.keys.* and secrets.databaseCa: every reference follows', () => {
    const ms = rendered('external secret');
    for (const w of workloads(ms)) {
      const refs = Object.fromEntries((w.container.env ?? []).filter((e) => e.valueFrom?.secretKeyRef).map((e) => [e.name, e.valueFrom!.secretKeyRef!.key]));
      expect(refs, w.name).toEqual({ SERVICE_DATABASE__URL: 'db', SERVICE_REDIS__URL: 'cache', GATEHOUSE_SIGNING_SECRET: 'signing', GATEHOUSE_API_KEY_PEPPER: 'pepper', GATEHOUSE_BOOTSTRAP_PASSWORD: 'owner' });
      const ca = volumeFor(w, envOf(w.container).get('SERVICE_DATABASE__SSL_CA_FILE')!.value!);
      expect(ca?.volume?.secret, w.name).toEqual({ secretName: 'corp-ca', items: [{ key: 'bundle.pem', path: 'ca.crt' }] });
    }
  });

  test('gateway.autoscaling.enabled false: no HPA, and the Deployment runs gateway.replicas', () => {
    const ms = rendered('autoscaling off');
    expect(of(ms, 'HorizontalPodAutoscaler')).toEqual([]);
    expect(named<IDeployment>(ms, 'Deployment', 'gateway').spec!.replicas).toBe(4);
    expect(of(rendered('default'), 'HorizontalPodAutoscaler')).toHaveLength(1);
  });

  test('gateway.pgEnabled, migration.enabled and metrics.podAnnotations false: no wire port anywhere, no Job, no scrape annotations', () => {
    const ms = rendered('no wire listener, migration or metrics annotations');
    const gateway = role(ms, 'gateway');
    expect(gateway.container.ports!.map((p) => p.containerPort)).toEqual([3000]);
    expect(named<IService>(ms, 'Service', 'gateway').spec!.ports!.map((p) => p.port)).toEqual([3000]);
    expect(envOf(gateway.container).get('SERVICE_GATEWAY__PG_ENABLED')?.value).toBe('false');
    expect(of(ms, 'Job')).toEqual([]);
    for (const w of workloads(ms)) expect(Object.keys(w.annotations).filter((k) => k.startsWith('prometheus.io/')), w.name).toEqual([]);
    const scraped = workloads(rendered('default')).filter((w) => w.annotations['prometheus.io/scrape'] === 'true').map((w) => [w.role, w.annotations['prometheus.io/port']]);
    expect(scraped.sort()).toEqual([['admin', '9090'], ['gateway', '3000']]);
  });

  test('extraSecretEnv: each variable from its Secret key, a *_REF setting as env: of the variable holding its Secret\'s value; extraEnv beside them', () => {
    for (const w of workloads(rendered('extra secrets'))) {
      const env = envOf(w.container);
      const ref = (name: string) => env.get(name)?.valueFrom?.secretKeyRef;
      expect(ref('SERVICE_DATABASE__READ_URL'), w.name).toEqual({ name: 'gatehouse-replica', key: 'url' });
      expect(ref('EXTRA_TOKEN'), w.name).toEqual({ name: 'gatehouse-extra', key: 'extra-token' });
      for (const [setting, holder, key] of [
        ['SERVICE_APPROVALS__ENCRYPTION_KEY_REF', 'GATEHOUSE_APPROVALS__ENCRYPTION_KEY', 'approvals-key'],
        ['SERVICE_AUTH__OIDC__ADMIN_CLIENT_SECRET_REF', 'GATEHOUSE_AUTH__OIDC__ADMIN_CLIENT_SECRET', 'oidc-client-secret'],
      ] as const) {
        expect(env.get(setting)?.value, `${w.name} ${setting}`).toBe(`env:${holder}`);
        expect(ref(holder), `${w.name} ${holder}`).toEqual({ name: 'gatehouse-extra', key });
      }
      expect(env.get('SERVICE_OBSERVABILITY__LOG_LEVEL')?.value, w.name).toBe('warn');
      // The Secret's value itself never appears: every secret-bearing setting is a secretKeyRef or an env: reference to one.
      for (const name of [...env.keys()].filter((k) => SECRET_SETTINGS.has(k))) {
        const e = env.get(name)!;
        expect(e.value === undefined ? e.valueFrom?.secretKeyRef : env.get(e.value.replace(/^env:/, ''))?.valueFrom?.secretKeyRef, `${w.name} ${name}`).toBeDefined();
      }
      // Gatehouse's loader resolves the reference the chart wrote to the Secret's value.
      const loaded = loadConfig({ env: { SERVICE_SERVICE_ROLE: w.role, ...containerEnvironment(w.container) }, cwd: mkdtempSync(path.join(tmpdir(), 'gh-helm-')) });
      expect(loaded.ok && loaded.secrets.get('approvals.encryption_key_ref'), w.name).toBe('sample-approvals-key-0123456789abcdefghijklmnopqrstuvwxyz');
    }
  });

  test('gateway.service.httpPort, gateway.service.pgPort and admin.service.port: the Services listen there and reach the pods\' fixed ports, which the scrape annotations name', () => {
    const ms = rendered('other service ports');
    const expected = { gateway: { http: [80, 3000], pgwire: [6432, 5432] }, admin: { http: [443, 9090] } } as const;
    for (const [component, ports] of Object.entries(expected)) {
      const svc = named<IService>(ms, 'Service', component);
      const w = role(ms, component);
      const reached = Object.fromEntries(svc.spec!.ports!.map((p) => [p.name, [p.port, w.container.ports!.find((cp) => cp.name === p.targetPort)?.containerPort]]));
      expect(reached, component).toEqual(ports);
      expect(w.annotations['prometheus.io/port'], component).toBe(String(ports.http[1]));
    }
  });

  test('ci/production-values.yaml: image, pull secrets, scheduling and extra environment reach every pod; Service type and autoscaling bounds follow', () => {
    const ms = rendered('production');
    for (const w of workloads(ms)) {
      expect(w.container.image, w.name).toBe('registry.example.com/platform/gatehouse:1.0.0-rc.13');
      expect(w.pod.imagePullSecrets, w.name).toEqual([{ name: 'registry-example-com' }]);
      expect(w.pod.nodeSelector, w.name).toEqual({ 'kubernetes.io/os': 'linux' });
      expect(w.pod.tolerations, w.name).toHaveLength(1);
      expect(w.pod.affinity?.podAntiAffinity, w.name).toBeDefined();
      expect(envOf(w.container).get('SERVICE_OBSERVABILITY__OTLP_ENDPOINT')?.value, w.name).toBe('http://otel-collector.observability:4318');
    }
    expect(named<IService>(ms, 'Service', 'gateway').spec!.type).toBe('LoadBalancer');
    const hpa = named<IHorizontalPodAutoscaler>(ms, 'HorizontalPodAutoscaler', 'gateway');
    expect([hpa.spec!.minReplicas, hpa.spec!.maxReplicas]).toEqual([3, 20]);
    expect(role(ms, 'gateway').pod.terminationGracePeriodSeconds).toBe(45);
  });
});
