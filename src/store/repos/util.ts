// Shared repository plumbing: the database handle type, error translation and JSON parameters.
import type { Kysely } from 'kysely';
import type { Database, JsonValue } from '../schema.js';
import { translateStoreError } from '../errors.js';

/** Every repository function takes this handle first: the root Kysely or a transaction of it. */
export type Db = Kysely<Database>;

/** Runs a query and translates store errors (unique → ConflictError, FK → InvalidReferenceError, lost connection). */
export async function guard<T>(resource: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw translateStoreError(error, resource);
  }
}

/** A jsonb parameter: always serialized here, because node-postgres would send a JS array as a PostgreSQL array. */
export function json(value: JsonValue): string {
  return JSON.stringify(value);
}

/** Drops keys whose value is undefined, so a partial update only touches what was given. */
export function defined<T extends object>(patch: T): Partial<T> {
  return Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<T>;
}
