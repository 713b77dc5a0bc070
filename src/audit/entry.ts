// The canonical audit entry (DESIGN §6, spec §6.4): one typed record for every channel, its validation, id generation and secret masking.
import { MASK, maskUrlCredentials } from '../config/secrets.js';
import { stringify as stableStringify } from 'safe-stable-stringify';
import { uuidv7 } from '../util/uuidv7.js';

export const AUDIT_CHANNELS = ['http', 'pgwire', 'mcp', 'admin'] as const;
export type AuditChannel = (typeof AUDIT_CHANNELS)[number];

export const AUDIT_DECISIONS = ['allow', 'deny', 'require_approval', 'error'] as const;
export type AuditDecision = (typeof AUDIT_DECISIONS)[number];

export const AUDIT_CACHE_OUTCOMES = ['hit', 'miss', 'bypass'] as const;
export type AuditCacheOutcome = (typeof AUDIT_CACHE_OUTCOMES)[number];

/** What an admin action acted on, e.g. `{type: 'identity', id: '42'}`. */
export interface AuditTarget {
  type: string;
  id: string;
}

/** Before/after of an admin change, already passed through sanitizeChanges(). */
export interface AuditChanges {
  before: unknown;
  after: unknown;
}

/**
 * One audit record. `id` is generated when the entry is created and is the idempotency key:
 * every retry, spill and replay carries the same id (and ts), so storage keeps it once.
 * No field may hold a secret or raw SQL text: `sql_normalized` has literals replaced by placeholders.
 */
export interface AuditEntry {
  id: string;
  /** ISO-8601 UTC with millisecond precision (the partition key). */
  ts: string;
  request_id: string;
  channel: AuditChannel;
  identity_id: number | null;
  /** The acting admin for channel `admin`. */
  admin_user_id: number | null;
  source_id: string | null;
  /** read | write | ddl | admin | tool name …; free text bounded by the caller's vocabulary. */
  operation: string | null;
  method: string | null;
  path: string | null;
  sql_fingerprint: string | null;
  sql_normalized: string | null;
  tables: string[];
  decision: AuditDecision;
  reasons: string[];
  policy_ids: number[];
  approval_id: number | null;
  status: number;
  upstream_status: number | null;
  cache: AuditCacheOutcome | null;
  redactions: number;
  bytes_in: number;
  bytes_out: number;
  duration_ms: number;
  client_ip: string | null;
  /** Admin action name, e.g. `identity.create`. */
  action: string | null;
  target: AuditTarget | null;
  changes: AuditChanges | null;
  /** The error registry code when the request failed. */
  error_code: string | null;
}

/** The fields a request fills in as it progresses (everything but the generated id and ts). */
export type AuditFields = Omit<AuditEntry, 'id' | 'ts'>;

/** Column order used for storage, CSV export and validation; one list so they cannot drift. */
export const AUDIT_FIELDS = [
  'id', 'ts', 'request_id', 'channel', 'identity_id', 'admin_user_id', 'source_id', 'operation', 'method', 'path',
  'sql_fingerprint', 'sql_normalized', 'tables', 'decision', 'reasons', 'policy_ids', 'approval_id', 'status',
  'upstream_status', 'cache', 'redactions', 'bytes_in', 'bytes_out', 'duration_ms', 'client_ip', 'action', 'target',
  'changes', 'error_code',
] as const satisfies readonly (keyof AuditEntry)[];

/** An audit entry's id: a UUIDv7, so entries sort by creation time and the primary key's inserts stay at its right edge. */
export const newAuditId: (nowMs?: number) => string = uuidv7;

/** Entries created within one second share the first 20 characters of their timestamp (`YYYY-MM-DDTHH:MM:SS.`). */
let tsSecond = Number.NaN;
let tsPrefix = '';

/**
 * `new Date(ms).toISOString()`, with the date and time of day formatted once per second: toISOString took ≈ 0.9 µs
 * per entry. Same string for every millisecond (test/audit/entry.test.ts compares them).
 */
