// The loading order of spec §9 (defaults → YAML → SERVICE_ environment), typed coercion of environment strings, and the collection of every problem at once.
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import type { z } from 'zod';
import { configSchema, secretRefPaths, type Config } from './schema.js';
import { isSecretRef, resolveSecretRef, Secrets, type SecretRefResult } from './secrets.js';
import { crossFieldProblems, productionProblems } from './invariants.js';
import { deepFreeze } from '../util/freeze.js';

export const ENV_PREFIX = 'SERVICE_';
export const CONFIG_PATH_ENV = 'SERVICE_CONFIG_PATH';
const LOCAL_CONFIG_FILES = ['config.yaml', 'config.yml'];
const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

export interface LoadOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export interface LoadedConfig {
  ok: true;
  config: Readonly<Config>;
  secrets: Secrets;
  /** The YAML file that was read, if any. */
  file: string | null;
  /** Resolves `env:` / `file:` references at use time (source credentials) against the environment this config was loaded from. */
  resolveSecretRef: (ref: string) => SecretRefResult;
  warnings: string[];
  /** Where this config came from, so a gateway replica (gateway.processes) loads exactly the same one. */
  origin: { env: NodeJS.ProcessEnv; cwd: string };
}

export interface ConfigFailure {
  ok: false;
  /** One line per problem, each naming its key path; never a secret's value. */
  problems: string[];
}

type Tree = Record<string, unknown>;

/** Loads, validates and freezes the configuration; collects every problem instead of stopping at the first. */
export function loadConfig(opts: LoadOptions = {}): LoadedConfig | ConfigFailure {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const problems: string[] = [];
  const warnings: string[] = [];

  const { file, tree: yamlTree, problems: fileProblems = [] } = readYaml(env, cwd);
  problems.push(...fileProblems);

  const { tree: envTree, problems: envProblems, origins } = readEnv(env);
  problems.push(...envProblems);

  const merged = deepMerge(yamlTree, envTree);
  // Secret references are resolved from the merged tree before validation, so one run reports
  // reference problems together with schema problems.
  const { values, problems: secretProblems } = resolveSecrets(merged, env, warnings);
  problems.push(...secretProblems);

  const parsed = configSchema.safeParse(merged);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) problems.push(...describeIssue(issue, origins));
    return { ok: false, problems: dedupe(problems) };
  }
  const config = parsed.data;
  const secrets = new Secrets(values);

  problems.push(...crossFieldProblems(config));
  problems.push(...productionProblems(config, secrets));
  if (problems.length > 0) return { ok: false, problems: dedupe(problems) };

  return { ok: true, config: deepFreeze(config), secrets, file, warnings, resolveSecretRef: (ref) => resolveSecretRef(ref, env), origin: { env, cwd } };
}

function resolveSecrets(tree: Tree, env: NodeJS.ProcessEnv, warnings: string[]): { values: Map<string, string>; problems: string[] } {
  const values = new Map<string, string>();
  const problems: string[] = [];
  for (const refPath of secretRefPaths) {
    const ref = getPath(tree, refPath);
    if (typeof ref !== 'string') continue;
    const result = resolveSecretRef(ref, env);
    if (result.ok) values.set(refPath, result.value);
    else problems.push(`${refPath}: ${result.problem}`);
  }
  const bootstrap = getPath(tree, 'admin.bootstrap_password');
  if (typeof bootstrap === 'string' && bootstrap !== '') {
    if (isSecretRef(bootstrap)) {
      const result = resolveSecretRef(bootstrap, env);
      if (result.ok) values.set('admin.bootstrap_password', result.value);
      else problems.push(`admin.bootstrap_password: ${result.problem}`);
    } else {
      values.set('admin.bootstrap_password', bootstrap);
    }
  }
  const webhook = getPath(tree, 'notifications.slack_webhook_url');
  if (typeof webhook === 'string') {
    values.set('notifications.slack_webhook_url', webhook);
    warnings.push('notifications.slack_webhook_url: deprecated literal URL; use notifications.slack_webhook_url_ref');
  }
  return { values, problems };
}

