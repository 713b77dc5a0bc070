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

/** Items for one location; `input` is deliberately left out, since it may hold a password or key. */
export function validationItems(where: ValidationLocation, error: z.ZodError): ValidationErrorItem[] {
  const items: ValidationErrorItem[] = [];
  for (const issue of error.issues) {
    const loc = [where, ...issue.path.map((p) => (typeof p === 'number' ? p : String(p)))];
    if (issue.code === 'invalid_type' && issue.input === undefined) {
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

export function validationError(items: ValidationErrorItem[]): GatehouseError {
  return new GatehouseError('validation_failed', 'The input is invalid.', { details: { detail: items } });
}

/** Parses one part of a request; throws the 422 error naming every problem of that part. */
export function parseOrThrow<S extends z.ZodType>(schema: S, where: ValidationLocation, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw validationError(validationItems(where, result.error));
}
