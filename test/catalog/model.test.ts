// The catalog's pure parts: path quoting round-trips for every name (property), suggestions from the detectors' vocabulary, classifications as governance reads them, and redact_classified in the policy engine.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parsePath, pathOf, quoteSegment } from '../../src/catalog/model.js';
import { suggestClassification } from '../../src/catalog/classify.js';
import { buildClassifications, operationClassifications, templateMatcher } from '../../src/catalog/governance.js';
import { compilePolicies, evaluate } from '../../src/governance/policy/index.js';

describe('paths', () => {
  it('any three names survive pathOf → parsePath', () => {
    const name = fc.string({ minLength: 1, maxLength: 20 }).filter((s) => !s.includes('\u0000'));
    fc.assert(
      fc.property(name, name, name, (a, b, c) => {
        expect(parsePath(pathOf(a, b, c))).toEqual([a, b, c]);
      }),
    );
  });
  it('reads unquoted segments as PostgreSQL does (folded), quoted ones as written', () => {
    expect(parsePath('Public.USERS.Email')).toEqual(['public', 'users', 'email']);
    expect(parsePath('public."Users"."E.mail"')).toEqual(['public', 'Users', 'E.mail']);
    expect(parsePath('"a""b".c')).toEqual(['a"b', 'c']);
    expect(quoteSegment('users')).toBe('users');
    expect(quoteSegment('Users')).toBe('"Users"');
    for (const bad of ['', '.', 'a.', '.a', 'a..b', '"a', 'a"b', 'a.b.c.d', '""', 'a b']) expect(parsePath(bad), bad).toBeNull();
  });
});

describe('suggestions', () => {
  it('use the personal-data detectors key vocabulary', () => {
    expect(suggestClassification('email')).toBe('email');
    expect(suggestClassification('customer_email')).toBe('email');
    expect(suggestClassification('Phone_Number')).toBe('phone');
    expect(suggestClassification('ssn')).toBe('ssn');
    expect(suggestClassification('card_number')).toBe('card');
    expect(suggestClassification('iban')).toBe('iban');
    expect(suggestClassification('last_name')).toBe('name');
    expect(suggestClassification('billing_address')).toBe('address');
    expect(suggestClassification('birth_date')).toBe('dob');
    expect(suggestClassification('client_addr', 'inet')).toBe('ip_address');
    expect(suggestClassification('id', 'integer')).toBeNull();
    expect(suggestClassification('next_page_token')).toBeNull();
  });
});

describe('classifications for governance', () => {
  const c = buildClassifications(
    [
      { path: 'public.users.email', classification: 'contact' },
      { path: '"Mixed Case"."Users"."E.mail"', classification: 'contact' },
      { path: 'GET /users/{id}#profile.email', classification: 'contact' },
    ],
    ['public.users.nickname'],
  );
  it('maps columns to tags and tags to governed column names', () => {
    expect(c.columnTags.get('public.users.email')).toEqual(['contact']);
    expect(c.byTag.get('contact')).toEqual(['public.users.email', 'Mixed Case.Users."E.mail"']);
    expect(c.protectedColumns).toEqual(['public.users.nickname']);
    expect(c.operations).toHaveLength(1);
    expect(c.operations[0]!.byTag.get('contact')).toEqual(['email']);
  });
  it('matches OpenAPI path templates one segment per variable', () => {
    const m = templateMatcher('/users/{id}');
    expect(m('/users/42')).toBe(true);
    expect(m('/users/42/')).toBe(true);
    expect(m('/users/42/orders')).toBe(false);
    expect(m('/users')).toBe(false);
    expect(templateMatcher('/a.b/{x}')('/aXb/1')).toBe(false);
  });
  it('an HTTP request reads its operation\'s tags, and the classified field names of every method on the path under any case', () => {
    fc.assert(
      fc.property(fc.constantFrom('GET', 'PUT', 'PATCH', 'DELETE', 'post', 'get'), fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }), fc.integer({ min: 0, max: 1e9 }), (method, upper, id) => {
        const path = [...'/users'].map((ch, i) => (upper[i] ? ch.toUpperCase() : ch)).join('') + `/${id}`;
        const r = operationClassifications(c, method, [path]);
        expect(r.byTag.get('contact')).toEqual(['email']);
        expect(r.tags).toEqual(method.toUpperCase() === 'GET' ? ['contact'] : []);
      }),
    );
    // A later reading of the path (a nested escape decoded) counts too; another path does not.
    expect(operationClassifications(c, 'GET', ['/other', '/users/1']).tags).toEqual(['contact']);
    expect(operationClassifications(c, 'GET', ['/users/1/orders']).byTag.size).toBe(0);
    // New and renamed relations are protected whole.
    expect(buildClassifications([], ['crm.copy']).protectedColumns).toEqual(['crm.copy.*']);
  });
  it('redact_classified redacts the columns of its tags, only for the policies that match', () => {
    const set = compilePolicies(
      [
        { id: 1, name: 'r', priority: 0, enabled: true, conditions: { identity_ids: [7] }, actions: { redact_classified: ['contact'] } },
        { id: 2, name: 'd', priority: 0, enabled: true, conditions: { classification_tags: ['secret'] }, actions: { effect: 'deny' } },
      ],
      { version: 1 },
    );
    const input = { identity: { id: 7, roles: [], team: null }, source_id: 's', operation: 'read' as const, columns: ['public.users.email'], classification_tags: ['contact'], classified: c.byTag, roleDecision: { allowed: true } };
    expect(evaluate(set, input).obligations.redact_columns).toEqual(['Mixed Case.Users."E.mail"', 'public.users.email']);
    expect(evaluate(set, { ...input, identity: { id: 8, roles: [], team: null } }).obligations.redact_columns).toEqual([]);
    expect(evaluate(set, { ...input, classification_tags: ['secret'] }).effect).toBe('deny');
    expect(evaluate(set, { ...input, classified: undefined }).obligations.redact_columns).toEqual([]);
  });
});
