// Builders for policy records and evaluation inputs shared by the policy tests.
import type { PolicyInput } from '../../../src/governance/policy/compile.js';
import type { PolicyRecord } from '../../../src/governance/policy/schema.js';

export function policy(id: number, conditions: Record<string, unknown>, actions: Record<string, unknown>, extra: Partial<PolicyRecord> = {}): PolicyRecord {
  return { id, name: `p${id}`, priority: 0, enabled: true, conditions, actions, ...extra };
}

export function input(overrides: Partial<PolicyInput> = {}): PolicyInput {
  return {
    identity: { id: 7, roles: ['analyst'], team: 'data' },
    source_id: 'crm',
    operation: 'read',
    tables: ['public.users'],
    columns: ['public.users.email'],
    classification_tags: [],
    roleDecision: { allowed: true },
    ...overrides,
  };
}
