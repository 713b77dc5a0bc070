// The values deploy/helm/gatehouse accepts, through the real Helm (v4.1.4): values.schema.json refusing misspelled keys, wrong types, out-of-range and unknown values with Helm's message naming the key, and the chart refusing secrets in extraEnv (README.md "Secrets by reference").
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { credentialUrlPaths, secretRefPaths, secretValuePaths } from '../../src/config/schema.js';
import { CHART, HELM_VERSION, helm, helmLint, helmTemplate, type HelmRun } from '../support/helm.js';
import { kubernetesFields } from '../support/kubernetes-schema.js';

const readYaml = (file: string) => parse(readFileSync(file, 'utf8')) as Record<string, unknown>;

interface Schema {
  type?: string | string[];
  $ref?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  anyOf?: Schema[];
  allOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  $defs?: Record<string, Schema>;
}
const SCHEMA = JSON.parse(readFileSync(path.join(CHART, 'values.schema.json'), 'utf8')) as Schema;
const resolve = (s: Schema): Schema => (s.$ref ? resolve(SCHEMA.$defs![s.$ref.replace('#/$defs/', '')]!) : s);
/** The schema node at a dotted path; `[]` steps into an array's items, `$defs.<name>` starts at a definition. */
function schemaAt(dotted: string): Schema {
  const [first, ...rest] = dotted.split('.');
  let node = first === '$defs' ? SCHEMA.$defs![rest.shift()!]! : resolve(SCHEMA.properties![first!.replace('[]', '')]!);
  if (first!.endsWith('[]')) node = resolve(node.items!);
  for (const step of rest) {
    node = resolve(node.properties![step.replace('[]', '')]!);
    if (step.endsWith('[]')) node = resolve(node.items!);
  }
  return node;
}

const envName = (key: string) => `SERVICE_${key.toUpperCase().replace(/\./g, '__')}`;
/** Settings that hold a secret or may embed one (src/config/schema.ts): extraEnv must refuse each of them. */
const SECRET_SETTINGS = [...credentialUrlPaths, ...secretValuePaths, ...secretRefPaths].map((key) => ({ key, name: envName(key) }));

/** Fails the test unless Helm refused to render with a message containing `expected`. */
function expectRefused(run: HelmRun, expected: string, what: string) {
  expect(run.status, `${what}: ${run.stdout}`).not.toBe(0);
  expect(run.stdout + run.stderr, what).toContain(expected);
}

beforeAll(() => {
  expect(helm(['version', '--template', '{{.Version}}']).stdout).toBe(HELM_VERSION);
});

