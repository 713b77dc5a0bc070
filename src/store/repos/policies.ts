// Policies (spec §2): CRUD, and the version of the compiled policy set that a trigger advances on any change.
import { sql } from 'kysely';
import type { JsonObject, Policy } from '../schema.js';
import { defined, guard, json } from './util.js';
import type { Db } from './util.js';

const RESOURCE = 'policy';

export interface NewPolicyInput {
  name: string;
  conditions: JsonObject;
  actions: JsonObject;
  priority?: number;
  enabled?: boolean;
}

export type PolicyPatch = Partial<NewPolicyInput>;

function jsonFields<T extends { conditions?: JsonObject; actions?: JsonObject }>(input: T) {
  const { conditions, actions, ...rest } = input;
  return {
    ...rest,
    ...(conditions !== undefined ? { conditions: json(conditions) } : {}),
    ...(actions !== undefined ? { actions: json(actions) } : {}),
  };
}

export function createPolicy(db: Db, input: NewPolicyInput): Promise<Policy> {
  return guard(RESOURCE, () => db.insertInto('policies').values(jsonFields(input)).returningAll().executeTakeFirstOrThrow());
}

export function getPolicyById(db: Db, id: number): Promise<Policy | undefined> {
  return db.selectFrom('policies').selectAll().where('id', '=', id).executeTakeFirst();
}

export function getPolicyByName(db: Db, name: string): Promise<Policy | undefined> {
  return db.selectFrom('policies').selectAll().where('name', '=', name).executeTakeFirst();
}

/** Highest priority first, then oldest: the evaluation order of the policy engine. */
export function listPolicies(db: Db, opts: { enabledOnly?: boolean } = {}): Promise<Policy[]> {
  let query = db.selectFrom('policies').selectAll().orderBy('priority', 'desc').orderBy('id');
  if (opts.enabledOnly) query = query.where('enabled', '=', true);
  return query.execute();
}

export async function updatePolicy(db: Db, id: number, patch: PolicyPatch): Promise<Policy | undefined> {
  const values = jsonFields(defined(patch));
  if (Object.keys(values).length === 0) return getPolicyById(db, id);
  return guard(RESOURCE, () =>
    db
      .updateTable('policies')
      .set({ ...values, updated_at: sql`now()` })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst(),
  );
}

export async function deletePolicy(db: Db, id: number): Promise<boolean> {
  const result = await guard(RESOURCE, () => db.deleteFrom('policies').where('id', '=', id).executeTakeFirst());
  return result.numDeletedRows > 0n;
}

/** The compiled-set version: a replica recompiles when it differs from the one it compiled. */
export async function getPolicySetVersion(db: Db): Promise<number> {
  const row = await db.selectFrom('policy_set_version').select('version').executeTakeFirstOrThrow();
  return row.version;
}

/**
 * Takes the row lock on the version counter for the rest of the transaction, so policy writes of
 * several replicas serialise and a reader of the counter sees the version that matches the rows.
 */
export async function lockPolicySetVersion(trx: Db): Promise<number> {
  const row = await trx.selectFrom('policy_set_version').select('version').forUpdate().executeTakeFirstOrThrow();
  return Number(row.version);
}

/**
 * Sets the counter explicitly. The statement trigger advances it once per write statement; an import
 * that writes many rows resets it to `start + 1` at the end so one import is one version step.
 */
export async function setPolicySetVersion(trx: Db, version: number): Promise<number> {
  const row = await trx.updateTable('policy_set_version').set({ version, updated_at: sql`now()` }).returning('version').executeTakeFirstOrThrow();
  return Number(row.version);
}
