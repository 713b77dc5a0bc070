// Policy writes in one transaction each, under the version-counter lock, returning before/after and the new policy set version.
import { GatehouseError } from '../../errors/registry.js';
import {
  createPolicy,
  deletePolicy,
  getPolicyById,
  getPolicySetVersion,
  lockPolicySetVersion,
  setPolicySetVersion,
  updatePolicy,
} from '../../store/repos/policies.js';
import type { PolicyPatch } from '../../store/repos/policies.js';
import type { Db } from '../../store/repos/util.js';
import type { JsonObject, Policy } from '../../store/schema.js';

export interface PolicyWrite {
  before: Policy | null;
  after: Policy | null;
  version: number;
}

export interface NewPolicy {
  name: string;
  priority: number;
  conditions: JsonObject;
  actions: JsonObject;
  enabled: boolean;
}

export async function createPolicyVersioned(db: Db, input: NewPolicy): Promise<PolicyWrite> {
  return db.transaction().execute(async (trx) => {
    await lockPolicySetVersion(trx);
    const after = await createPolicy(trx, input);
    return { before: null, after, version: await getPolicySetVersion(trx) };
  });
}

/** `check` sees the merged result before it is written, so conditions/actions are validated as a whole. */
export async function updatePolicyVersioned(db: Db, id: number, patch: PolicyPatch, check: (merged: Policy) => void): Promise<PolicyWrite> {
  return db.transaction().execute(async (trx) => {
    await lockPolicySetVersion(trx);
    const before = await trx.selectFrom('policies').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
    if (!before) throw new GatehouseError('not_found', 'Policy not found.');
    check({ ...before, ...patch } as Policy);
    const after = await updatePolicy(trx, id, patch);
    if (!after) throw new GatehouseError('not_found', 'Policy not found.');
    return { before, after, version: await getPolicySetVersion(trx) };
  });
}

export async function deletePolicyVersioned(db: Db, id: number): Promise<PolicyWrite> {
  return db.transaction().execute(async (trx) => {
    await lockPolicySetVersion(trx);
    const before = await getPolicyById(trx, id);
    if (!before || !(await deletePolicy(trx, id))) throw new GatehouseError('not_found', 'Policy not found.');
    return { before, after: null, version: await getPolicySetVersion(trx) };
  });
}

export interface ImportWrite {
  kind: 'create' | 'update';
  /** Existing policy id for updates. */
  id?: number;
  policy: NewPolicy;
}

export interface ImportResult {
  created: Policy[];
  updated: Array<{ before: Policy; after: Policy }>;
  version: number;
}

/**
 * Applies a planned import atomically. `replan` runs inside the transaction against the locked state and
 * must throw when the plan is no longer valid (e.g. a name taken meanwhile), so nothing is half-applied.
 * The version advances exactly once, however many rows change; an import that changes nothing keeps it.
 */
export async function applyImportVersioned(db: Db, replan: (trx: Db) => Promise<ImportWrite[]>): Promise<ImportResult> {
  return db.transaction().execute(async (trx) => {
    const start = await lockPolicySetVersion(trx);
    const writes = await replan(trx);
    const created: Policy[] = [];
    const updated: Array<{ before: Policy; after: Policy }> = [];
    for (const w of writes) {
      if (w.kind === 'create') {
        created.push(await createPolicy(trx, w.policy));
        continue;
      }
      const before = await getPolicyById(trx, w.id as number);
      const after = before ? await updatePolicy(trx, before.id, w.policy) : undefined;
      if (!before || !after) throw new GatehouseError('conflict', `Policy ${String(w.id)} changed during the import; preview again.`);
      updated.push({ before, after });
    }
    const version = writes.length === 0 ? start : await setPolicySetVersion(trx, start + 1);
    return { created, updated, version };
  });
}
