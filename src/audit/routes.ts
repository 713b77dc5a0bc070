// The admin audit routes: GET /api/audit (filtered keyset pages) and GET /api/audit/export (streamed CSV / JSONL); the admin app mounts them behind its auth guard.
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import { AUDIT_CHANNELS, AUDIT_DECISIONS } from './entry.js';
import type { AuditDatabase } from './schema.js';
import { validationItems } from '../http/validation.js';
import { decodeCursor, exportAudit, InvalidCursorError, searchAudit, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, type AuditFilters, type ExportFormat } from './search.js';

export interface AuditRouteDeps {
  db: Kysely<AuditDatabase>;
  /** The admin auth guard (auditor or admin); it answers the request itself to refuse it. */
  authorize: (req: FastifyRequest, reply: FastifyReply) => Promise<void> | void;
}

/** ISO 8601 date and time; without an offset (a browser's datetime-local field) it is UTC. */
const isoDate = z.iso.datetime({ offset: true, local: true }).transform((s) => new Date(/(?:z|[+-]\d\d(?::?\d\d)?)$/i.test(s) ? s : `${s}Z`));
const intId = z.coerce.number().int().min(1).max(2_147_483_647);

export const auditFilterQuery = z.object({
  from: isoDate.optional(),
  to: isoDate.optional(),
  identity_id: intId.optional(),
  source_id: z.string().min(1).max(256).optional(),
  channel: z.enum(AUDIT_CHANNELS).optional(),
  decision: z.enum(AUDIT_DECISIONS).optional(),
  status: z.coerce.number().int().min(100).max(599).optional(),
  approval_id: intId.optional(),
  request_id: z.string().min(1).max(256).optional(),
});

export const auditSearchQuery = auditFilterQuery.extend({
  limit: z.coerce.number().int().min(1).max(SEARCH_MAX_LIMIT).default(SEARCH_DEFAULT_LIMIT),
  cursor: z.string().min(1).max(1024).optional(),
});

export const auditExportQuery = auditFilterQuery.extend({ format: z.enum(['csv', 'jsonl']).default('jsonl') });

function parseQuery<S extends z.ZodType>(schema: S, req: FastifyRequest, reply: FastifyReply): z.output<S> | null {
  const query = req.query as Record<string, unknown>;
  // A repeated parameter arrives as an array; only single values are meaningful here.
  const single = Object.fromEntries(Object.entries(query ?? {}).map(([k, v]) => [k, Array.isArray(v) ? v[v.length - 1] : v]));
  const parsed = schema.safeParse(single);
  if (!parsed.success) {
    void reply.code(422).send({ detail: validationItems('query', parsed.error, single) });
    return null;
  }
  return parsed.data;
}

export function registerAuditRoutes(app: FastifyInstance, deps: AuditRouteDeps): void {
  const preHandler = async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    await deps.authorize(req, reply);
    return reply.sent ? reply : undefined;
  };

  app.get('/api/audit', { preHandler }, async (req, reply) => {
    const q = parseQuery(auditSearchQuery, req, reply);
    if (!q) return reply;
    if (q.cursor) {
      try {
        decodeCursor(q.cursor);
      } catch (error) {
        if (!(error instanceof InvalidCursorError)) throw error;
        return reply.code(422).send({ detail: [{ loc: ['query', 'cursor'], msg: 'cursor is not valid', type: 'value_error' }] });
      }
    }
    return searchAudit(deps.db, q as AuditFilters);
  });

  app.get('/api/audit/export', { preHandler }, async (req, reply) => {
    const q = parseQuery(auditExportQuery, req, reply);
    if (!q) return reply;
    const { format, ...filters } = q;
    return sendAuditExport(reply, deps.db, filters as AuditFilters, format);
  });
}

/** Streams the entries matching `filters` as a download (CSV or JSON Lines), page by page through the keyset search. */
export function sendAuditExport(reply: FastifyReply, db: Kysely<AuditDatabase>, filters: AuditFilters, format: ExportFormat): FastifyReply {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  void reply
    .header('content-type', format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8')
    .header('content-disposition', `attachment; filename="audit-${stamp}.${format}"`)
    .header('cache-control', 'no-store');
  return reply.send(Readable.from(exportAudit(db, filters, format)));
}
