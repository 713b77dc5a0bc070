// Helpers shared by the admin API modules: store-error translation, the audit call, common field schemas.
import { SOURCE_ID_PATTERN, SOURCE_ID_RULE } from '../../registry/sources.js';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import { ConflictError, InvalidReferenceError, StoreUnavailableError } from '../../store/errors.js';
import type { AdminAuditEvent } from '../audit-events.js';
import type { Services } from '../../runtime/services.js';
import { validationError } from '../../http/validation.js';
import { auditOf } from '../auth/routes.js';

/**
 * Repository errors as the admin API answers them (the admin error handler calls this for every route):
 * 409 for a duplicate, 422 for a dangling reference, 503 for a lost store; null for any other error.
 */
export function storeErrorAsHttp(err: unknown): GatehouseError | null {
  if (err instanceof ConflictError) {
    const article = /^[aeiou]/i.test(err.resource) ? 'An' : 'A';
    return new GatehouseError('conflict', `${article} ${err.resource} with this ${err.field} already exists.`);
  }
  if (err instanceof InvalidReferenceError) {
    return validationError([{ loc: ['body', err.field], msg: `${err.field} refers to a record that does not exist`, type: 'value_error.reference' }]);
  }
  if (err instanceof StoreUnavailableError) return new GatehouseError('store_unavailable', undefined, { cause: err });
  return null;
}

export function notFound(what: string): GatehouseError {
  return new GatehouseError('not_found', `${what} not found`);
}

/** Records a successful admin action; `changes` must already be masked by the caller (maskSourceConfig, publicIdentity). */
export async function audit(
  services: Services,
  req: FastifyRequest,
  action: string,
  target: AdminAuditEvent['target'],
  changes?: AdminAuditEvent['changes'],
  status = 200,
  details?: Record<string, unknown>,
): Promise<void> {
  await services.adminAudit.record(auditOf(req, { action, target, changes, outcome: 'success', status, ...(details ? { details } : {}) }));
}

export const METADATA_MAX_BYTES = 16 * 1024;

/** Free-form JSON object (spec `obj`), bounded so one record cannot bloat every read of it. */
export const metadataSchema = z
  .record(z.string().max(256), z.unknown())
  .refine((m) => Buffer.byteLength(JSON.stringify(m), 'utf8') <= METADATA_MAX_BYTES, `must serialize to at most ${METADATA_MAX_BYTES} bytes of JSON`);

/** ISO 8601 date-time with an offset (or Z). */
export const timestampSchema = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time with a time zone' });

export function iso(d: Date | null | undefined): string | null {
  return d ? d.toISOString() : null;
}

/** Source ids as they appear in paths and bodies. */
export { SOURCE_ID_PATTERN };
export const sourceIdSchema = z.string().regex(SOURCE_ID_PATTERN, SOURCE_ID_RULE);

/** A present value: neither undefined nor null (for the spec's "optional and nullable" update fields). */
export function given<T>(value: T | null | undefined): value is T {
  return value !== undefined && value !== null;
}
