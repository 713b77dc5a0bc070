// Typed control-store errors and the one place where pg / PGlite errors are translated into them.

/** The control store cannot be reached or refused the connection; retrying later may help. */
export class StoreUnavailableError extends Error {
  readonly code = 'store_unavailable' as const;
  /** A short machine-readable reason: refused, timeout, auth_failed, unknown_database, tls, terminated, closed, locked, io. */
  readonly reason: string;
  constructor(message: string, reason: string) {
    super(message);
    this.name = 'StoreUnavailableError';
    this.reason = reason;
  }
}

/** A unique constraint was violated; `field` names the column(s), never the offending value. */
export class ConflictError extends Error {
  readonly code = 'conflict' as const;
  readonly field: string;
  readonly resource: string;
  constructor(resource: string, field: string) {
    super(`${resource} with this ${field} already exists`);
    this.name = 'ConflictError';
    this.resource = resource;
    this.field = field;
  }
}

/** A foreign key points at a row that does not exist (e.g. a grant for an unknown role). */
export class InvalidReferenceError extends Error {
  readonly code = 'invalid_reference' as const;
  readonly field: string;
  readonly resource: string;
  constructor(resource: string, field: string) {
    super(`${resource}: ${field} refers to a record that does not exist`);
    this.name = 'InvalidReferenceError';
    this.resource = resource;
    this.field = field;
  }
}

/**
 * A document search query that can find nothing by itself (docs/decisions/0026-document-search.md §4): no words left
 * after parsing (only stop words or punctuation), or only excluded words (`-word`), which would read every page.
 */
export class SearchQueryError extends Error {
  readonly code = 'search_query' as const;
  readonly reason: 'no_words' | 'only_excluded';
  constructor(reason: 'no_words' | 'only_excluded') {
    super(
      reason === 'no_words'
        ? 'The query has no words to search for (only stop words or punctuation).'
        : 'The query only excludes words; name at least one word to find.',
    );
    this.name = 'SearchQueryError';
    this.reason = reason;
  }
}

/** A migration failed (or the migration lock could not be taken); names the migration. */
export class MigrationError extends Error {
  readonly code = 'migration_failed' as const;
  readonly migration: string | null;
  constructor(message: string, migration: string | null, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MigrationError';
    this.migration = migration;
  }
}

interface PgLikeError {
  code?: unknown;
  constraint?: unknown;
  detail?: unknown;
  message?: unknown;
  errors?: unknown;
}

function asPgLike(error: unknown): PgLikeError | null {
  return typeof error === 'object' && error !== null ? (error as PgLikeError) : null;
}

/**
 * Columns named in a constraint-violation detail ("Key (a, b)=(…) already exists.").
 * Only the column list is read: the value part may hold user data or secrets.
 */
function columnsFromDetail(detail: unknown): string | null {
  if (typeof detail !== 'string') return null;
  const match = /^Key \(([^)]+)\)=/.exec(detail);
  return match?.[1] ?? null;
}

/**
 * Constraint → field names for the constraints of migrations/. Unknown constraints fall back to
 * the column list of the detail, then to the constraint name itself.
 */
const CONSTRAINT_FIELDS: Readonly<Record<string, string>> = {
  admin_users_username_key: 'username',
  admin_users_oidc_subject_key: 'oidc_subject',
  admin_users_oidc_issuer_subject_key: 'subject',
  admin_tokens_token_hash_key: 'token_hash',
  admin_tokens_admin_user_id_fkey: 'admin_user_id',
  identities_name_key: 'name',
  identities_api_key_digest_key: 'api_key',
  identities_api_key_legacy_digest_key: 'api_key',
  identities_pg_username_key: 'pg_username',
  identities_oidc_subject_key: 'oidc_subject',
  identities_oidc_issuer_subject_key: 'subject',
  data_sources_source_id_key: 'source_id',
  source_roles_source_id_role_key_key: 'role_key',
  source_roles_source_id_fkey: 'source_id',
  source_role_grants_identity_id_role_id_key: 'role_id',
  source_role_grants_identity_id_fkey: 'identity_id',
  source_role_grants_source_id_fkey: 'source_id',
  source_role_grants_role_fkey: 'role_id',
  source_role_grants_granted_by_fkey: 'granted_by',
  policies_name_key: 'name',
  approvals_identity_id_fkey: 'identity_id',
  approvals_source_id_fkey: 'source_id',
  ingestion_jobs_source_id_fkey: 'source_id',
  ingestion_jobs_source_id_file_path_key: 'file_path',
};

