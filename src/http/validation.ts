// The one mapper from zod issues to the spec's HTTPValidationError shape (422 `{detail: [{loc, msg, type}]}`).
import type { z } from 'zod';
import { GatehouseError } from '../errors/registry.js';

export type ValidationLocation = 'body' | 'query' | 'path' | 'header';

export interface ValidationErrorItem {
  loc: Array<string | number>;
  msg: string;
  type: string;
  ctx?: Record<string, unknown>;
}

const TYPE_BY_CODE: Record<string, string> = {
  invalid_type: 'type_error',
  too_small: 'value_error.too_small',
  too_big: 'value_error.too_big',
  invalid_format: 'value_error.format',
  invalid_value: 'value_error.enum',
  unrecognized_keys: 'value_error.extra',
  invalid_union: 'value_error.union',
  custom: 'value_error',
};

/**
 * Items for one location; `input` is deliberately left out, since it may hold a password or key.
 * `value` is what was validated: a field is "missing" only when it is absent there (zod does not report the
 * input of an issue by default, so the issue alone cannot tell a missing field from a wrong-typed one).
 */
export function validationItems(where: ValidationLocation, error: z.ZodError, value: unknown): ValidationErrorItem[] {
  const items: ValidationErrorItem[] = [];
  for (const issue of error.issues) {
    const loc = [where, ...issue.path.map((p) => (typeof p === 'number' ? p : String(p)))];
    if (issue.code === 'invalid_type' && valueAt(value, issue.path) === undefined) {
      items.push({ loc, msg: 'Field required', type: 'missing' });
      continue;
    }
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) items.push({ loc: [...loc, key], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
      continue;
    }
    items.push({ loc, msg: issue.message, type: TYPE_BY_CODE[issue.code] ?? 'value_error' });
  }
  return items;
}

/** The value at `path` inside `value`, or undefined when any step is absent. */
function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let at = value;
  for (const key of path) {
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, key)) return undefined;
    at = (at as Record<PropertyKey, unknown>)[key];
  }
  return at;
}

/** The 422 for a request body that is not JSON although its content type says so (spec §7: admin validation failures are 422). */
export function malformedJsonError(empty = false): GatehouseError {
  const msg = empty ? 'JSON decode error: the request body is empty although its content type is JSON' : 'JSON decode error: the request body is not valid JSON';
  return validationError([{ loc: ['body'], msg, type: 'json_invalid' }]);
}

export function validationError(items: ValidationErrorItem[]): GatehouseError {
  return new GatehouseError('validation_failed', 'The input is invalid.', { details: { detail: items } });
}

/** Parses one part of a request; throws the 422 error naming every problem of that part. */
export function parseOrThrow<S extends z.ZodType>(schema: S, where: ValidationLocation, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw validationError(validationItems(where, result.error, value));
}
