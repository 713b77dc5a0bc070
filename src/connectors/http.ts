// The HTTP connector: connection_config schema and a bounded connection test (one GET to the base URL, no redirects, capped body, timeout).
import { request } from 'undici';
import { z } from 'zod';
import type { Connector, ConnectionTestContext, ConnectionTestResult, CredentialField } from './types.js';
import { isValidSecretRef, resolveCredential } from './credentials.js';
import { EGRESS_DENIED_TEXT } from '../egress/errors.js';
import { baseUrlProblem } from '../governance/base-url.js';

const TOKEN: CredentialField = { literal: 'token', ref: 'token_ref' };
const secretRef = z.string().max(4096).refine(isValidSecretRef, 'must be a secret reference (env:NAME or file:/absolute/path)');
/** The test reads at most this much of the answer; it only wants to know the upstream answers. */
const TEST_BODY_CAP_BYTES = 4096;

// Refused with the reason, under connection_config.base_url (a 422 from the admin API): spellings a second URL parser would read differently.
const baseUrl = z.string().superRefine((s, ctx) => {
  const problem = baseUrlProblem(s);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: `base_url ${problem}` });
});

const indexPath = z
  .string()
  .min(1)
  .max(1024)
  .regex(/^[A-Za-z0-9._~!$&'()*+,;=:@-][A-Za-z0-9._~!$&'()*+,;=:@/-]*$/, 'must be a relative path beneath base_url')
  .refine((p) => !p.split('/').some((s) => s === '..' || s === '.' || s === ''), 'must not contain dot or empty segments');

export const httpConfigSchema = z
  .strictObject({
    base_url: baseUrl,
    /** Name of the header that carries the upstream credential. */
    auth_header: z.string().min(1).max(128).regex(/^[A-Za-z0-9-]+$/, 'must be an HTTP header name').default('Authorization'),
    /** Prefix put before the token in that header, e.g. "Bearer"; empty for a bare token. */
    auth_scheme: z.string().max(32).regex(/^[A-Za-z0-9._-]*$/, 'must be a single word').default('Bearer'),
    token: z.string().min(1).max(8192).optional(),
    token_ref: secretRef.optional(),
    timeout_ms: z.number().int().min(100).max(120_000).default(10_000),
    /**
     * A response the personal-data scanner cannot read (binary, archive, image, PDF, unknown type): `refuse` answers
     * 502 unscannable_response, `pass` returns it unscanned; either is audited. Unset: refuse whenever redaction is asked
     * for (docs/proxy.md "Bodies").
     */
    unscannable_responses: z.enum(['refuse', 'pass']).optional(),
    /** Path of the source's OpenAPI document (JSON) beneath base_url; the catalog captures its operations (docs/catalog.md). */
    /**
     * The document index a source sync reads (docs/ingestion.md "Sync"): a sitemap or a JSON listing beneath
     * base_url, or the listing operation (operationId or `GET /path`) that the source's OpenAPI document declares.
     */
    ingestion_index: z
      .discriminatedUnion('format', [
        z.strictObject({ path: indexPath, format: z.literal('sitemap') }),
        z.strictObject({ path: indexPath, format: z.literal('json') }),
        z.strictObject({ format: z.literal('openapi'), operation: z.string().min(1).max(512) }),
      ])
      .optional(),
    openapi_path: z.string().min(1).max(1024).regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, 'must be a path starting with "/"').refine((p) => !p.split('/').some((s) => s === '..' || s === '.'), 'must not contain dot segments').optional(),
  })
  .refine((c) => !(c.token !== undefined && c.token_ref !== undefined), { message: 'give token or token_ref, not both', path: ['token_ref'] })
  .refine((c) => c.ingestion_index?.format !== 'openapi' || c.openapi_path !== undefined, { message: 'an openapi ingestion_index reads the document at openapi_path: set it', path: ['ingestion_index'] });

export type HttpConfig = z.output<typeof httpConfigSchema>;

export function sanitizeHttpError(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown; cause?: unknown };
  const code = typeof e?.code === 'string' ? e.code : '';
  if (code === 'egress_denied') return EGRESS_DENIED_TEXT;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'ETIMEDOUT' || e?.name === 'AbortError' || e?.name === 'TimeoutError') return 'timed out';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'connection closed by the server';
  if (code.startsWith('ERR_TLS') || code.includes('CERT')) return 'TLS negotiation failed';
  if (e?.cause !== undefined && e.cause !== err) return sanitizeHttpError(e.cause);
  return 'request failed';
}

export async function testHttp(raw: Record<string, unknown>, ctx: ConnectionTestContext): Promise<ConnectionTestResult> {
  const started = performance.now();
  const elapsed = () => Math.round((performance.now() - started) * 100) / 100;
  const config = httpConfigSchema.parse(raw);
  const cred = resolveCredential(config, TOKEN, ctx.resolveSecret);
  if (!cred.ok) return { ok: false, latency_ms: elapsed(), error: 'credential reference could not be resolved' };
  const timeoutMs = Math.min(ctx.timeoutMs, config.timeout_ms);
  const headers: Record<string, string> = { accept: '*/*', 'user-agent': 'gatehouse-connection-test' };
  if (cred.value !== null) headers[config.auth_header.toLowerCase()] = config.auth_scheme ? `${config.auth_scheme} ${cred.value}` : cred.value;
  try {
    // undici's request() never follows redirects unless a redirect interceptor is composed in.
    const res = await request(config.base_url, {
      method: 'GET',
      ...(ctx.dispatcher ? { dispatcher: ctx.dispatcher } : {}),
      headers,
      signal: AbortSignal.timeout(timeoutMs),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    let read = 0;
    for await (const chunk of res.body) {
      read += (chunk as Buffer).length;
      if (read >= TEST_BODY_CAP_BYTES) break;
    }
    res.body.destroy();
    // Any answer means the upstream is reachable; 5xx and auth failures are reported, redirects are not followed.
    if (res.statusCode >= 500) return { ok: false, latency_ms: elapsed(), error: `upstream answered ${res.statusCode}` };
    if (res.statusCode === 401 || res.statusCode === 403) return { ok: false, latency_ms: elapsed(), error: 'authentication failed' };
    if (res.statusCode >= 300 && res.statusCode < 400) return { ok: false, latency_ms: elapsed(), error: `upstream redirected (${res.statusCode}); redirects are not followed` };
    return { ok: true, latency_ms: elapsed(), error: null };
  } catch (err) {
    return { ok: false, latency_ms: elapsed(), error: sanitizeHttpError(err) };
  }
}

export const httpConnector: Connector = {
  key: 'http',
  name: 'HTTP API',
  description: 'An HTTP API reached through the proxy (/proxy/{source_id}/...) and the MCP http_request tool.',
  source_type: 'http',
  capabilities: ['http'],
  active: true,
  configSchema: httpConfigSchema,
  credentials: [TOKEN],
  test: testHttp,
};
