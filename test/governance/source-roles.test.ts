// Source-role decision: grants (expiry, disabled, other source), HTTP method+path rules, SQL table coverage, default roles.
import { describe, expect, it } from 'vitest';
import { defaultRoles, roleRulesSchema, sourceRoleDecision } from '../../src/governance/source-roles.js';
import type { Grant, RoleRules, SourceRole, SourceRoleContext, SourceRoleRequest } from '../../src/governance/source-roles.js';

const NOW = new Date('2030-01-01T00:00:00Z');

function role(id: number, rules: Partial<RoleRules>, extra: Partial<SourceRole> = {}): SourceRole {
  return { id, source_id: 'crm', role_key: `role${id}`, description: '', enabled: true, rules: { http: [], sql: [], ...rules }, ...extra };
}
function grant(id: number, roleId: number, extra: Partial<Grant> = {}): Grant {
  return { id, identity_id: 7, source_id: 'crm', role_id: roleId, role_key: `role${roleId}`, enabled: true, expires_at: null, granted_by: 1, ...extra };
}
function ctx(grants: Grant[], roles: SourceRole[], extra: Partial<SourceRoleContext> = {}): SourceRoleContext {
  return { source_id: 'crm', identity_id: 7, grants, roles, now: NOW, ...extra };
}
const get = (path: string): SourceRoleRequest => ({ kind: 'http', method: 'GET', path });
const http = (method: string, path: string): SourceRoleRequest => ({ kind: 'http', method, path });
const sql = (operation: 'read' | 'write' | 'ddl' | 'admin', tables: string[]): SourceRoleRequest => ({ kind: 'sql', operation, tables });

const reader = role(1, { http: [{ methods: ['GET'], paths: ['/**'], approval: 'never' }], sql: [{ operations: ['read'], tables: ['*.*'] }] });

describe('grant validity', () => {
  const cases: [string, Grant[], SourceRole[], boolean, RegExp][] = [
    ['active grant', [grant(1, 1)], [reader], true, /allows/],
    ['no grant', [], [reader], false, /no active grant on source crm/],
    ['disabled grant', [grant(1, 1, { enabled: false })], [reader], false, /grant 1 disabled/],
    ['expired grant', [grant(1, 1, { expires_at: new Date(NOW.getTime() - 1) })], [reader], false, /grant 1 expired/],
    ['expiring exactly now', [grant(1, 1, { expires_at: NOW })], [reader], false, /expired/],
    ['expiring later', [grant(1, 1, { expires_at: new Date(NOW.getTime() + 1000) })], [reader], true, /allows/],
    ['disabled role', [grant(1, 1)], [{ ...reader, enabled: false }], false, /role role1 disabled/],
    ['role of another source', [grant(1, 1)], [{ ...reader, source_id: 'billing' }], false, /belongs to another source/],
    ['grant on another source', [grant(1, 1, { source_id: 'billing' })], [reader], false, /no active grant/],
    ['grant of another identity', [grant(1, 1, { identity_id: 8 })], [reader], false, /no active grant/],
    ['unknown role id', [grant(1, 99)], [reader], false, /role 99 not found/],
    ['one bad grant, one good', [grant(1, 1, { enabled: false }), grant(2, 1)], [reader], true, /grant 2/],
  ];
  it.each(cases)('%s', (_name, grants, roles, allowed, reason) => {
    const d = sourceRoleDecision(ctx(grants, roles), get('/v1/users'));
    expect(d.allowed).toBe(allowed);
    expect(d.reason).toMatch(reason);
  });
});

