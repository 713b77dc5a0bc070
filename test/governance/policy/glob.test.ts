// Glob dialect shared by policies and source roles: `*` one segment, `**` any depth, everything else literal.
import { describe, expect, it } from 'vitest';
import { compileColumnGlobs, compileGlob, compileGlobs, GLOB_SEP } from '../../../src/governance/policy/glob.js';

describe('path globs', () => {
  const cases: [string, string, boolean][] = [
    ['/users', '/users', true],
    ['/users', '/users/', false],
    ['/users', '/Users', false],
    ['/users/*', '/users/42', true],
    ['/users/*', '/users/42/orders', false],
    ['/users/*', '/users', false],
    ['/users/*/orders', '/users/42/orders', true],
    ['/users/*/orders', '/users/42/x/orders', false],
    ['/users/**', '/users', true],
    ['/users/**', '/users/', true],
    ['/users/**', '/users/42/orders/7', true],
    ['/users/**', '/usersx', false],
    ['/users/**/items', '/users/a/b/items', true],
    ['/**', '/anything/at/all', true],
    ['**', '/x', true],
    ['/files/*.json', '/files/a.json', true],
    ['/files/*.json', '/files/a.jsonx', false],
    ['/files/*.json', '/files/sub/a.json', false],
    ['/a.b', '/axb', false],
    ['/a+(b)', '/a+(b)', true],
    ['/v1/[x]', '/v1/[x]', true],
  ];
  it.each(cases)('%s vs %s → %s', (pattern, value, expected) => {
    expect(compileGlob(pattern, GLOB_SEP.path)(value)).toBe(expected);
  });
});

describe('table globs', () => {
  const cases: [string, string, boolean][] = [
    ['public.users', 'public.users', true],
    ['public.users', 'public.users2', false],
    ['public.*', 'public.orders', true],
    ['public.*', 'private.orders', false],
    ['*.*', 'audit.log', true],
    ['*.*', 'users', false],
    ['*.secret_*', 'hr.secret_salaries', true],
    ['**', 'a.b.c', true],
    ['public.*', 'public.a.b', false],
  ];
  it.each(cases)('%s vs %s → %s', (pattern, value, expected) => {
    expect(compileGlob(pattern, GLOB_SEP.table)(value)).toBe(expected);
  });
});

describe('source globs and lists', () => {
  it('`*` spans the whole source id (no segments)', () => {
    expect(compileGlob('billing-*', GLOB_SEP.source)('billing-eu-1')).toBe(true);
    expect(compileGlob('*', GLOB_SEP.source)('anything')).toBe(true);
    expect(compileGlob('billing-*', GLOB_SEP.source)('crm')).toBe(false);
  });
  it('a list is any-of and mixes exact and wildcard patterns', () => {
    const m = compileGlobs(['crm', 'billing-*'], GLOB_SEP.source);
    expect(['crm', 'billing-x'].map(m)).toEqual([true, true]);
    expect(m('crm2')).toBe(false);
  });
  it('an empty list matches nothing', () => {
    expect(compileGlobs([], GLOB_SEP.source)('x')).toBe(false);
  });
});

describe('column globs', () => {
  const m = compileColumnGlobs(['email', 'public.users.ssn', '*.*.card_*']);
  const cases: [string, boolean][] = [
    ['email', true],
    ['public.users.email', true],
    ['crm.contacts.email', true],
    ['ssn', false],
    ['public.users.ssn', true],
    ['hr.people.ssn', false],
    ['billing.cards.card_number', true],
    ['card_number', false],
  ];
  it.each(cases)('%s → %s', (value, expected) => {
    expect(m(value)).toBe(expected);
  });
});
