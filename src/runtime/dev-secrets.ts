// Development-only secrets: when no reference is configured outside production, generate random ones once and keep them under the embedded data directory.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, existsSync, chmodSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config/index.js';
import type { Secrets } from '../config/index.js';
import type { Logger } from '../observability/logger.js';

/** Secrets a running service needs; production refuses to start without references for them (config/invariants.ts). */
const GENERATED = ['admin.signing_secret_ref', 'auth.api_key_pepper_ref', 'approvals.encryption_key_ref'] as const;
export type RuntimeSecretPath = (typeof GENERATED)[number];

export interface RuntimeSecrets {
  get(path: RuntimeSecretPath): string;
  /** The bootstrap owner's password, when configured. */
  bootstrapPassword(): string | null;
  /** The admin console's OIDC client secret (auth.oidc.admin_client_secret_ref), when configured. */
  oidcClientSecret(): string | null;
}

/**
 * Stable random values rather than fixed fallbacks: a generated pepper must survive restarts, or every
 * agent key would stop working, so it is persisted (mode 0600) beside the embedded store.
 */
export function runtimeSecrets(config: Readonly<Config>, secrets: Secrets, log: Logger, stateDir: string): RuntimeSecrets {
  const values = new Map<RuntimeSecretPath, string>();
  const missing = GENERATED.filter((p) => !secrets.has(p));
  if (missing.length > 0) {
    if (config.environment === 'production') {
      // Invariants already refuse this; a second guard keeps a refactor from ever generating production secrets.
      throw new TypeError(`production secrets missing: ${missing.join(', ')}`);
    }
    const file = path.join(stateDir, 'dev-secrets.json');
    let stored: Record<string, string> = {};
    if (existsSync(file)) stored = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
    const generated = missing.filter((p) => typeof stored[p] !== 'string');
    for (const p of generated) stored[p] = randomBytes(32).toString('base64url');
    if (generated.length > 0) {
      mkdirSync(stateDir, { recursive: true, mode: 0o700 });
      writeFileSync(file, JSON.stringify(stored, null, 2), { mode: 0o600 });
      chmodSync(file, 0o600);
      log.warn({ generated, file }, 'development secrets generated; configure secret references before production');
    }
    // Read back, not generated: said once at info level, so a restart does not claim new secrets were made.
    const reused = missing.filter((p) => !generated.includes(p));
    if (reused.length > 0) log.info({ reused, file }, 'development secrets read from the state directory; configure secret references before production');
    for (const p of missing) values.set(p, stored[p]!);
  }
  for (const p of GENERATED) {
    const v = secrets.get(p);
    if (v !== undefined) values.set(p, v);
  }
  return {
    get: (p) => values.get(p)!,
    bootstrapPassword: () => secrets.get('admin.bootstrap_password') ?? null,
    oidcClientSecret: () => secrets.get('auth.oidc.admin_client_secret_ref') ?? null,
  };
}