describe('HTTP rules', () => {
  const roles = [
    role(1, { http: [{ methods: ['GET'], paths: ['/v1/**'], approval: 'never' }, { methods: ['POST'], paths: ['/v1/orders'], approval: 'by_risk' }] }),
    role(2, { http: [{ methods: ['*'], paths: ['/**'], approval: 'never' }] }),
    role(3, { http: [{ methods: ['DELETE', 'PUT'], paths: ['/v1/orders/*'], approval: 'always' }] }),
  ];
  const cases: [string, number[], SourceRoleRequest, boolean, number | undefined, string | undefined][] = [
    ['GET under a glob', [1], get('/v1/users/4'), true, 0, 'never'],
    ['GET outside the glob', [1], get('/v2/users'), false, undefined, undefined],
    ['POST listed for the exact path', [1], http('POST', '/v1/orders'), true, 1, 'by_risk'],
    ['POST on another path', [1], http('POST', '/v1/users'), false, undefined, undefined],
    ['PUT not listed', [1], http('PUT', '/v1/orders'), false, undefined, undefined],
    ['lower-case method is normalised', [1], http('post', '/v1/orders'), true, 1, 'by_risk'],
    ['`*` allows GET', [2], get('/anything'), true, 0, 'never'],
    ['`*` never allows POST', [2], http('POST', '/anything'), false, undefined, undefined],
    ['`*` never allows DELETE', [2], http('DELETE', '/anything'), false, undefined, undefined],
    ['`*` never allows PATCH', [2], http('PATCH', '/x'), false, undefined, undefined],
    ['DELETE listed explicitly', [3], http('DELETE', '/v1/orders/9'), true, 0, 'always'],
    ['DELETE listed, one segment only', [3], http('DELETE', '/v1/orders/9/items'), false, undefined, undefined],
  ];
  it.each(cases)('%s', (_name, roleIds, req, allowed, ruleIndex, approval) => {
    const grants = roleIds.map((r, i) => grant(i + 1, r));
    const d = sourceRoleDecision(ctx(grants, roles), req);
    expect(d.allowed).toBe(allowed);
    expect(d.rule_index).toBe(ruleIndex);
    expect(d.approval).toBe(approval);
  });

  it('a refused write says the method must be listed', () => {
    const d = sourceRoleDecision(ctx([grant(1, 2)], roles), http('POST', '/x'));
    expect(d.reason).toMatch(/write method must be listed explicitly/);
  });

  it('several grants allow: the lowest grant id is reported, whatever the input order', () => {
    const grants = [grant(9, 2), grant(3, 1)];
    const d = sourceRoleDecision(ctx(grants, roles), get('/v1/x'));
    expect(d).toMatchObject({ allowed: true, grant_id: 3, role_key: 'role1', rule_index: 0 });
    const reversed = sourceRoleDecision(ctx([...grants].reverse(), [...roles].reverse()), get('/v1/x'));
    expect(reversed).toEqual(d);
  });

  it('within a role the first matching rule wins', () => {
    const r = role(1, { http: [{ methods: ['GET'], paths: ['/a/**'], approval: 'always' }, { methods: ['GET'], paths: ['/**'], approval: 'never' }] });
    expect(sourceRoleDecision(ctx([grant(1, 1)], [r]), get('/a/b')).approval).toBe('always');
    expect(sourceRoleDecision(ctx([grant(1, 1)], [r]), get('/b')).approval).toBe('never');
  });
});

describe('SQL rules: every table covered by a rule allowing the operation', () => {
  const roles = [
    role(1, { sql: [{ operations: ['read'], tables: ['public.*'] }, { operations: ['write'], tables: ['public.orders'], approval: 'by_risk' }] }),
    role(2, { sql: [{ operations: ['read'], tables: ['hr.*'], approval: 'always' }] }),
    role(3, { sql: [{ operations: ['read', 'write', 'ddl'], tables: ['*.*'], approval: 'never' }] }),
  ];
  const cases: [string, number[], SourceRoleRequest, boolean, string | undefined][] = [
    ['one table covered', [1], sql('read', ['public.users']), true, 'by_risk'],
    ['all tables covered by one rule', [1], sql('read', ['public.users', 'public.orders']), true, 'by_risk'],
    ['one table not covered', [1], sql('read', ['public.users', 'hr.salaries']), false, undefined],
    ['tables covered by rules of two grants', [1, 2], sql('read', ['public.users', 'hr.salaries']), true, 'always'],
    ['write on the listed table', [1], sql('write', ['public.orders']), true, 'by_risk'],
    ['write on a read-only table', [1], sql('write', ['public.users']), false, undefined],
    ['write needs write on every table', [1], sql('write', ['public.orders', 'public.users']), false, undefined],
    ['ddl not allowed', [1], sql('ddl', ['public.orders']), false, undefined],
    ['statement without tables, operation allowed', [1], sql('read', []), true, 'by_risk'],
    ['statement without tables, operation not allowed', [1], sql('admin', []), false, undefined],
    ['unqualified table does not match a qualified glob', [3], sql('read', ['users']), false, undefined],
    ['wildcard role', [3], sql('ddl', ['x.y', 'a.b']), true, 'never'],
    ['duplicate tables counted once', [1], sql('read', ['public.users', 'public.users']), true, 'by_risk'],
  ];
  it.each(cases)('%s', (_name, roleIds, req, allowed, approval) => {
    const grants = roleIds.map((r, i) => grant(i + 1, r));
    const d = sourceRoleDecision(ctx(grants, roles), req);
    expect(d.allowed).toBe(allowed);
    expect(d.approval).toBe(approval);
  });

  it('reports which rule covered each table', () => {
    const d = sourceRoleDecision(ctx([grant(1, 1), grant(2, 2)], roles), sql('read', ['hr.salaries', 'public.users']));
    expect(d.matches).toEqual([
      { grant_id: 2, role_key: 'role2', rule_index: 0, approval: 'always', table: 'hr.salaries' },
      { grant_id: 1, role_key: 'role1', rule_index: 0, approval: 'by_risk', table: 'public.users' },
    ]);
    expect(d).toMatchObject({ grant_id: 2, role_key: 'role2', rule_index: 0 });
  });

  it('names the uncovered table', () => {
    expect(sourceRoleDecision(ctx([grant(1, 1)], roles), sql('read', ['hr.salaries'])).reason).toMatch(/no granted role allows read on hr\.salaries/);
  });
});

