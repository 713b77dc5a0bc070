// The one connection routine for PostgreSQL sources: libpq's ssl_mode meanings (disable, prefer, require, verify-ca, verify-full), used by the connection test and by every execution path.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import pg from 'pg';
import type { PostgresConfig } from './postgres.js';

export interface PostgresConnectTarget {
  readonly config: PostgresConfig;
  /** The resolved credential (null: none, e.g. trust authentication). */
  readonly password: string | null;
  /** Where to connect: the egress-checked address for live traffic, or `config.host` itself. The certificate is always checked against `config.host`. */
  readonly address: string;
  /** Bound of the whole routine, the plain retry of `prefer` included. */
  readonly timeoutMs: number;
  readonly applicationName: string;
  /** Client options beyond the connection itself (statement_timeout, query_timeout, startup `options`). */
  readonly clientOptions?: Omit<pg.ClientConfig, 'host' | 'port' | 'database' | 'user' | 'password' | 'ssl' | 'connectionTimeoutMillis' | 'application_name'>;
  /** Called with each client before it connects (e.g. to listen for ParameterStatus messages). */
  readonly beforeConnect?: (client: pg.Client) => void;
}

/** A source's CA file could not be used: it is named by its setting, never by its content. */
export class SourceTlsConfigError extends Error {
  readonly code = 'ERR_TLS_CA_FILE';
  constructor(reason: string) {
    super(`connection_config.ssl_ca_file ${reason}`);
  }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----/;

function caOf(config: PostgresConfig): string | undefined {
  if (config.ssl_ca_file === undefined) return undefined;
  let pem: string;
  try {
    pem = readFileSync(config.ssl_ca_file, 'utf8');
  } catch {
    throw new SourceTlsConfigError('cannot be read');
  }
  if (!PEM_CERTIFICATE.test(pem)) throw new SourceTlsConfigError('holds no PEM certificate');
  return pem;
}

/**
 * TLS options for one mode, libpq's meanings: `prefer` and `require` encrypt without verifying (a `prefer` server
 * without TLS is reached in plain, see connectPostgres); `verify-ca` checks the chain against ssl_ca_file (else the
 * system roots); `verify-full` also checks that the certificate names `config.host` — the name the operator
 * registered, never the address egress resolved it to.
 */
export function tlsOptionsFor(config: PostgresConfig): pg.ClientConfig['ssl'] {
  const mode = config.ssl_mode;
  if (mode === 'disable') return false;
  // SNI carries host names only (RFC 6066 §3).
  const sni = net.isIP(config.host) === 0 ? { servername: config.host } : {};
  if (mode === 'prefer' || mode === 'require') return { rejectUnauthorized: false, ...sni };
  const ca = caOf(config);
  const options: tls.ConnectionOptions = { rejectUnauthorized: true, ...sni, ...(ca !== undefined ? { ca } : {}) };
  options.checkServerIdentity = mode === 'verify-ca' ? () => undefined : (_host, cert) => tls.checkServerIdentity(config.host, cert);
  return options;
}

/** The server answered the SSLRequest with "N": it has no TLS at all (the only case `prefer` goes plain). */
export function isNoTlsServer(err: unknown): boolean {
  return /does not support SSL/i.test(String((err as { message?: unknown })?.message ?? ''));
}

async function connectWith(t: PostgresConnectTarget, ssl: pg.ClientConfig['ssl'], timeoutMs: number): Promise<pg.Client> {
  const { config } = t;
  const client = new pg.Client({
    ...t.clientOptions,
    host: t.address,
    port: config.port,
    database: config.database,
    user: config.user,
    ...(t.password !== null ? { password: t.password } : {}),
    ssl,
    connectionTimeoutMillis: timeoutMs,
    application_name: t.applicationName,
  });
  // A connection error after connect() settled would otherwise be an unhandled 'error' event.
  client.on('error', () => undefined);
  t.beforeConnect?.(client);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  return client;
}

/**
 * A connected client for a source, TLS as its ssl_mode says. `prefer` tries TLS first and, only when the server
 * has no TLS at all, connects again in plain; a TLS failure of any other kind (a handshake or certificate error)
 * is never downgraded. Errors are the driver's: callers report them through sanitizePgError.
 */
export async function connectPostgres(t: PostgresConnectTarget): Promise<pg.Client> {
  const started = performance.now();
  const ssl = tlsOptionsFor(t.config);
  try {
    return await connectWith(t, ssl, t.timeoutMs);
  } catch (err) {
    if (t.config.ssl_mode !== 'prefer' || !isNoTlsServer(err)) throw err;
    return connectWith(t, false, Math.max(100, Math.round(t.timeoutMs - (performance.now() - started))));
  }
}
