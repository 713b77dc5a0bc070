// TLS for the HTTP listeners (gateway.tls, admin.tls; spec §9): server options read from the configured files, optional client certificates (mTLS), and reload on SIGHUP without dropping connections (docs/tls.md).
import { readFileSync } from 'node:fs';
import type { SecureContextOptions, Server as TlsServer } from 'node:tls';
import { createSecureContext } from 'node:tls';

export interface ListenerTlsConfig {
  readonly cert_file: string | null;
  readonly key_file: string | null;
  readonly client_ca_file: string | null;
}

/** A TLS file that cannot be read or used, named by its configuration key (never its content). */
export class TlsConfigError extends Error {
  readonly code = 'tls_config';
}

/** What a listener's TLS server needs: the secure context's material, and whether clients must present a certificate. */
export interface ListenerTls {
  /** `<section>.tls`, for messages. */
  readonly key: string;
  readonly context: SecureContextOptions;
  /** mTLS: a client CA is configured, so a certificate it signed is required of every client. */
  readonly requestCert: boolean;
}

function readKeyFile(key: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new TlsConfigError(`${key}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`);
  }
}

/** Reads the files of one listener's section; null when TLS is off (no certificate configured). Throws TlsConfigError naming the key. */
export function readListenerTls(key: string, cfg: ListenerTlsConfig): ListenerTls | null {
  if (cfg.cert_file === null || cfg.key_file === null) return null;
  const context: SecureContextOptions = {
    cert: readKeyFile(`${key}.cert_file`, cfg.cert_file),
    key: readKeyFile(`${key}.key_file`, cfg.key_file),
    ...(cfg.client_ca_file !== null ? { ca: readKeyFile(`${key}.client_ca_file`, cfg.client_ca_file) } : {}),
  };
  try {
    // Fails here, at start or reload, on a key that does not match its certificate or a malformed PEM.
    createSecureContext(context);
  } catch (err) {
    throw new TlsConfigError(`${key}: the certificate, key or client CA cannot be used (${(err as { code?: string }).code ?? (err as Error).message})`);
  }
  return { key, context, requestCert: cfg.client_ca_file !== null };
}

/** Options for `https.createServer` (through Fastify's `https`): TLS 1.2 at least; with a client CA, no certificate, no connection. */
export function httpsServerOptions(tls: ListenerTls): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean; minVersion: 'TLSv1.2' } {
  return { ...tls.context, minVersion: 'TLSv1.2', requestCert: tls.requestCert, rejectUnauthorized: tls.requestCert };
}

/**
 * Re-reads the files and swaps the server's secure context: handshakes from now on use the new certificate (and
 * client CA); connections already open keep theirs and are not dropped. A file that cannot be used leaves the old
 * context in force and throws TlsConfigError. Switching mTLS on or off needs a restart (the server's requestCert is fixed).
 */
export function reloadListenerTls(server: TlsServer, current: ListenerTls, cfg: ListenerTlsConfig): ListenerTls {
  const next = readListenerTls(current.key, cfg);
  if (next === null) throw new TlsConfigError(`${current.key}: TLS cannot be switched off by a reload; restart instead`);
  if (next.requestCert !== current.requestCert) throw new TlsConfigError(`${current.key}.client_ca_file: client certificates cannot be switched on or off by a reload; restart instead`);
  server.setSecureContext({ ...next.context, minVersion: 'TLSv1.2' });
  return next;
}