describe('defaultRoles', () => {
  const decide = (type: string, key: string, req: SourceRoleRequest) => {
    const t = defaultRoles(type).find((r) => r.role_key === key);
    if (t === undefined) throw new Error(key);
    return sourceRoleDecision(ctx([grant(1, 1)], [role(1, t.rules)]), req);
  };
  const cases: [string, string, SourceRoleRequest, boolean, string | undefined][] = [
    ['http', 'reader', get('/a/b'), true, 'never'],
    ['http', 'reader', http('POST', '/a'), false, undefined],
    ['http', 'writer', http('POST', '/a'), true, 'by_risk'],
    ['http', 'writer', http('PATCH', '/a'), true, 'by_risk'],
    ['http', 'writer', http('DELETE', '/a'), false, undefined],
    ['http', 'admin', http('DELETE', '/a'), true, 'by_risk'],
    ['http', 'admin', sql('read', ['public.x']), false, undefined],
    ['postgres', 'reader', sql('read', ['public.x']), true, 'never'],
    ['postgres', 'reader', sql('write', ['public.x']), false, undefined],
    ['postgres', 'writer', sql('write', ['public.x']), true, 'by_risk'],
    ['postgres', 'writer', sql('ddl', ['public.x']), false, undefined],
    ['postgres', 'admin', sql('ddl', ['public.x']), true, 'always'],
    ['postgres', 'admin', sql('admin', []), true, 'always'],
    ['postgres', 'admin', get('/x'), false, undefined],
    ['filesystem', 'reader', get('/x'), true, 'never'],
    ['filesystem', 'reader', sql('read', ['a.b']), true, 'never'],
  ];
  it.each(cases)('%s %s', (type, key, req, allowed, approval) => {
    const d = decide(type, key, req);
    expect(d.allowed).toBe(allowed);
    expect(d.approval).toBe(approval);
  });
  it('templates pass the rule schema', () => {
    for (const t of [...defaultRoles('http'), ...defaultRoles('postgres')]) expect(roleRulesSchema.safeParse(t.rules).success).toBe(true);
  });
});

describe('roleRulesSchema', () => {
  it('rejects unknown keys, lower-case methods and relative paths', () => {
    expect(roleRulesSchema.safeParse({ http: [{ methods: ['GET'], paths: ['/x'], extra: 1 }] }).success).toBe(false);
    expect(roleRulesSchema.safeParse({ http: [{ methods: ['get'], paths: ['/x'] }] }).success).toBe(false);
    expect(roleRulesSchema.safeParse({ http: [{ methods: ['GET'], paths: ['x'] }] }).success).toBe(false);
    expect(roleRulesSchema.safeParse({ sql: [{ operations: ['select'], tables: ['*.*'] }] }).success).toBe(false);
  });
  it('fills defaults', () => {
    expect(roleRulesSchema.parse({ http: [{ methods: ['GET'], paths: ['/**'] }] })).toEqual({ http: [{ methods: ['GET'], paths: ['/**'], approval: 'by_risk' }], sql: [] });
  });
});