function readYaml(env: NodeJS.ProcessEnv, cwd: string): { file: string | null; tree: Tree; problems?: string[] } {
  let file: string | null = null;
  const explicit = env[CONFIG_PATH_ENV];
  if (explicit !== undefined && explicit !== '') {
    file = path.resolve(cwd, explicit);
  } else {
    for (const name of LOCAL_CONFIG_FILES) {
      const candidate = path.join(cwd, name);
      if (existsSync(candidate)) {
        file = candidate;
        break;
      }
    }
  }
  if (file === null) return { file, tree: {} };

  let text: string;
  try {
    const st = statSync(file);
    if (!st.isFile()) return { file, tree: {}, problems: [`${CONFIG_PATH_ENV}: ${file} is not a file`] };
    if (st.size > MAX_CONFIG_FILE_BYTES) return { file, tree: {}, problems: [`config file ${file}: larger than ${MAX_CONFIG_FILE_BYTES} bytes`] };
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'read error';
    return { file, tree: {}, problems: [`config file ${file}: cannot be read (${code})`] };
  }

  // prettyErrors would quote the offending line, which may hold a secret; the line counter gives the position alone.
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  if (doc.errors.length > 0) {
    // Only the first line of a YAML error: the rest quotes file content, which may hold a secret. One problem per error.
    const problems = doc.errors.map((e) => {
      const pos = lineCounter.linePos(e.pos[0]);
      return `config file ${file}: YAML syntax error at line ${pos.line}, column ${pos.col}: ${e.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '')}`;
    });
    return { file, tree: {}, problems };
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    // Unresolved aliases and alias bombs surface only here; the message names the anchor, never a value.
    return { file, tree: {}, problems: [`config file ${file}: YAML error: ${(err as Error).message.split('\n')[0]}`] };
  }
  if (value === null || value === undefined) return { file, tree: {} };
  if (typeof value !== 'object' || Array.isArray(value)) {
    return { file, tree: {}, problems: [`config file ${file}: the top level must be a mapping of sections`] };
  }
  return { file, tree: value as Tree };
}

/** Environment overrides: SERVICE_GATEWAY__HTTP_PORT → gateway.http_port, coerced to the type the schema expects there. */
function readEnv(env: NodeJS.ProcessEnv): { tree: Tree; problems: string[]; origins: Map<string, string> } {
  const tree: Tree = {};
  const problems: string[] = [];
  const origins = new Map<string, string>();
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith(ENV_PREFIX) || name === CONFIG_PATH_ENV) continue;
    const raw = env[name] ?? '';
    const segments = name.slice(ENV_PREFIX.length).split('__').map((s) => s.toLowerCase());
    const keyPath = segments.join('.');
    if (segments.some((s) => s === '')) {
      problems.push(`${keyPath}: malformed environment variable name ${name}`);
      continue;
    }
    const target = schemaAt(configSchema, segments);
    if (target === undefined) {
      problems.push(`${keyPath}: unknown key (from ${name})`);
      continue;
    }
    const coerced = coerce(raw, target);
    if (!coerced.ok) {
      problems.push(`${keyPath}: ${coerced.problem} (from ${name})`);
      continue;
    }
    setPath(tree, segments, coerced.value);
    origins.set(keyPath, name);
  }
  return { tree, problems, origins };
}

type Kind = 'string' | 'number' | 'boolean' | 'array' | 'object' | 'unknown';

interface SchemaDef {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  values?: unknown[];
}