describe('deploy/helm/gatehouse/values.schema.json, as Helm applies it', () => {
  test.each([
    // A misspelled key, at each depth and in Kubernetes' pass-throughs: no longer silently ignored.
    ['a misspelled top-level key', { imge: { tag: 'x' } }, "at '': additional properties 'imge' not allowed"],
    ['a misspelled nested key', { gateway: { replica: 3 } }, "at '/gateway': additional properties 'replica' not allowed"],
    ['a misspelled key three levels down', { gateway: { autoscaling: { maxReplica: 3 } } }, "at '/gateway/autoscaling': additional properties 'maxReplica' not allowed"],
    ['a misspelled securityContext field', { securityContext: { readOnlyRootFileSystem: true } }, "at '/securityContext': additional properties 'readOnlyRootFileSystem' not allowed"],
    ['a misspelled toleration field', { tolerations: [{ key: 'k', efect: 'NoSchedule' }] }, "at '/tolerations/0': additional properties 'efect' not allowed"],
    ['a misspelled resources key', { worker: { resources: { request: { cpu: '1' } } } }, "at '/worker/resources': additional properties 'request' not allowed"],
    // Wrong types.
    ['a string for a boolean', { tls: { httpOffload: 'yes' } }, "at '/tls/httpOffload': got string, want boolean"],
    ['a number for the image tag', { image: { tag: 1.1 } }, "at '/image/tag': got number, want string"],
    ['a fraction for a replica count', { worker: { replicas: 1.5 } }, "at '/worker/replicas': got number, want integer"],
    ['an object as an extraEnv value', { extraEnv: { SERVICE_X: { a: 1 } } }, "at '/extraEnv/SERVICE_X': got object, want boolean or number or string"],
    ['an extraSecretEnv entry without its key', { extraSecretEnv: [{ name: 'X', secretName: 's' }] }, "at '/extraSecretEnv/0': missing property 'key'"],
    ['a required section removed', { tls: null }, "at '': missing property 'tls'"],
    // Out of range.
    ['no gateway replicas', { gateway: { replicas: 0 } }, "at '/gateway/replicas': minimum: got 0, want 1"],
    ['no admin replicas', { admin: { replicas: 0 } }, "at '/admin/replicas': minimum: got 0, want 1"],
    ['an autoscaler minimum of 0', { gateway: { autoscaling: { minReplicas: 0 } } }, "at '/gateway/autoscaling/minReplicas': minimum: got 0, want 1"],
    ['a port above 65535', { gateway: { service: { httpPort: 70000 } } }, "at '/gateway/service/httpPort': maximum: got 70,000, want 65,535"],
    ['port 0', { admin: { service: { port: 0 } } }, "at '/admin/service/port': minimum: got 0, want 1"],
    ['a shutdown grace beyond gateway.timeouts.shutdown_grace_ms', { gateway: { shutdownGraceSeconds: 601 } }, "at '/gateway/shutdownGraceSeconds': maximum: got 601, want 600"],
    ['a negative PodDisruptionBudget', { gateway: { pdb: { minAvailable: -1 } } }, "at '/gateway/pdb/minAvailable': minimum: got -1, want 0"],
    ['a spool below 1 MiB', { spool: { maxBytes: 1024 } }, "at '/spool/maxBytes': minimum: got 1,024"],
    ['a spool size as a quantity', { spool: { maxBytes: '1Gi' } }, "at '/spool/maxBytes': got string, want integer"],
    ['root', { podSecurityContext: { runAsUser: 0 } }, "at '/podSecurityContext/runAsUser': minimum: got 0, want 1"],
    ['a Secret name that is no DNS subdomain', { secrets: { name: 'Gatehouse_Secret' } }, "at '/secrets/name': 'Gatehouse_Secret' does not match pattern"],
    ['an environment variable name with a hyphen', { extraEnv: { 'SERVICE-X': 'a' } }, "'SERVICE-X' does not match pattern"],
    // Values the chart does not accept.
    ['Service type ExternalName', { gateway: { service: { type: 'ExternalName' } } }, "at '/gateway/service/type': value must be one of 'ClusterIP', 'NodePort', 'LoadBalancer'"],
    ['an unknown pull policy', { image: { pullPolicy: 'Sometimes' } }, "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"],
    ['environment test', { environment: 'test' }, "at '/environment': value must be one of 'production', 'development'"],
    ['an unconfined seccomp profile', { podSecurityContext: { seccompProfile: { type: 'Unconfined' } } }, "at '/podSecurityContext/seccompProfile/type': value must be one of 'RuntimeDefault', 'Localhost'"],
    ['a privileged container', { securityContext: { privileged: true } }, "at '/securityContext/privileged': value must be false"],
    ['a writable root filesystem', { securityContext: { readOnlyRootFilesystem: false } }, "at '/securityContext/readOnlyRootFilesystem': value must be true"],
    ['runAsNonRoot off', { podSecurityContext: { runAsNonRoot: false } }, "at '/podSecurityContext/runAsNonRoot': value must be true"],
    ['an added capability', { securityContext: { capabilities: { add: ['NET_ADMIN'] } } }, "at '/securityContext/capabilities/add': maxItems: got 1, want 0"],
    ['capabilities no longer dropping ALL', { securityContext: { capabilities: { drop: ['NET_RAW'] } } }, "at '/securityContext/capabilities/drop': no items match contains schema"],
  ] as const)('%s fails helm lint and helm template, naming the key', (what, values, expected) => {
    expectRefused(helmLint(CHART, [values as Record<string, unknown>]), expected, `lint: ${what}`);
    expectRefused(helmTemplate(CHART, [values as Record<string, unknown>]), expected, `template: ${what}`);
  });

  test.each([
    ['a PodDisruptionBudget percentage', { gateway: { pdb: { minAvailable: '50%' } } }],
    ['an empty image tag (the appVersion)', { image: { tag: '' } }],
    ['a CPU request as a number', { gateway: { resources: { requests: { cpu: 1 } } } }],
    ['environment development', { environment: 'development', tls: { httpOffload: false, pgOffload: false } }],
    ['no runAsUser (a platform that assigns one)', { podSecurityContext: { runAsUser: null } }],
    ['a Localhost seccomp profile', { podSecurityContext: { seccompProfile: { type: 'Localhost', localhostProfile: 'profiles/gatehouse.json' } } }],
    ['extraEnv numbers and booleans', { extraEnv: { SERVICE_WORKER__CONCURRENCY: 4, SERVICE_OBSERVABILITY__PUBLIC_STATS_ENABLED: true } }],
  ] as const)('%s is accepted', (what, values) => {
    const lint = helmLint(CHART, [values as Record<string, unknown>]);
    expect(lint.stdout + lint.stderr, what).not.toMatch(/\[ERROR\]/);
    const run = helmTemplate(CHART, [values as Record<string, unknown>]);
    expect(run.status, `${what}: ${run.stderr}`).toBe(0);
  });

  test('every key of values.yaml and ci/production-values.yaml has a schema that constrains it', () => {
    const unconstrained: string[] = [];
    const walk = (value: unknown, schema: Schema, at: string) => {
      const s = resolve(schema);
      const constrained = s.type !== undefined || s.enum !== undefined || s.const !== undefined || s.anyOf !== undefined || s.allOf !== undefined;
      if (!constrained) unconstrained.push(`${at}: no type`);
      if (Array.isArray(value)) value.forEach((v, i) => (s.items ? walk(v, s.items, `${at}[${i}]`) : unconstrained.push(`${at}: no items schema`)));
      else if (typeof value === 'object' && value !== null && !(s.type === 'object' && s.properties === undefined && s.additionalProperties === undefined)) {
        for (const [k, v] of Object.entries(value)) {
          const child = s.properties?.[k] ?? (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined);
          if (child) walk(v, child, at ? `${at}.${k}` : k);
          else unconstrained.push(`${at ? `${at}.${k}` : k}: not in the schema`);
        }
      }
    };
    for (const file of ['values.yaml', path.join('ci', 'production-values.yaml')]) walk(readYaml(path.join(CHART, file)), SCHEMA, '');
    expect(unconstrained).toEqual([]);
    // Every section of the chart's values is required, so that `key: null` cannot remove one.
    expect([...(SCHEMA as { required: string[] }).required].sort()).toEqual(Object.keys(readYaml(path.join(CHART, 'values.yaml'))).sort());
  });

  test('README.md documents every key of values.yaml (or the section holding it), and no key the schema lacks', () => {
    const readme = readFileSync(path.join(CHART, 'README.md'), 'utf8');
    const documented = new Set([...readme.matchAll(/^\| ([^|]+) \|/gm)].flatMap((m) => [...m[1]!.matchAll(/`([^`]+)`/g)].map((k) => k[1]!)));
    expect(documented.size).toBeGreaterThan(40);
    const leaves = (value: unknown, at: string): string[] =>
      typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length > 0 ? Object.entries(value).flatMap(([k, v]) => leaves(v, at ? `${at}.${k}` : k)) : [at];
    const undocumented = leaves(readYaml(path.join(CHART, 'values.yaml')), '').filter((key) => !key.split('.').some((_, i, parts) => documented.has(parts.slice(0, i + 1).join('.'))));
    expect(undocumented).toEqual([]);
    const unknown = [...documented].filter((key) => {
      try {
        return schemaAt(key) === undefined;
      } catch {
        return true;
      }
    });
    expect(unknown).toEqual([]);
  });

  test('every object is closed (additionalProperties false, or a typed map) except the pass-throughs decided open', () => {
    const open: string[] = [];
    const walk = (s: Schema, at: string) => {
      if (s.$ref) return; // walked once, under $defs
      const isObject = s.type === 'object' || s.properties !== undefined;
      if (isObject && s.additionalProperties !== false && typeof s.additionalProperties !== 'object') open.push(at);
      for (const [k, child] of Object.entries(s.properties ?? {})) walk(child, at ? `${at}.${k}` : k);
      if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${at}.*`);
      if (s.items) walk(s.items, `${at}[]`);
      for (const child of [...(s.anyOf ?? []), ...(s.allOf ?? [])]) walk(child, at);
    };
    walk({ ...SCHEMA, $defs: undefined }, '');
    for (const [name, s] of Object.entries(SCHEMA.$defs!)) walk(s, `$defs.${name}`);
    expect(open.sort()).toEqual(
      [
        // Kubernetes' own nested types inside the security contexts and resources, checked by the API server.
        '$defs.resources.claims[]',
        'affinity',
        'podSecurityContext.appArmorProfile',
        'podSecurityContext.seLinuxOptions',
        'podSecurityContext.sysctls[]',
        'podSecurityContext.windowsOptions',
        'securityContext.appArmorProfile',
        'securityContext.seLinuxOptions',
        'securityContext.windowsOptions',
      ].sort(),
    );
  });

  test.each([
    ['podSecurityContext', 'PodSecurityContext'],
    ['securityContext', 'SecurityContext'],
    ['securityContext.capabilities', 'Capabilities'],
    ['$defs.seccompProfile', 'SeccompProfile'],
    ['$defs.resources', 'ResourceRequirements'],
    ['tolerations[]', 'Toleration'],
    ['imagePullSecrets[]', 'LocalObjectReference'],
  ])('%s has the fields of Kubernetes 1.36 %s, its enumerations within the API\'s', (at, kind) => {
    const node = schemaAt(at);
    const fields = kubernetesFields(kind);
    expect(Object.keys(node.properties!).sort()).toEqual([...fields.keys()].sort());
    for (const [name, s] of Object.entries(node.properties!)) {
      const allowed = fields.get(name);
      const values = resolve(s).enum;
      if (values && allowed) for (const v of values) expect(allowed, `${at}.${name}`).toContain(v);
    }
  });

  test('relations the schema cannot state are refused when rendering, naming the value', () => {
    expectRefused(helmTemplate(CHART, [{ gateway: { autoscaling: { minReplicas: 5, maxReplicas: 3 } } }]), 'gateway.autoscaling.maxReplicas: 3 is below gateway.autoscaling.minReplicas (5)', 'max < min');
    expect(helmTemplate(CHART, [{ gateway: { autoscaling: { enabled: false, minReplicas: 5, maxReplicas: 3 } } }]).status).toBe(0);
    expectRefused(helmTemplate(CHART, [{ gateway: { service: { pgPort: 3000 } } }]), 'gateway.service.pgPort: 3000 is also gateway.service.httpPort', 'one port twice');
    expect(helmTemplate(CHART, [{ gateway: { pgEnabled: false, service: { pgPort: 3000 } } }]).status).toBe(0);
  });
});

