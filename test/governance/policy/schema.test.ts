// Strict schemas of policy conditions and actions: valid shapes, defaults, and the exact paths of rejections.
import { describe, expect, it } from 'vitest';
import { parsePolicyBody } from '../../../src/governance/policy/schema.js';

describe('parsePolicyBody', () => {
  it('accepts every condition and action field', () => {
    const r = parsePolicyBody(
      {
        source_ids: ['crm', 'billing-*'], identity_roles: ['analyst'], identity_ids: [1, 2], teams: ['data'],
        operations: ['read', 'write'], methods: ['GET', 'POST'], paths: ['/v1/**'], tables: ['public.*'],
        columns: ['email'], classification_tags: ['pii'],
      },
      { effect: 'require_approval', rate_limit: '100/minute', redact_columns: ['*.*.ssn'], pii_mode: 'deep', cache: false },
    );
    expect(r.ok).toBe(true);
  });

  it('defaults: empty conditions match everything, effect defaults to allow', () => {
    const r = parsePolicyBody({}, {});
    expect(r).toEqual({ ok: true, conditions: {}, actions: { effect: 'allow' } });
    expect(parsePolicyBody(null, undefined).ok).toBe(true);
  });

  const invalid: [string, unknown, unknown, (string | number)[], string][] = [
    ['unknown condition key', { source_id: 'crm' }, {}, ['conditions'], 'extra_forbidden'],
    ['unknown action key', {}, { effect: 'allow', rate: '1/s' }, ['actions'], 'extra_forbidden'],
    ['bad effect', {}, { effect: 'permit' }, ['actions', 'effect'], 'invalid_value'],
    ['bad operation', { operations: ['read', 'select'] }, {}, ['conditions', 'operations', 1], 'invalid_value'],
    ['lower-case method', { methods: ['get'] }, {}, ['conditions', 'methods', 0], 'invalid_value'],
    ['empty list', { tables: [] }, {}, ['conditions', 'tables'], 'too_small'],
    ['empty pattern', { tables: ['public.*', ''] }, {}, ['conditions', 'tables', 1], 'too_small'],
    ['scalar instead of list', { source_ids: 'crm' }, {}, ['conditions', 'source_ids'], 'invalid_type'],
    ['relative path', { paths: ['users/*'] }, {}, ['conditions', 'paths', 0], 'custom'],
    ['non-integer identity id', { identity_ids: [1.5] }, {}, ['conditions', 'identity_ids', 0], 'invalid_type'],
    ['bad rate limit', {}, { rate_limit: '100/fortnight' }, ['actions', 'rate_limit'], 'custom'],
    ['bad pii mode', {}, { pii_mode: 'full' }, ['actions', 'pii_mode'], 'invalid_value'],
    ['cache as string', {}, { cache: 'false' }, ['actions', 'cache'], 'invalid_type'],
    ['control character', { paths: ['/a\nb'] }, {}, ['conditions', 'paths', 0], 'custom'],
    ['conditions not an object', ['x'], {}, ['conditions'], 'invalid_type'],
  ];
  it.each(invalid)('%s → issue at %j', (_name, conditions, actions, loc, type) => {
    const r = parsePolicyBody(conditions, actions);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues[0]).toMatchObject({ loc, type });
    expect(r.issues[0]?.msg.length).toBeGreaterThan(0);
  });

  it('names the unknown keys in the message', () => {
    const r = parsePolicyBody({ source_id: 'x', tabels: ['a.b'] }, {});
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues[0]?.msg).toBe('unknown field(s): source_id, tabels');
  });

  it('reports issues of conditions and actions together', () => {
    const r = parsePolicyBody({ operations: ['x'] }, { effect: 'x' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.loc[0])).toEqual(['conditions', 'actions']);
  });
});
