// Keeps docs/errors.md and the error registry in sync (STYLE §2): every code, status and SQLSTATE documented, nothing stale.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { errorRegistry } from '../../src/errors/registry.js';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
const rows = new Map(
  [...doc.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| `([0-9A-Z]{5})` \|/gm)].map((m) => [m[1]!, { http: Number(m[2]), sqlstate: m[3]! }]),
);

describe('docs/errors.md', () => {
  it('documents every registered code with its HTTP status and SQLSTATE', () => {
    for (const [code, spec] of Object.entries(errorRegistry)) {
      expect(rows.get(code), `docs/errors.md lacks ${code}`).toEqual({ http: spec.http, sqlstate: spec.sqlstate });
    }
  });

  it('documents no code the registry does not have', () => {
    for (const code of rows.keys()) expect(Object.keys(errorRegistry)).toContain(code);
  });

  it('uses only well-formed SQLSTATEs (five characters of digits and upper-case letters)', () => {
    for (const spec of Object.values(errorRegistry)) expect(spec.sqlstate).toMatch(/^[0-9A-Z]{5}$/);
  });
});
