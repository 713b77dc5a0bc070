// The PostgreSQL connector: connection_config schema and a real connection test (connect + SELECT 1) with sanitized errors.
import { z } from 'zod';
import { parsedConfigReader } from './parsed-config.js';
import type { Connector, ConnectionTestContext, ConnectionTestResult, CredentialField } from './types.js';
import { isValidSecretRef, resolveCredential } from './credentials.js';
import { connectPostgres } from './postgres-connect.js';
import { EGRESS_DENIED_TEXT, UpstreamError } from '../egress/errors.js';

/** libpq's sslmode values and meanings (docs/admin-api.md); `allow` is not offered: it prefers plain text. */
export const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;

const PASSWORD: CredentialField = { literal: 'password', ref: 'password_ref' };
const secretRef = z.string().max(4096).refine(isValidSecretRef, 'must be a secret reference (env:NAME or file:/absolute/path)');
/** Host names and addresses only: no URL, no userinfo, nothing a connection string parser would reinterpret. */
const host = z.string().min(1).max(253).regex(/^[A-Za-z0-9._:-]+$/, 'must be a host name or IP address');
const identifier = z.string().min(1).max(63).regex(/^[^\0]+$/, 'must not contain NUL bytes');

export const postgresConfigSchema = z
  .strictObject({
    host,
    port: z.number().int().min(1).max(65_535).default(5432),
    database: identifier,
    user: identifier,
    password: z.string().min(1).max(1024).optional(),
    password_ref: secretRef.optional(),
    /** `prefer` tries TLS and falls back to plain only when the server has no TLS at all (libpq semantics). */
    ssl_mode: z.enum(SSL_MODES).default('prefer'),
    /** CA bundle (PEM) that verifies the server certificate under verify-ca and verify-full; unset, the system roots do. */
    ssl_ca_file: z.string().min(2).max(4096).startsWith('/', 'must be an absolute path').optional(),
    connect_timeout_ms: z.number().int().min(100).max(60_000).default(5_000),
    statement_timeout_ms: z.number().int().min(100).max(3_600_000).default(30_000),
    // Sized for an ordinary client pool (node-postgres's Pool holds 10, most ORMs 10-20) per source, well under
    // PostgreSQL's default max_connections of 100: docs/decisions/0007-upstream-pool-size.md.
    pool_max: z.number().int().min(1).max(100).default(20),
    /** Risk by effect (docs/approvals.md): a write measured above these thresholds is high risk and waits for approval under `by_risk`. */
    write_risk: z
      .strictObject({
        max_rows: z.number().int().min(0).max(1_000_000_000_000).default(1_000),
        max_table_share: z.number().min(0).max(1).default(0.5),
        /** The share rule applies to writes of more than this many rows of a table. */
        share_min_rows: z.number().int().min(0).max(1_000_000_000_000).default(10),
        /** Bound of the planner's estimate (EXPLAIN) before a write runs; past it the write is unmeasured and queues. */
        estimate_timeout_ms: z.number().int().min(100).max(60_000).default(2_000),
        /** Whether a queued write gets its exact count from a rolled-back run for the approver. */
        preview_exact_count: z.boolean().default(true),
        /** Above this estimate the exact count is not run: a rolled-back run still does all the work and leaves dead row versions. */
        preview_max_rows: z.number().int().min(0).max(1_000_000_000_000).default(100_000),
        /** Bound of that run (statement_timeout inside the rolled-back transaction). */
        preview_timeout_ms: z.number().int().min(100).max(60_000).default(2_000),
      })
      .prefault({}),
    /**
     * `managed`: sessions run as NOLOGIN roles the gateway creates and keeps equal to its rules (docs/least-privilege.md);
     * absent or `configured`: as the configured user (and `mapped_pg_role`).
     */
    privileges: z.enum(['configured', 'managed']).optional(),
    /** The login that creates the managed roles and grants their privileges: CREATEROLE and ownership (or grant option) of the tables, never a superuser requirement. */
    privilege_admin: z.strictObject({ user: identifier, password_ref: secretRef.optional() }).optional(),
    /** Managed role names start with it; unset: `gh_` and a hash of the source id (role names are global to the server). */
    managed_role_prefix: z.string().min(2).max(30).regex(/^[a-z_][a-z0-9_]*_$/, 'must be lower-case letters, digits and _ and end with _').optional(),
    /**
     * With managed privileges: columns a policy redacts are read through masking views in a schema per managed role
     * (the privilege admin then also needs CREATE on the database), and the roles hold no privilege on those base
     * columns (docs/least-privilege.md "Masked reads").
     */
    masked_reads: z.boolean().optional(),
  })
  .refine((c) => !(c.password !== undefined && c.password_ref !== undefined), { message: 'give password or password_ref, not both', path: ['password_ref'] })
  .refine((c) => c.privileges !== 'managed' || c.privilege_admin !== undefined, { message: 'managed privileges need privilege_admin (user and password_ref)', path: ['privilege_admin'] })
  .refine((c) => c.masked_reads !== true || c.privileges === 'managed', { message: 'masked reads need privileges: managed', path: ['masked_reads'] });

