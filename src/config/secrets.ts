// Secret references (`env:NAME`, `file:/path`): parsing, resolution and masking; resolved values live only in a Secrets holder that never serializes them.
import { readFileSync, statSync } from 'node:fs';
import { inspect } from 'node:util';

const MAX_SECRET_FILE_BYTES = 64 * 1024;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;

export type SecretRefResult = { ok: true; value: string } | { ok: false; problem: string };

/** True when the string has the shape of a secret reference; a literal secret never does. */
export function isSecretRef(value: string): boolean {
  return value.startsWith('env:') || value.startsWith('file:');
}

/**
 * Resolves one reference. Problems describe the reference, never the secret: a literal is
 * reported as "not a secret reference" without echoing it.
 */
export function resolveSecretRef(ref: string, env: NodeJS.ProcessEnv): SecretRefResult {
  if (ref.startsWith('env:')) {
    const name = ref.slice(4);
    if (!ENV_NAME.test(name)) return { ok: false, problem: 'env: reference needs a valid environment variable name' };
    const value = env[name];
    if (value === undefined) return { ok: false, problem: `environment variable ${name} is not set` };
    if (value.trim() === '') return { ok: false, problem: `environment variable ${name} is empty` };
    return { ok: true, value };
  }
  if (ref.startsWith('file:')) {
    const file = ref.slice(5);
    if (!file.startsWith('/')) return { ok: false, problem: 'file: reference needs an absolute path' };
    let size: number;
    try {
      const st = statSync(file);
      if (!st.isFile()) return { ok: false, problem: `${file} is not a regular file` };
      size = st.size;
    } catch {
      return { ok: false, problem: `file ${file} cannot be read` };
    }
    if (size > MAX_SECRET_FILE_BYTES) return { ok: false, problem: `file ${file} is larger than ${MAX_SECRET_FILE_BYTES} bytes` };
    let value: string;
    try {
      value = readFileSync(file, 'utf8');
    } catch {
      return { ok: false, problem: `file ${file} cannot be read` };
    }
    // Files written by editors and secret stores usually end with a newline that is not part of the secret.
    value = value.replace(/\r?\n$/, '');
    if (value.trim() === '') return { ok: false, problem: `file ${file} is empty` };
    return { ok: true, value };
  }
  return { ok: false, problem: 'is not a secret reference (expected env:NAME or file:/absolute/path); literal secrets are not accepted here' };
}

/** Query parameters that carry credentials: libpq/pg and ioredis both take `password=` from the query string. */
const CREDENTIAL_PARAM = /pass|secret|token|key/i;

/** Masks the password of a URL's userinfo and credential-bearing query parameters, keeping the rest readable for operators. */
export function maskUrlCredentials(raw: string): string {
  try {
    const url = new URL(raw);
    let changed = false;
    if (url.password) {
      url.password = '****';
      changed = true;
    }
    for (const name of [...new Set(url.searchParams.keys())]) {
      if (CREDENTIAL_PARAM.test(name)) {
        url.searchParams.set(name, '****');
        changed = true;
      }
    }
    // Unchanged URLs are returned as written, not normalized.
    return changed ? url.toString() : raw;
  } catch {
    // An unparsable URL may still contain a credential; show nothing of it.
    return '****';
  }
}

export const MASK = '****';

/**
 * Resolved secret values by config path. Logging, JSON serialization and util.inspect all
 * print masks, so an accidental `log.info({secrets})` leaks nothing.
 */
export class Secrets {
  readonly #values: ReadonlyMap<string, string>;

  constructor(values: Map<string, string>) {
    this.#values = new Map(values);
    Object.freeze(this);
  }

  get(path: string): string | undefined {
    return this.#values.get(path);
  }

  has(path: string): boolean {
    return this.#values.has(path);
  }

  toJSON(): Record<string, string> {
    return Object.fromEntries([...this.#values.keys()].map((k) => [k, MASK]));
  }

  [inspect.custom](): string {
    return `Secrets { ${[...this.#values.keys()].join(', ')} }`;
  }
}
