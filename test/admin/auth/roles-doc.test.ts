// Keeps the permission matrix in docs/admin-roles.md and src/admin/auth/permissions.ts in sync.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { adminRoles, permissions, rolePermissions } from '../../../src/admin/auth/permissions.js';

const doc = readFileSync(new URL('../../../docs/admin-roles.md', import.meta.url), 'utf8');

describe('docs/admin-roles.md', () => {
  it('documents every permission of every role, and nothing else', () => {
    const header = doc.split('\n').find((l) => l.startsWith('| permission |'))!;
    expect(header.split('|').slice(2, -1).map((c) => c.trim())).toEqual([...adminRoles]);
    const rows = new Map<string, string[]>();
    for (const line of doc.split('\n')) {
      const m = /^\| `([a-z]+:[a-z]+)` \|(.*)\|$/.exec(line);
      if (m) rows.set(m[1]!, m[2]!.split('|').map((c) => c.trim()));
    }
    expect([...rows.keys()]).toEqual([...permissions]);
    for (const p of permissions) {
      expect(rows.get(p), p).toEqual(adminRoles.map((r) => (rolePermissions[r].has(p) ? '✓' : '—')));
    }
  });
});
