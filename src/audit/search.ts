// Audit search and export: filtered, newest-first keyset pages with an opaque cursor, and streamed CSV / JSONL export.
import { sql } from 'kysely';
import type { Kysely, SelectQueryBuilder } from 'kysely';
import { AUDIT_FIELDS, auditIdMs, type AuditChannel, type AuditDecision, type AuditEntry } from './entry.js';
import type { AuditDatabase } from './schema.js';
import { dayStart } from './partitions.js';

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

/** The keyset condition: rows strictly after the cursor's position in the page order. */
function afterCursor<QB extends SelectQueryBuilder<AuditDatabase, 'audit_entries', any>>(qb: QB, c: { ts: string; id: string } | null): QB {  // eslint-disable-line @typescript-eslint/no-explicit-any
  return (c ? qb.where(sql<boolean>`(ts, id) < (${c.ts}::timestamptz, ${c.id}::uuid)`) : qb) as QB;
}

/**
 * Rows of the hot partition an identity or source search reads by time order before it changes plan: enough for any
 * filter that matches one row in a hundred to fill a page of 100 (docs/decisions/0024, "Search of the hot partition").
 */
export const HOT_PROBE_ROWS = 10_000;
/**
 * A filter that matched at least a page's 1/HOT_PROBE_COMMON in those rows goes on by time order (it is in most block
 * ranges: the bloom filters would rule out few); a rarer one goes to the bloom filters.
 */
const HOT_PROBE_COMMON = 20;

/**
 * A filter the hot partition answers from its BRIN bloom index (migration 0017): a value absent from a block range
 * rules the range out. The closed partitions have B-tree indexes for these.
 */
function bloomFiltered(f: AuditFilters): boolean {
  return f.identity_id !== undefined || f.source_id !== undefined || f.request_id !== undefined;
}

type Page = (limit: number, range: { from?: Date; to?: Date }) => Promise<Row[]>;

/**
 * One page, newest first. `from` is inclusive, `to` exclusive. The cursor is a keyset position
 * (ts, id), so pages stay stable while new entries arrive and deep pages cost the same as the first.
 *
 * The hot partition (today, UTC) carries no B-tree per filter, only the time order and BRIN bloom filters
 * (docs/decisions/0024). One query over every partition lets PostgreSQL read the hot partition backwards by time
 * for a filter that matches few of its rows (it expects the matches early, and it cannot cost a bloom filter): a
 * rare identity read the whole day. So the hot day is searched first, on its own (searchHot), and the older
 * partitions, which answer each filter from their own indexes, only for what the page still lacks. Rows of the hot
 * day are newer than every older row: the two parts in turn are the page in order.
 */
export async function searchAudit(db: Kysely<AuditDatabase>, filters: AuditFilters): Promise<AuditPage> {
  const limit = filters.limit ?? SEARCH_DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT) throw new RangeError(`limit must be an integer between 1 and ${SEARCH_MAX_LIMIT}`);
  const cursor = filters.cursor ? decodeCursor(filters.cursor) : null;
  const query = (range: { from?: Date; to?: Date }) => {
    let q = afterCursor(applyFilters(db.selectFrom('audit_entries').select(AUDIT_FIELDS), filters), cursor);
    if (range.from) q = q.where('ts', '>=', range.from as never);
    if (range.to) q = q.where('ts', '<', range.to as never);
    return q.orderBy('ts', 'desc').orderBy('id', 'desc');
  };
  const page: Page = async (n, range) => (await query(range).limit(n).execute()) as unknown as Row[];
  const hotStart = dayStart(new Date());
  const want = limit + 1;
  const rows: Row[] = [];
  const hotReachable = !(filters.to && filters.to.getTime() <= hotStart.getTime()) && !(cursor && Date.parse(cursor.ts) < hotStart.getTime());
  if (hotReachable) rows.push(...(await searchHot(db, filters, cursor, hotStart, want, page)));
  if (rows.length < want && !(filters.from && filters.from.getTime() >= hotStart.getTime())) {
    rows.push(...(await page(want - rows.length, { to: hotStart })));
  }
  const more = rows.length > limit;
  const items = rows.slice(0, limit).map(toEntry);
  const last = items[items.length - 1];
  return { items, next_cursor: more && last ? encodeCursor(last.ts, last.id) : null };
}