export type PostgresConfig = z.output<typeof postgresConfigSchema>;

/**
 * A source's PostgreSQL configuration, or null when it is invalid: parsed once per configuration object, frozen and
 * shared by sessions, write estimates, pools and the wire listener (parsed-config.ts).
 */
export const postgresConfigOf = parsedConfigReader(postgresConfigSchema);

/** Node's verification failures of a chain it cannot anchor in the trusted roots. */
const UNTRUSTED_CERT_CODES: ReadonlySet<string> = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

/** Fixed, safe text per failure class: the driver's message may carry host names, users or parameters. */
export function sanitizePgError(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown; errors?: unknown };
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (code === 'egress_denied') return EGRESS_DENIED_TEXT;
  if (err instanceof UpstreamError) return err.reason;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === '28P01' || code === '28000') return 'authentication failed';
  if (code === '3D000') return 'database does not exist';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable';
  if (code === 'ETIMEDOUT' || /timeout|timed out/i.test(message)) return 'timed out';
  if (code === 'ECONNRESET' || /terminated/i.test(message)) return 'connection closed by the server';
  if (code === '53300') return 'too many connections';
  if (code === 'ERR_TLS_CA_FILE') return message; // SourceTlsConfigError: names the setting, never the path or content
  if (/does not support SSL/i.test(message)) return 'the server does not offer TLS';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return 'TLS certificate does not name the host';
  if (UNTRUSTED_CERT_CODES.has(code)) return 'TLS certificate not trusted';
  if (code.startsWith('ERR_TLS') || code.includes('CERT') || /SSL|TLS|certificate/i.test(message)) return 'TLS negotiation failed';
  if (Array.isArray(e?.errors) && e.errors.length > 0) return sanitizePgError(e.errors[0]);
  return 'connection failed';
}

export async function testPostgres(raw: Record<string, unknown>, ctx: ConnectionTestContext): Promise<ConnectionTestResult> {
  const started = performance.now();
  const elapsed = () => Math.round((performance.now() - started) * 100) / 100;
  const config = postgresConfigSchema.parse(raw);
  const cred = resolveCredential(config, PASSWORD, ctx.resolveSecret);
  if (!cred.ok) return { ok: false, latency_ms: elapsed(), error: 'credential reference could not be resolved' };
  const timeoutMs = Math.min(ctx.timeoutMs, config.connect_timeout_ms);
  // The egress rules first, as live traffic applies them (postgres-exec.ts): the test connects to the checked address.
  let address: string;
  try {
    ({ address } = await ctx.checkTarget(config.host));
  } catch (err) {
    return { ok: false, latency_ms: elapsed(), error: sanitizePgError(err) };
  }
  try {
    // The same routine as live traffic (postgres-connect.ts): a test that passes means the wire listener, the MCP
    // query tool and approvals connect the same way.
    const client = await connectPostgres({
      config,
      password: cred.value,
      address,
      timeoutMs,
      applicationName: 'gatehouse-connection-test',
      clientOptions: { query_timeout: timeoutMs, statement_timeout: timeoutMs },
    });
    try {
      await client.query('SELECT 1');
    } finally {
      await client.end().catch(() => undefined);
    }
    return { ok: true, latency_ms: elapsed(), error: null };
  } catch (err) {
    return { ok: false, latency_ms: elapsed(), error: sanitizePgError(err) };
  }
}

export const postgresConnector: Connector = {
  key: 'postgres',
  name: 'PostgreSQL',
  description: 'A PostgreSQL database reached through the SQL front doors (wire listener and the MCP query tool).',
  source_type: 'postgres',
  capabilities: ['sql'],
  active: true,
  configSchema: postgresConfigSchema,
  credentials: [PASSWORD],
  test: testPostgres,
};
