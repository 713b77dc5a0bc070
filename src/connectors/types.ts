// The connector contract: what a source type declares (config schema, credential fields, capabilities) and how it tests a connection.
import type { z } from 'zod';
import type { Dispatcher } from 'undici';
import type { SecretRefResult } from '../config/secrets.js';

export type ConnectorCapability = 'sql' | 'http' | 'documents';

/** A credential given either literally (`password`) or as a secret reference (`password_ref`); never both. */
export interface CredentialField {
  literal: string;
  ref: string;
}

/** Resolves `env:NAME` / `file:/path` at use time (never at registration), so rotating a secret needs no admin change. */
export type SecretResolver = (ref: string) => SecretRefResult;

export interface ConnectionTestContext {
  resolveSecret: SecretResolver;
  /**
   * The SSRF-safe egress dispatcher for this source (HTTP connectors): the test honours the same address rules
   * as live traffic, including gateway.egress.allow_private_sources for the source_id being tested.
   */
  dispatcher?: Dispatcher;
  /**
   * Resolves and checks a host under the egress rules for the source being tested (src/egress/, spec §4 rule 5), as
   * live traffic does: the address to connect to, or a throw when the rules refuse it. Connectors that open their own
   * sockets (PostgreSQL) must call it before connecting; a test that passes must mean live traffic may connect.
   */
  checkTarget: (hostname: string) => Promise<{ address: string }>;
  /** Overall bound of the test, connection and first answer included. */
  timeoutMs: number;
}

/** `{ok, latency_ms, error}` of spec §2; `error` is fixed, safe text — never the driver's message. */
export interface ConnectionTestResult {
  ok: boolean;
  latency_ms: number;
  error: string | null;
}

export interface Connector {
  readonly key: string;
  readonly name: string;
  readonly description: string;
  /** The source_type a source registered on this connector has. */
  readonly source_type: string;
  readonly capabilities: readonly ConnectorCapability[];
  /** Whether this build can register and serve sources on it. */
  readonly active: boolean;
  /** Validates connection_config (unknown keys rejected, defaults filled). */
  readonly configSchema: z.ZodType<Record<string, unknown>>;
  readonly credentials: readonly CredentialField[];
  test(config: Record<string, unknown>, ctx: ConnectionTestContext): Promise<ConnectionTestResult>;
}