describe('deploy/helm/gatehouse refuses secrets in extraEnv', () => {
  test.each(SECRET_SETTINGS)('extraEnv.$name ($key) is refused: it holds a secret or credentials', ({ key, name }) => {
    const run = helmTemplate(CHART, [{ extraEnv: { [name]: 'env:SOMETHING' } }]);
    expectRefused(run, `extraEnv.${name}: ${key} holds a secret or credentials`, name);
    expect(run.stderr).toContain(`extraSecretEnv: [{name: ${name}, secretName, key}]`);
  });

  test.each([
    ['a password in the userinfo', 'https://collector:s3cret@otel.internal:4318'],
    ['a user name alone (a token as user)', 'https://ghp_0123456789@otel.internal:4318'],
    ['a token parameter', 'https://otel.internal:4318/?access_token=0123'],
    ['a password parameter of a libpq URL', 'postgres://db.internal/gatehouse?password=0123'],
  ])('a URL with %s in any extraEnv value is refused', (_what, url) => {
    for (const name of ['SERVICE_OBSERVABILITY__OTLP_ENDPOINT', 'HTTPS_PROXY']) {
      expectRefused(helmTemplate(CHART, [{ extraEnv: { [name]: url } }]), `extraEnv.${name}: a URL with credentials`, `${name}=${url}`);
    }
  });

  test('a URL without credentials, and settings that only name secrets, pass', () => {
    const values = { extraEnv: { SERVICE_OBSERVABILITY__OTLP_ENDPOINT: 'https://otel.internal:4318/v1?service=gatehouse', SERVICE_GATEWAY__PG_TLS__CLEARTEXT_PASSWORD: false } };
    const run = helmTemplate(CHART, [values]);
    expect(run.status, run.stderr).toBe(0);
  });

  test.each([
    ['extraEnv of a variable the chart sets', { extraEnv: { SERVICE_ENVIRONMENT: 'development' } }, 'extraEnv.SERVICE_ENVIRONMENT: already set by the chart'],
    ['extraEnv of the role', { extraEnv: { SERVICE_SERVICE_ROLE: 'all' } }, 'extraEnv.SERVICE_SERVICE_ROLE: already set by the chart'],
    // Gatehouse reads SERVICE_ key paths case-blind: another spelling of a checked name is refused, not let through.
    ['extraEnv of the database URL in lower case', { extraEnv: { SERVICE_DATABASE__url: 'postgres://u:p@db/gh' } }, 'extraEnv.SERVICE_DATABASE__url: SERVICE_DATABASE__url names the setting database.url in lower case'],
    ['extraEnv of the environment in mixed case', { extraEnv: { SERVICE_Environment: 'development' } }, 'extraEnv.SERVICE_Environment: SERVICE_Environment names the setting environment in lower case'],
    ['extraEnv of a secret reference with a lower-case suffix', { extraEnv: { SERVICE_ADMIN__SIGNING_SECRET_ref: 'env:X' } }, 'names the setting admin.signing_secret_ref in lower case'],
    ['extraSecretEnv of a setting in lower case', { extraSecretEnv: [{ name: 'SERVICE_redis__url', secretName: 's', key: 'k' }] }, 'extraSecretEnv[0].name: SERVICE_redis__url names the setting redis.url in lower case'],
    ['extraSecretEnv of a variable the chart sets', { extraSecretEnv: [{ name: 'SERVICE_REDIS__URL', secretName: 'other', key: 'url' }] }, 'extraSecretEnv[0].name: SERVICE_REDIS__URL is already set by the chart'],
    ['extraSecretEnv of an extraEnv variable', { extraEnv: { EXTRA_TOKEN: 'a' }, extraSecretEnv: [{ name: 'EXTRA_TOKEN', secretName: 's', key: 'k' }] }, 'extraSecretEnv[0].name: EXTRA_TOKEN is already set by extraEnv.EXTRA_TOKEN'],
    ['extraSecretEnv twice', { extraSecretEnv: [{ name: 'A', secretName: 's', key: 'k' }, { name: 'A', secretName: 's', key: 'l' }] }, 'extraSecretEnv[1].name: A is already set by extraSecretEnv[0]'],
    [
      'the variable a *_REF setting\'s Secret value goes to',
      { extraEnv: { GATEHOUSE_APPROVALS__ENCRYPTION_KEY: 'a' }, extraSecretEnv: [{ name: 'SERVICE_APPROVALS__ENCRYPTION_KEY_REF', secretName: 's', key: 'k' }] },
      'extraSecretEnv[0].name: GATEHOUSE_APPROVALS__ENCRYPTION_KEY is already set by extraEnv.GATEHOUSE_APPROVALS__ENCRYPTION_KEY',
    ],
  ] as const)('%s is refused: a variable is set once', (what, values, expected) => {
    expectRefused(helmTemplate(CHART, [values as unknown as Record<string, unknown>]), expected, what);
  });
});
