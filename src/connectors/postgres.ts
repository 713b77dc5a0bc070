// The PostgreSQL connector: connection_config schema and a real connection test (connect + SELECT 1) with sanitized errors.
import pg from 'pg';
import { z } from 'zod';
import type { Connector, ConnectionTestContext, ConnectionTestResult, CredentialField } from './types.js';
import { isValidSecretRef, resolveCredential } from './credentials.js';

export const SSL_MODES = ['disable', 'prefer', 'require', 'verify-full'] as const;

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
    connect_timeout_ms: z.number().int().min(100).max(60_000).default(5_000),
    statement_timeout_ms: z.number().int().min(100).max(3_600_000).default(30_000),
    pool_max: z.number().int().min(1).max(100).default(5),
  })
  .refine((c) => !(c.password !== undefined && c.password_ref !== undefined), { message: 'give password or password_ref, not both', path: ['password_ref'] });

export type PostgresConfig = z.output<typeof postgresConfigSchema>;

/** Fixed, safe text per failure class: the driver's message may carry host names, users or parameters. */
export function sanitizePgError(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown; errors?: unknown };
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === '28P01' || code === '28000') return 'authentication failed';
  if (code === '3D000') return 'database does not exist';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable';
  if (code === 'ETIMEDOUT' || /timeout|timed out/i.test(message)) return 'timed out';
  if (code === 'ECONNRESET' || /terminated/i.test(message)) return 'connection closed by the server';
  if (code === '53300') return 'too many connections';
  if (code.startsWith('ERR_TLS') || code.includes('CERT') || /SSL|TLS|certificate/i.test(message)) return 'TLS negotiation failed';
  if (Array.isArray(e?.errors) && e.errors.length > 0) return sanitizePgError(e.errors[0]);
  return 'connection failed';
}

function sslOption(mode: PostgresConfig['ssl_mode'], hostName: string): pg.ClientConfig['ssl'] {
  if (mode === 'disable') return false;
  if (mode === 'verify-full') return { rejectUnauthorized: true, servername: hostName };
  return { rejectUnauthorized: false };
}

async function connectOnce(config: PostgresConfig, password: string | null, ssl: pg.ClientConfig['ssl'], timeoutMs: number): Promise<void> {
  const client = new pg.Client({
    host: config.host,
    port: config.port,
    database: config.database,
    user: config.user,
    ...(password !== null ? { password } : {}),
    ssl,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    statement_timeout: timeoutMs,
    application_name: 'gatehouse-connection-test',
  });
  // A connection error after connect() settled would otherwise be an unhandled 'error' event.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

function isNoTlsServer(err: unknown): boolean {
  return /does not support SSL/i.test(String((err as { message?: unknown })?.message ?? ''));
}

export async function testPostgres(raw: Record<string, unknown>, ctx: ConnectionTestContext): Promise<ConnectionTestResult> {
  const started = performance.now();
  const elapsed = () => Math.round((performance.now() - started) * 100) / 100;
  const config = postgresConfigSchema.parse(raw);
  const cred = resolveCredential(config, PASSWORD, ctx.resolveSecret);
  if (!cred.ok) return { ok: false, latency_ms: elapsed(), error: 'credential reference could not be resolved' };
  const timeoutMs = Math.min(ctx.timeoutMs, config.connect_timeout_ms);
  try {
    try {
      await connectOnce(config, cred.value, sslOption(config.ssl_mode, config.host), timeoutMs);
    } catch (err) {
      if (config.ssl_mode !== 'prefer' || !isNoTlsServer(err)) throw err;
      await connectOnce(config, cred.value, false, Math.max(100, timeoutMs - (performance.now() - started)));
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
