// Source credentials: literal-or-reference fields, their resolution at use time, and the one masking function for every view of a source config.
import { isSecretRef, maskUrlCredentials, MASK, type SecretRefResult } from '../config/secrets.js';
import { resolveSecretRef } from '../config/index.js';
import type { CredentialField, SecretResolver } from './types.js';

export type CredentialMode = 'literal' | 'reference' | 'none';

/** The syntax of a secret reference as accepted in connection_config (resolution happens at use time). */
export const SECRET_REF_PATTERN = /^(env:[A-Za-z_][A-Za-z0-9_]{0,255}|file:\/[^\0]{1,4095})$/;

export function isValidSecretRef(value: string): boolean {
  return isSecretRef(value) && SECRET_REF_PATTERN.test(value);
}

/**
 * The resolver over an environment handed in by the composition root. Taking `env` as a parameter keeps
 * process.env reads in src/config (house rule); callers pass the environment the configuration was loaded from.
 */
export function secretResolver(env: NodeJS.ProcessEnv): SecretResolver {
  return (ref) => resolveSecretRef(ref, env);
}

export type ResolvedCredential = { ok: true; value: string | null } | { ok: false; problem: string };

/** The credential to use now: the literal, the resolved reference, or null when the source has none. */
export function resolveCredential(config: Record<string, unknown>, field: CredentialField, resolve: SecretResolver): ResolvedCredential {
  const literal = config[field.literal];
  if (typeof literal === 'string' && literal.length > 0) return { ok: true, value: literal };
  const ref = config[field.ref];
  if (typeof ref !== 'string' || ref.length === 0) return { ok: true, value: null };
  const r: SecretRefResult = resolve(ref);
  return r.ok ? { ok: true, value: r.value } : { ok: false, problem: r.problem };
}

export function credentialMode(config: Record<string, unknown>, fields: readonly CredentialField[]): CredentialMode {
  let mode: CredentialMode = 'none';
  for (const f of fields) {
    if (typeof config[f.literal] === 'string' && config[f.literal] !== '') return 'literal';
    if (typeof config[f.ref] === 'string' && config[f.ref] !== '') mode = 'reference';
  }
  return mode;
}

/** Key names that hold a secret whatever the connector (defence in depth for fields a connector forgot to declare). */
const SECRET_KEY = /(password|passwd|secret|token|api[_-]?key|private[_-]?key|credential)/i;

function maskValue(key: string, value: unknown, refKeys: ReadonlySet<string>): unknown {
  if (refKeys.has(key)) return value;
  if (SECRET_KEY.test(key) && !key.endsWith('_ref')) return value === null || value === undefined || value === '' ? value : MASK;
  if (typeof value === 'string' && /^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return maskUrlCredentials(value);
  if (Array.isArray(value)) return value.map((v) => maskValue('', v, refKeys));
  if (value !== null && typeof value === 'object') return maskObject(value as Record<string, unknown>, refKeys);
  return value;
}

function maskObject(obj: Record<string, unknown>, refKeys: ReadonlySet<string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = maskValue(k, v, refKeys);
  return out;
}

/**
 * The only view of a connection_config that may leave the process (API responses, logs, audit): literal
 * credentials become `****`, references stay (they name where the secret is, not the secret), URL
 * userinfo passwords are masked, and `credential_mode` says which kind of credential the source uses.
 */
export function maskSourceConfig(config: Record<string, unknown>, fields: readonly CredentialField[]): Record<string, unknown> {
  const refKeys = new Set(fields.map((f) => f.ref));
  const masked = maskObject(config, refKeys);
  // A *_ref value that is not a reference (legacy or hand-edited rows) is treated as a literal secret.
  for (const k of refKeys) if (typeof masked[k] === 'string' && !isSecretRef(masked[k])) masked[k] = MASK;
  return { ...masked, credential_mode: credentialMode(config, fields) };
}

/**
 * Keeps the stored literal when an update sends back the mask it was shown (`"password": "****"`),
 * so an operator can edit other fields of a config read from the API without re-entering the secret.
 */
export function carryMaskedCredentials(next: Record<string, unknown>, previous: Record<string, unknown>, fields: readonly CredentialField[]): Record<string, unknown> {
  const out = { ...next };
  for (const f of fields) {
    if (out[f.literal] === MASK) {
      if (typeof previous[f.literal] === 'string') out[f.literal] = previous[f.literal];
      else delete out[f.literal];
    }
  }
  return out;
}