export function isoTimestamp(nowMs: number): string {
  // Date truncates a fractional time value toward zero (TimeClip).
  const ms = Math.trunc(nowMs);
  const second = Math.floor(ms / 1000);
  if (second !== tsSecond) {
    // The prefix is everything before the milliseconds, whatever the year's width (`+010000-…` after 9999).
    tsPrefix = new Date(second * 1000).toISOString().slice(0, -4);
    tsSecond = second;
  }
  const milli = ms - second * 1000;
  return `${tsPrefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}

/** The Unix milliseconds a UUIDv7 holds (its first 48 bits): an entry's id holds its ts (newAuditId, AuditContext). */
export function auditIdMs(id: string): number {
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TS_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** The length of every timestamp TS_RE matches. */
const TS_LENGTH = 24;
/** The longest text an entry field holds; longer statement texts are cut to it (boundedAuditText). */
export const AUDIT_TEXT_MAX = 16_384;
/** The most elements an entry's text arrays (tables, reasons) hold. */
export const AUDIT_ARRAY_MAX = 1_000;

// Checked on every write (a measurable share of the wire listener's per-statement CPU): the field lists and
// vocabularies are built once here, not per call.
const CHANNELS: ReadonlySet<unknown> = new Set(AUDIT_CHANNELS);
const DECISIONS: ReadonlySet<unknown> = new Set(AUDIT_DECISIONS);
const CACHE_OUTCOMES: ReadonlySet<unknown> = new Set(AUDIT_CACHE_OUTCOMES);

/** PostgreSQL `integer` (int4): the columns that hold ids, statuses and counts other than bytes. */
const INT4_MAX = 2_147_483_647;
const int4 = (v: unknown): boolean => Number.isInteger(v) && (v as number) >= -INT4_MAX - 1 && (v as number) <= INT4_MAX;
const intOrNull = (v: unknown): boolean => v === null || int4(v);
const count = (v: unknown): boolean => int4(v) && (v as number) >= 0;
/** `bigint` columns (bytes in and out): any non-negative safe integer. */
const bigCount = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;
const textOrNull = (v: unknown): boolean => v === null || (typeof v === 'string' && v.length <= AUDIT_TEXT_MAX);

function textArray(v: unknown): boolean {
  if (!Array.isArray(v) || v.length > AUDIT_ARRAY_MAX) return false;
  for (const s of v) if (typeof s !== 'string' || s.length > AUDIT_TEXT_MAX) return false;
  return true;
}

function intArray(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  for (const n of v) if (!int4(n)) return false;
  return true;
}

/**
 * Request-derived text cut to what an entry holds: a statement may be up to `gateway.limits.sql_bytes` long, and a
 * normalized text past AUDIT_TEXT_MAX would otherwise fail the entry's validation and with it the request. The cut
 * ends in `…`; the fingerprint still identifies the whole statement.
 */
export function boundedAuditText(s: string | null): string | null {
  if (s === null || s.length <= AUDIT_TEXT_MAX) return s;
  return `${s.slice(0, AUDIT_TEXT_MAX - 1).toWellFormed()}…`;
}

/** The second (`YYYY-MM-DDTHH:MM:SS.`) of the last timestamp found valid, and its Unix milliseconds. */
let validTsSecond = '';
let validTsSecondMs = 0;

/**
 * Unix milliseconds of a timestamp PostgreSQL reads back as the same instant, or NaN for anything else: the pattern,
 * then a round trip through Date, which refuses what Date.parse alone rolls over (`2026-02-30` parses as March 2nd;
 * PostgreSQL refuses it, which would fail the entry's whole batch). The pattern and the round trip (≈ 1 µs) run once
 * per second of timestamps; within a second found valid, only the milliseconds' digits are checked and read. The writer's check (assertValidEntry) and the binary COPY
 * encoder (copy-binary.ts) both read an entry's time here.
 */
export function entryTimeMs(v: unknown): number {
  if (typeof v !== 'string' || v.length !== TS_LENGTH) return Number.NaN;
  if (validTsSecond !== '' && v.startsWith(validTsSecond)) {
    // The second is one found valid: only the milliseconds and the zone are left to check (what TS_RE would).
    const a = v.charCodeAt(20) - 48;
    const b = v.charCodeAt(21) - 48;
    const c = v.charCodeAt(22) - 48;
    if (a < 0 || a > 9 || b < 0 || b > 9 || c < 0 || c > 9 || v.charCodeAt(23) !== 0x5a) return Number.NaN;
    return validTsSecondMs + a * 100 + b * 10 + c;
  }
  if (!TS_RE.test(v)) return Number.NaN;
  const ms = Date.parse(v);
  if (Number.isNaN(ms) || new Date(ms).toISOString() !== v) return Number.NaN;
  validTsSecond = v.slice(0, 20);
  validTsSecondMs = ms - Number(v.slice(20, 23));
  return ms;
}

/** The first invalid field of an object entry, or null. */
function invalidField(e: AuditEntry): string | null {
  if (typeof e.id !== 'string' || !UUID_RE.test(e.id)) return 'id';
  const ms = entryTimeMs(e.ts);
  if (Number.isNaN(ms)) return 'ts';
  // The store's key is (ts, id) and an entry is found by its id through the time it holds (getAuditEntry).
  if (auditIdMs(e.id) !== ms) return 'id';
  if (typeof e.request_id !== 'string' || e.request_id.length === 0 || e.request_id.length > 256) return 'request_id';
  if (!CHANNELS.has(e.channel)) return 'channel';
  if (!DECISIONS.has(e.decision)) return 'decision';
  if (e.cache !== null && !CACHE_OUTCOMES.has(e.cache)) return 'cache';
  // Field by field rather than loops over key lists: named reads stay fast on this per-request path.
  if (!intOrNull(e.identity_id)) return 'identity_id';
  if (!intOrNull(e.admin_user_id)) return 'admin_user_id';
  if (!intOrNull(e.approval_id)) return 'approval_id';
  if (!intOrNull(e.upstream_status)) return 'upstream_status';
  if (!count(e.status)) return 'status';
  if (!count(e.redactions)) return 'redactions';
  if (!bigCount(e.bytes_in)) return 'bytes_in';
  if (!bigCount(e.bytes_out)) return 'bytes_out';
  if (typeof e.duration_ms !== 'number' || !Number.isFinite(e.duration_ms) || e.duration_ms < 0) return 'duration_ms';
  if (!textOrNull(e.source_id)) return 'source_id';
  if (!textOrNull(e.operation)) return 'operation';
  if (!textOrNull(e.method)) return 'method';
  if (!textOrNull(e.path)) return 'path';
  if (!textOrNull(e.sql_fingerprint)) return 'sql_fingerprint';
  if (!textOrNull(e.sql_normalized)) return 'sql_normalized';
  if (!textOrNull(e.client_ip)) return 'client_ip';
  if (!textOrNull(e.action)) return 'action';
  if (!textOrNull(e.error_code)) return 'error_code';
  if (!textArray(e.tables)) return 'tables';
  if (!textArray(e.reasons)) return 'reasons';
  if (!intArray(e.policy_ids)) return 'policy_ids';
  if (e.target !== null && (typeof e.target?.type !== 'string' || typeof e.target?.id !== 'string')) return 'target';
  if (e.changes !== null && (typeof e.changes !== 'object' || !('before' in e.changes) || !('after' in e.changes))) return 'changes';
  return null;
}

/**
 * Checks an entry before it is accepted: a malformed entry would be refused by the table's
 * constraints later and block its whole batch, so it is a caller bug reported here (TypeError).
 */
export function assertValidEntry(e: AuditEntry): void {
  if (typeof e !== 'object' || e === null) throw new TypeError('audit entry must be an object');
  const field = invalidField(e);
  if (field !== null) throw new TypeError(`audit entry ${String(e.id)}: invalid ${field}`);
}

// ---------------------------------------------------------------------------------------------
// Characters PostgreSQL cannot store

/** U+FFFD, what PostgreSQL itself substitutes for characters it cannot convert. */
const REPLACEMENT = '\uFFFD';
/** Nesting kept when copying target/changes values; deeper values are stored as their JSON text. */
const STORABLE_DEPTH = 32;

function storableString(s: string): string {
  const wellFormed = s.isWellFormed() ? s : s.toWellFormed();
  return wellFormed.includes('\0') ? wellFormed.replaceAll('\0', REPLACEMENT) : wellFormed;
}

function storableValue(v: unknown, depth: number): unknown {
  if (typeof v === 'string') return storableString(v);
  if (v === null || typeof v !== 'object') return v;
  if (depth >= STORABLE_DEPTH) return storableString(JSON.stringify(v) ?? 'null');
  if (Array.isArray(v)) return v.map((x) => storableValue(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[storableString(k)] = storableValue(x, depth + 1);
  return out;
}

/**
 * The entry with every string, in every field and nested value, storable by PostgreSQL: lone surrogates and NUL,
 * which `text` and `jsonb` refuse, become U+FFFD. Without this, one request whose SQL, path or admin change carried
 * such a character would fail its whole batch on every attempt and block the spool behind it. Only batches that
 * were seen to need it pay for the copy (audit/insert.ts).
 */
export function storableEntry(e: AuditEntry): AuditEntry {
  return storableValue(e, 0) as AuditEntry;
}

/** The escapes JSON.stringify gives a NUL (`\u0000`) or a lone surrogate (`\ud800`–`\udfff`). */
const UNSTORABLE_JSON_ESCAPE = /\\u(?:0000|d[89a-f])/i;

/** JSON text holding the escape of a NUL or a lone surrogate (an escaped backslash before `u` matches too: harmless). */
export function hasUnstorableEscape(json: string): boolean {
  return UNSTORABLE_JSON_ESCAPE.test(json);
}

/**
 * JSON text PostgreSQL accepts as json/jsonb: JSON.stringify, serialized again with NUL and lone surrogates replaced
 * only when its text shows their escapes (an escaped backslash before `u` matches too; re-serializing a clean value
 * changes nothing).
 */
export function storableJson(value: unknown): string | undefined {
  const json = JSON.stringify(value);
  return json !== undefined && UNSTORABLE_JSON_ESCAPE.test(json) ? JSON.stringify(storableValue(value, 0)) : json;
}

/**
 * storableJson with object keys sorted at every level (safe-stable-stringify): the one text a jsonb value has whatever
 * order its keys were written or read back in, so a row's canonical text (copy-text.ts) survives the round trip.
 */
export function canonicalJson(value: unknown): string | undefined {
  const json = stableStringify(value);
  return json !== undefined && UNSTORABLE_JSON_ESCAPE.test(json) ? stableStringify(storableValue(value, 0)) : json;
}

// ---------------------------------------------------------------------------------------------
// Secret masking for admin before/after

/** Key names whose values are credentials (matched on the lower-cased key). */
const SECRET_KEY_RE = /(pass(word|wd|phrase)?|secret|token|api_?key|private_?key|auth_header|authorization|cookie|pepper|credential|signing_key|dsn)$/;
/** Values that are a whole URL: their userinfo password and credential query parameters are masked as in the printed config. */
const URL_RE = /^[a-z][a-z0-9+.-]*:\/\//i;

function isSecretKey(key: string): boolean {
  const k = key.toLowerCase();
  // A secret reference (env:NAME, file:/path) names where a secret lives, not the secret: safe to show.
  if (k.endsWith('_ref') || k.endsWith('_mode')) return false;
  return SECRET_KEY_RE.test(k);
}

function maskValue(value: unknown): unknown {
  if (value === null || value === undefined || value === '') return value;
  return MASK;
}

/**
 * Deep copy of an admin before/after value with credentials masked: secret-looking keys
 * (password, token, secret, api_key, connection_config.password …) become `****` (absent and
 * empty values stay as they are, so "was a password set" is still visible), `*_ref` keys are kept,
 * and passwords embedded in URLs are masked wherever they appear.
 */
export function sanitizeChanges(value: unknown, depth = 0): unknown {
  if (depth > 32) return MASK;
  if (typeof value === 'string') return URL_RE.test(value) ? maskUrlCredentials(value) : value;
  if (Array.isArray(value)) return value.map((v) => sanitizeChanges(v, depth + 1));
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = isSecretKey(k) ? maskValue(v) : sanitizeChanges(v, depth + 1);
    return out;
  }
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'function' || typeof value === 'symbol') return undefined;
  return value;
}

/** Builds the admin `changes` field from raw before/after records. */
export function auditChanges(before: unknown, after: unknown): AuditChanges {
  return { before: sanitizeChanges(before ?? null), after: sanitizeChanges(after ?? null) };
}
