// Audit search and export: filtered, newest-first keyset pages with an opaque cursor, and streamed CSV / JSONL export.
import { sql } from 'kysely';
import type { Kysely, SelectQueryBuilder } from 'kysely';
import { AUDIT_FIELDS, type AuditChannel, type AuditDecision, type AuditEntry } from './entry.js';
import type { AuditDatabase } from './schema.js';

export const SEARCH_MAX_LIMIT = 500;
export const SEARCH_DEFAULT_LIMIT = 100;

export interface AuditFilters {
  from?: Date;
  to?: Date;
  identity_id?: number;
  source_id?: string;
  channel?: AuditChannel;
  decision?: AuditDecision;
  /** The HTTP-style status the request ended with (spec §7). */
  status?: number;
  approval_id?: number;
  request_id?: string;
  limit?: number;
  cursor?: string;
}

export interface AuditPage {
  items: AuditEntry[];
  next_cursor: string | null;
}

/** The cursor does not decode to a position; the route answers 422 for it. */
export class InvalidCursorError extends Error {
  readonly code = 'invalid_cursor' as const;
  constructor() {
    super('cursor is not valid');
    this.name = 'InvalidCursorError';
  }
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Position after the last item of a page: (ts, id) of that row, base64url JSON. */
export function encodeCursor(ts: string, id: string): string {
  return Buffer.from(JSON.stringify([ts, id]), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): { ts: string; id: string } {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string' && UUID_RE.test(v[1]) && !Number.isNaN(Date.parse(v[0]))) {
      return { ts: v[0], id: v[1] };
    }
  } catch {
    // fall through
  }
  throw new InvalidCursorError();
}

type Row = Omit<AuditEntry, 'ts'> & { ts: Date };

function toEntry(row: Row): AuditEntry {
  return { ...row, ts: row.ts.toISOString(), bytes_in: Number(row.bytes_in), bytes_out: Number(row.bytes_out) };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function applyFilters<QB extends SelectQueryBuilder<AuditDatabase, 'audit_entries', any>>(qb: QB, f: AuditFilters): QB {
  let q = qb;
  if (f.from) q = q.where('ts', '>=', f.from as never) as QB;
  if (f.to) q = q.where('ts', '<', f.to as never) as QB;
  if (f.identity_id !== undefined) q = q.where('identity_id', '=', f.identity_id) as QB;
  if (f.source_id !== undefined) q = q.where('source_id', '=', f.source_id) as QB;
  if (f.channel !== undefined) q = q.where('channel', '=', f.channel) as QB;
  if (f.decision !== undefined) q = q.where('decision', '=', f.decision) as QB;
  if (f.status !== undefined) q = q.where('status', '=', f.status) as QB;
  if (f.approval_id !== undefined) q = q.where('approval_id', '=', f.approval_id) as QB;
  if (f.request_id !== undefined) q = q.where('request_id', '=', f.request_id) as QB;
  return q;
}

/**
 * One page, newest first. `from` is inclusive, `to` exclusive. The cursor is a keyset position
 * (ts, id), so pages stay stable while new entries arrive and deep pages cost the same as the first.
 */
export async function searchAudit(db: Kysely<AuditDatabase>, filters: AuditFilters): Promise<AuditPage> {
  const limit = filters.limit ?? SEARCH_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT) throw new RangeError(`limit must be an integer between 1 and ${SEARCH_MAX_LIMIT}`);
  let q = applyFilters(db.selectFrom('audit_entries').select(AUDIT_FIELDS), filters);
  if (filters.cursor) {
    const c = decodeCursor(filters.cursor);
    q = q.where(sql<boolean>`(ts, id) < (${c.ts}::timestamptz, ${c.id}::uuid)`);
  }
  const rows = (await q.orderBy('ts', 'desc').orderBy('id', 'desc').limit(limit + 1).execute()) as unknown as Row[];
  const more = rows.length > limit;
  const items = rows.slice(0, limit).map(toEntry);
  const last = items[items.length - 1];
  return { items, next_cursor: more && last ? encodeCursor(last.ts, last.id) : null };
}

/** One entry by its id (the primary key is (id, ts): one index probe per partition), or null. */
export async function getAuditEntry(db: Kysely<AuditDatabase>, id: string): Promise<AuditEntry | null> {
  if (!UUID_RE.test(id)) return null;
  const row = (await db.selectFrom('audit_entries').select(AUDIT_FIELDS).where('id', '=', id).limit(1).executeTakeFirst()) as unknown as Row | undefined;
  return row ? toEntry(row) : null;
}

// ---------------------------------------------------------------------------------------------
// Export

export type ExportFormat = 'csv' | 'jsonl';

/**
 * Spreadsheet formula injection (OWASP CSV Injection): a text cell starting with one of these is
 * prefixed with a single quote so it is shown, not evaluated.
 */
const FORMULA_START = /^[=+\-@\t\r]/;

export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text: string;
  if (typeof value === 'number' || typeof value === 'boolean') text = String(value);
  else {
    text = typeof value === 'string' ? value : JSON.stringify(value);
    if (FORMULA_START.test(text)) text = `'${text}`;
  }
  return /[",\r\n]/.test(text) || text !== text.trim() ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvRow(entry: AuditEntry): string {
  return AUDIT_FIELDS.map((f) => csvCell(entry[f])).join(',') + '\r\n';
}

/** Streams every entry matching the filters (limit and cursor ignored), newest first, page by page. */
export async function* exportAudit(db: Kysely<AuditDatabase>, filters: AuditFilters, format: ExportFormat): AsyncIterable<string> {
  if (format === 'csv') yield AUDIT_FIELDS.join(',') + '\r\n';
  let cursor: string | undefined;
  for (;;) {
    const page = await searchAudit(db, { ...filters, limit: SEARCH_MAX_LIMIT, ...(cursor ? { cursor } : { cursor: undefined }) });
    if (page.items.length > 0) {
      yield page.items.map((e) => (format === 'csv' ? csvRow(e) : JSON.stringify(e) + '\n')).join('');
    }
    if (!page.next_cursor) return;
    cursor = page.next_cursor;
  }
}
