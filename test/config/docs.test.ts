// docs/configuration.md stays in sync with the schema: the generated key tables match, and every key path and secret reference field is documented.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { secretRefPaths } from '../../src/config/index.js';
import { DOC_PATH, leafPaths, withFreshReference } from '../../scripts/config-doc.js';

const doc = readFileSync(DOC_PATH, 'utf8');

describe('docs/configuration.md', () => {
  it('the generated key tables match the schema (regenerate: npx tsx scripts/config-doc.ts)', () => {
    expect(withFreshReference(doc) === doc).toBe(true);
  });

  it('documents every key path of the schema', () => {
    const paths = leafPaths();
    expect(paths.length).toBeGreaterThan(100);
    const missing = paths.filter((p) => !doc.includes(`| \`${p}\` |`));
    expect(missing).toEqual([]);
  });

  it('lists every *_ref field among the secret references', () => {
    const section = doc.slice(doc.indexOf('## Secret references'), doc.indexOf('## What `config check` masks'));
    for (const p of secretRefPaths) expect(section).toContain(`\`${p}\``);
  });

  it('names each production invariant key and the exit codes', () => {
    const section = doc.slice(doc.indexOf('## Production invariants'), doc.indexOf('## Problems and exit codes'));
    for (const key of ['admin.signing_secret_ref', 'admin.cookie.secure', 'auth.api_key_pepper_ref', 'auth.legacy_unpeppered_keys_allowed', 'gateway.pg_tls', 'gateway.tls', 'admin.tls', 'database.ssl_mode', 'database.ssl_ca_file', 'audit.durability_mode', 'auth.oidc.issuer_url', 'auth.oidc.admin_redirect_uri', 'auth.oidc.allow_insecure_endpoints', 'database.url', 'redis.url']) {
      expect(section).toContain(`\`${key}\``);
    }
    for (const code of ['| 0 |', '| 1 |', '| 2 |', '| 64 |']) expect(doc).toContain(code);
  });
});
