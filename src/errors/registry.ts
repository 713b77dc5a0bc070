// The error registry: every deliberate error code with its HTTP status, SQLSTATE and MCP rendering; front doors map through this table only (docs/errors.md mirrors it).

export interface ErrorSpec {
  /** HTTP status on the gateway and admin API. */
  http: number;
  /** SQLSTATE on the PostgreSQL wire listener (real codes; DESIGN §6). */
  sqlstate: string;
  /** Whether an MCP tool call reports it as a tool error result (true) or a JSON-RPC error (false). */
  mcpToolError: boolean;
  /** Safe default message shown to clients. */
  message: string;
}

export const errorRegistry = {
  invalid_request: { http: 400, sqlstate: '08P01', mcpToolError: true, message: 'The request is invalid.' },
  invalid_path: { http: 400, sqlstate: '22023', mcpToolError: true, message: 'The request path is not allowed.' },
  sql_parse_error: { http: 400, sqlstate: '42601', mcpToolError: true, message: 'The SQL statement could not be parsed.' },
  unauthenticated: { http: 401, sqlstate: '28P01', mcpToolError: false, message: 'Missing or invalid credentials.' },
  forbidden: { http: 403, sqlstate: '42501', mcpToolError: true, message: 'Access denied.' },
  csrf_failed: { http: 403, sqlstate: '42501', mcpToolError: false, message: 'Missing or invalid CSRF token.' },
  password_change_required: { http: 403, sqlstate: '42501', mcpToolError: false, message: 'The initial password must be changed before anything else.' },
  egress_denied: { http: 403, sqlstate: '42501', mcpToolError: true, message: 'The upstream target is not allowed.' },
  not_found: { http: 404, sqlstate: '42704', mcpToolError: true, message: 'Not found.' },
  unknown_source: { http: 404, sqlstate: '3D000', mcpToolError: true, message: 'Unknown data source.' },
  conflict: { http: 409, sqlstate: '23505', mcpToolError: true, message: 'The resource conflicts with an existing one.' },
  invalid_reference: { http: 422, sqlstate: '23503', mcpToolError: true, message: 'The input refers to something that does not exist.' },
  not_actionable: { http: 409, sqlstate: '55000', mcpToolError: true, message: 'The resource is no longer in a state that allows this action.' },
  payload_too_large: { http: 413, sqlstate: '54000', mcpToolError: true, message: 'The request or response exceeds the configured size limit.' },
  validation_failed: { http: 422, sqlstate: '22023', mcpToolError: true, message: 'The input is invalid.' },
  rate_limited: { http: 429, sqlstate: '53400', mcpToolError: true, message: 'Rate limit exceeded.' },
  internal: { http: 500, sqlstate: 'XX000', mcpToolError: false, message: 'Internal error.' },
  /** The source database refused the statement: governance allowed it, so it is audited as allow; the wire passes the upstream SQLSTATE through. */
  upstream_sql_error: { http: 400, sqlstate: 'XX000', mcpToolError: true, message: 'The statement failed on the source database.' },
  upstream_failed: { http: 502, sqlstate: '08006', mcpToolError: true, message: 'The upstream request failed.' },
  /** The upstream answered, but with a body the personal-data scanner cannot read while redaction is asked for (docs/proxy.md "Bodies"). */
  unscannable_response: { http: 502, sqlstate: '08006', mcpToolError: true, message: 'The upstream response cannot be scanned for personal data, so it is not returned.' },
  unavailable: { http: 503, sqlstate: '57P03', mcpToolError: false, message: 'A required dependency is unavailable.' },
  store_unavailable: { http: 503, sqlstate: '57P03', mcpToolError: false, message: 'The control store is unavailable.' },
  audit_unavailable: { http: 503, sqlstate: '57P03', mcpToolError: false, message: 'The audit log cannot record this request.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof errorRegistry;

/**
 * A deliberate, client-safe error. `message` is shown to clients; `cause` stays in logs.
 */
export class GatehouseError extends Error {
  readonly code: ErrorCode;
  readonly retryAfterSeconds: number | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message?: string, opts: { cause?: unknown; retryAfterSeconds?: number; details?: Record<string, unknown> } = {}) {
    super(message ?? errorRegistry[code].message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'GatehouseError';
    this.code = code;
    this.retryAfterSeconds = opts.retryAfterSeconds;
    this.details = opts.details;
  }

  get spec(): ErrorSpec {
    return errorRegistry[this.code];
  }
}

export function isGatehouseError(err: unknown): err is GatehouseError {
  return err instanceof GatehouseError;
}