function defOf(schema: z.ZodType): SchemaDef {
  return (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;
}

/** Strips defaults, optionals, nullables and refinements to the schema that describes the value. */
function unwrap(schema: z.ZodType): { schema: z.ZodType; nullable: boolean } {
  let current = schema;
  let nullable = false;
  for (;;) {
    const def = defOf(current);
    if (def.type === 'nullable') nullable = true;
    if ((def.type === 'default' || def.type === 'prefault' || def.type === 'optional' || def.type === 'nullable') && def.innerType) {
      current = def.innerType;
    } else if (def.type === 'pipe' && def.in) {
      current = def.in;
    } else {
      return { schema: current, nullable };
    }
  }
}

function schemaAt(root: z.ZodType, segments: string[]): z.ZodType | undefined {
  let current: z.ZodType = root;
  for (const segment of segments) {
    const def = defOf(unwrap(current).schema);
    if (def.type !== 'object' || !def.shape || !Object.hasOwn(def.shape, segment)) return undefined;
    current = def.shape[segment]!;
  }
  return current;
}

function kindOf(schema: z.ZodType): Kind {
  const type = defOf(schema).type;
  switch (type) {
    case 'string':
    case 'enum':
      return 'string';
    case 'number':
    case 'int':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'array':
      return 'array';
    case 'object':
    case 'record':
      return 'object';
    case 'literal': {
      const v = defOf(schema).values?.[0];
      return typeof v === 'boolean' ? 'boolean' : typeof v === 'number' ? 'number' : 'string';
    }
    default:
      return 'unknown';
  }
}

function coerce(raw: string, schema: z.ZodType): { ok: true; value: unknown } | { ok: false; problem: string } {
  const { schema: inner, nullable } = unwrap(schema);
  const trimmed = raw.trim();
  if (nullable && (trimmed === '' || trimmed === 'null')) return { ok: true, value: null };
  switch (kindOf(inner)) {
    case 'number': {
      if (!/^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/.test(trimmed)) return { ok: false, problem: 'expected a number' };
      return { ok: true, value: Number(trimmed) };
    }
    case 'boolean': {
      const lower = trimmed.toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(lower)) return { ok: true, value: true };
      if (['false', '0', 'no', 'off'].includes(lower)) return { ok: true, value: false };
      return { ok: false, problem: 'expected a boolean (true or false)' };
    }
    case 'array': {
      if (trimmed.startsWith('[')) return parseJson(trimmed, 'a JSON array', Array.isArray);
      const element = defOf(inner).element;
      const items = trimmed === '' ? [] : trimmed.split(',').map((s) => s.trim()).filter((s) => s !== '');
      if (element && kindOf(unwrap(element).schema) === 'number') return { ok: true, value: items.map(Number) };
      return { ok: true, value: items };
    }
    case 'object':
      return parseJson(trimmed, 'a JSON object', (v) => typeof v === 'object' && v !== null && !Array.isArray(v));
    default:
      return { ok: true, value: raw };
  }
}

function parseJson(text: string, what: string, check: (v: unknown) => boolean): { ok: true; value: unknown } | { ok: false; problem: string } {
  try {
    const value: unknown = JSON.parse(text);
    if (check(value)) return { ok: true, value };
  } catch {
    // fall through to the problem below
  }
  return { ok: false, problem: `expected ${what}` };
}

function describeIssue(issue: z.core.$ZodIssue, origins: Map<string, string>): string[] {
  const base = issue.path.map(String).join('.');
  // A problem inside a value (a list item, a key of a JSON object) came from the variable that set its nearest ancestor.
  const origin = (p: string) => {
    for (let cur = p; cur !== ''; cur = cur.includes('.') ? cur.slice(0, cur.lastIndexOf('.')) : '') {
      const name = origins.get(cur);
      if (name !== undefined) return ` (from ${name})`;
    }
    return '';
  };
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((k) => {
      const p = base === '' ? k : `${base}.${k}`;
      return `${p}: unknown key${origin(p)}`;
    });
  }
  const where = base === '' ? '(top level)' : base;
  let message: string;
  switch (issue.code) {
    case 'too_big':
      message = `must be at most ${String(issue.maximum)}${issue.origin === 'string' ? ' characters' : issue.origin === 'array' ? ' items' : ''}`;
      break;
    case 'too_small':
      message = `must be at least ${String(issue.minimum)}${issue.origin === 'string' ? ' characters' : issue.origin === 'array' ? ' items' : ''}`;
      break;
    case 'invalid_value':
      message = `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
      break;
    case 'invalid_type':
      message = `expected ${issue.expected}`;
      break;
    default:
      message = issue.message;
  }
  return [`${where}: ${message}${origin(base)}`];
}

function deepMerge(a: Tree, b: Tree): Tree {
  const out: Tree = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const existing = out[k];
    out[k] = isPlainObject(existing) && isPlainObject(v) ? deepMerge(existing, v) : v;
  }
  return out;
}

function isPlainObject(v: unknown): v is Tree {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function setPath(tree: Tree, segments: string[], value: unknown): void {
  let node = tree;
  for (const s of segments.slice(0, -1)) {
    if (!isPlainObject(node[s])) node[s] = {};
    node = node[s] as Tree;
  }
  node[segments[segments.length - 1]!] = value;
}

export function getPath(obj: unknown, dotted: string): unknown {
  let node: unknown = obj;
  for (const s of dotted.split('.')) {
    if (!isPlainObject(node)) return undefined;
    node = node[s];
  }
  return node;
}

function dedupe(lines: string[]): string[] {
  return [...new Set(lines)];
}