/**
 * The hot day's part of a page. Without an identity, source or request id filter, by time order. With an identity or
 * source: first by time order through the newest HOT_PROBE_ROWS rows, which fills the page when the filter is common;
 * then, below them, by time order again when it matched often enough there (HOT_PROBE_COMMON), else through the BRIN
 * bloom index, which skips every block range without the value, so a rare or absent value costs the ranges holding it
 * rather than the day. A request id goes to the bloom index at once. PostgreSQL cannot cost a bloom filter (it prices
 * BRIN by the column's physical correlation, near zero here) and would read the day by time order or in full, so that
 * read runs with plain index and sequential scans disabled for its transaction, and with its upper bound written so
 * the time index cannot serve it.
 */
async function searchHot(
  db: Kysely<AuditDatabase>, filters: AuditFilters, cursor: { ts: string; id: string } | null, hotStart: Date, want: number, page: Page,
): Promise<Row[]> {
  const range = { from: filters.from && filters.from.getTime() > hotStart.getTime() ? filters.from : hotStart, ...(filters.to ? { to: filters.to } : {}) };
  if (!bloomFiltered(filters)) return page(want, range);
  const scoped = { ...filters, from: range.from };
  let newest: Row[] = [];
  if (filters.request_id === undefined) {
    // The range's newest HOT_PROBE_ROWS rows by time order, filtered; the scan stops once the page is full.
    let recent = afterCursor(db.selectFrom('audit_entries').select(AUDIT_FIELDS).where('ts', '>=', range.from as never), cursor);
    if (range.to) recent = recent.where('ts', '<', range.to as never);
    const probe = db.selectFrom(recent.orderBy('ts', 'desc').orderBy('id', 'desc').limit(HOT_PROBE_ROWS).as('audit_entries')).selectAll();
    newest = (await applyFilters(probe as unknown as SelectQueryBuilder<AuditDatabase, 'audit_entries', Row>, scoped)
      .orderBy('ts', 'desc').orderBy('id', 'desc').limit(want).execute()) as unknown as Row[];
    if (newest.length >= want) return newest;
  }
  // Every match among those rows is in `newest` (a request id, near unique, skips them): the rest lie below its last
  // match, or below the cursor.
  const last = newest[newest.length - 1];
  const below = last ? { ts: last.ts.toISOString(), id: last.id } : cursor;
  if (newest.length * HOT_PROBE_COMMON >= want) {
    // Common enough that reading on by time order finds the rest within about HOT_PROBE_COMMON × HOT_PROBE_ROWS rows,
    // where its values are in most block ranges and the bloom filters would rule out few.
    return [...newest, ...((await afterCursor(applyFilters(db.selectFrom('audit_entries').select(AUDIT_FIELDS), scoped), below)
      .orderBy('ts', 'desc').orderBy('id', 'desc').limit(want - newest.length).execute()) as unknown as Row[])];
  }
  const older = await db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    await sql`set local enable_indexscan = off`.execute(trx);
    await sql`set local enable_indexonlyscan = off`.execute(trx);
    let q = applyFilters(trx.selectFrom('audit_entries').select(AUDIT_FIELDS), scoped);
    // ts + 0 s: the same order, but no index on ts can serve the bound, so only the bloom filters narrow the read.
    if (below) q = q.where(sql<boolean>`(ts + interval '0 s', id) < (${below.ts}::timestamptz, ${below.id}::uuid)`);
    return (await q.orderBy('ts', 'desc').orderBy('id', 'desc').limit(want - newest.length).execute()) as unknown as Row[];
  });
  return [...newest, ...older];
}

/**
 * One entry by its id, or null. An entry's id holds its ts (a UUIDv7 made from the same clock reading, checked when the
 * entry is written: assertValidEntry), so the lookup is one probe of the unique key (ts, id) in one partition.
 */
export async function getAuditEntry(db: Kysely<AuditDatabase>, id: string): Promise<AuditEntry | null> {
  if (!UUID_RE.test(id)) return null;
  // 48 bits of milliseconds: at most the year 10889, always a valid Date.
  const row = (await db.selectFrom('audit_entries').select(AUDIT_FIELDS).where('ts', '=', new Date(auditIdMs(id))).where('id', '=', id).limit(1).executeTakeFirst()) as unknown as Row | undefined;
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