function fieldOf(pg: PgLikeError): string {
  const constraint = typeof pg.constraint === 'string' ? pg.constraint : '';
  return CONSTRAINT_FIELDS[constraint] ?? columnsFromDetail(pg.detail) ?? (constraint || 'value');
}

/**
 * Repository error boundary: unique violations become ConflictError, foreign-key violations
 * InvalidReferenceError, lost connections StoreUnavailableError; anything else is returned as is.
 */
export function translateStoreError(error: unknown, resource: string): unknown {
  const pg = asPgLike(error);
  if (!pg) return error;
  if (pg.code === '23505') return new ConflictError(resource, fieldOf(pg));
  if (pg.code === '23503') return new InvalidReferenceError(resource, fieldOf(pg));
  return translateConnectionError(error, null) ?? error;
}

/** SQLSTATE classes and node error codes that mean "the store is not there", not "the query is wrong". */
const UNAVAILABLE_SQLSTATES: Readonly<Record<string, string>> = {
  '28P01': 'auth_failed',
  '28000': 'auth_failed',
  '3D000': 'unknown_database',
  '57P01': 'terminated',
  '57P02': 'terminated',
  '57P03': 'starting',
  '53300': 'too_many_connections',
};
const UNAVAILABLE_ERRNOS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'refused',
  ECONNRESET: 'terminated',
  ETIMEDOUT: 'timeout',
  EHOSTUNREACH: 'unreachable',
  ENETUNREACH: 'unreachable',
  ENOTFOUND: 'unknown_host',
  EAI_AGAIN: 'unknown_host',
  EPIPE: 'terminated',
};

function classify(error: unknown): string | null {
  const pg = asPgLike(error);
  if (!pg) return null;
  if (typeof pg.code === 'string') {
    if (pg.code.startsWith('08')) return 'connection';
    const bySqlstate = UNAVAILABLE_SQLSTATES[pg.code];
    if (bySqlstate) return bySqlstate;
    const byErrno = UNAVAILABLE_ERRNOS[pg.code];
    if (byErrno) return byErrno;
    if (pg.code.startsWith('ERR_TLS') || pg.code.includes('CERT') || pg.code === 'DEPTH_ZERO_SELF_SIGNED_CERT') return 'tls';
    // Any other error the server reported (it has a severity) is about the statement: its message may quote the
    // statement's values ("certificate", "SSL"), which must not read as a connection failure below.
    if ('severity' in pg) return null;
  }
  // Node reports a refused dual-stack connect as an AggregateError of per-address errors.
  if (Array.isArray(pg.errors)) {
    for (const inner of pg.errors) {
      const reason = classify(inner);
      if (reason) return reason;
    }
  }
  const message = typeof pg.message === 'string' ? pg.message : '';
  if (/timeout expired|Connection terminated due to connection timeout/i.test(message)) return 'timeout';
  if (/Connection terminated|connection is closed|Client has encountered a connection error/i.test(message)) return 'terminated';
  if (/does not support SSL|SSL|certificate|self[- ]signed/i.test(message)) return 'tls';
  if (/pool.*ended|Cannot use a pool after calling end/i.test(message)) return 'closed';
  return null;
}

const REASON_TEXT: Readonly<Record<string, string>> = {
  refused: 'connection refused',
  timeout: 'connection timed out',
  auth_failed: 'authentication failed',
  unknown_database: 'database does not exist',
  terminated: 'connection terminated',
  starting: 'database is starting up',
  too_many_connections: 'too many connections',
  unreachable: 'host unreachable',
  unknown_host: 'host name could not be resolved',
  tls: 'TLS negotiation or certificate verification failed',
  closed: 'store has been closed',
  connection: 'connection failure',
};

/**
 * Translates a connection-class failure into StoreUnavailableError, or returns null when the
 * error is not about the connection. The message is built from fixed text and the safe target
 * description only — never from the driver's message, which may echo connection parameters.
 */
export function translateConnectionError(error: unknown, target: string | null): StoreUnavailableError | null {
  if (error instanceof StoreUnavailableError) return error;
  const reason = classify(error);
  if (!reason) return null;
  const where = target ? ` (${target})` : '';
  return new StoreUnavailableError(`control store unavailable${where}: ${REASON_TEXT[reason] ?? reason}`, reason);
}
