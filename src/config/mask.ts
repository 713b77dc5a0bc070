// The printable view of a configuration: references shown as references, literal secrets and URL passwords masked.
import { credentialUrlPaths, secretValuePaths, type Config } from './schema.js';
import { isSecretRef, MASK, maskUrlCredentials } from './secrets.js';

/** A deep copy of the configuration safe to print, log or return from an API. */
export function maskedConfig(config: Readonly<Config>): Record<string, unknown> {
  const copy = structuredClone(config) as unknown as Record<string, unknown>;
  for (const p of secretValuePaths) {
    const v = read(copy, p);
    // A reference names where the secret lives, which is safe; a literal value is not.
    if (typeof v === 'string') write(copy, p, isSecretRef(v) ? v : MASK);
  }
  for (const p of credentialUrlPaths) {
    const v = read(copy, p);
    if (typeof v === 'string') write(copy, p, maskUrlCredentials(v));
  }
  // Any other URL-valued field (otlp_endpoint, admin_base_url, ...) may carry userinfo too.
  maskUrlsIn(copy);
  return copy;
}

function maskUrlsIn(node: Record<string, unknown> | unknown[]): void {
  for (const [k, v] of Object.entries(node)) {
    if (typeof v === 'string' && /^[a-z][a-z0-9+.-]*:\/\//i.test(v) && URL.canParse(v)) {
      (node as Record<string, unknown>)[k] = maskUrlCredentials(v);
    } else if (typeof v === 'object' && v !== null) {
      maskUrlsIn(v as Record<string, unknown>);
    }
  }
}

function read(obj: Record<string, unknown>, dotted: string): unknown {
  return dotted.split('.').reduce<unknown>((node, k) => (node && typeof node === 'object' ? (node as Record<string, unknown>)[k] : undefined), obj);
}

function write(obj: Record<string, unknown>, dotted: string, value: unknown): void {
  const keys = dotted.split('.');
  let node = obj;
  for (const k of keys.slice(0, -1)) node = node[k] as Record<string, unknown>;
  node[keys[keys.length - 1]!] = value;
}
