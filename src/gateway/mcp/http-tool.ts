// The `http_request` tool: a request on an HTTP source through the HTTP proxy's own pipeline (same path validation, decision, cache, redaction, approval), with its answer as structured content.
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import { FORWARDED_REQUEST_HEADERS, runHttpPipeline, type HttpExecution } from '../../pipeline/http.js';
import { SOURCE_ID_PATTERN, SOURCE_ID_RULE, governedRequest, structuredResult, type ToolDefinition } from './context.js';
import { queuedOutcome } from './queued.js';
import { MAX_JSON_DEPTH, jsonDeeperThan } from '../../util/json-depth.js';

const JSON_LIKE = /^application\/([a-z0-9.+-]*\+)?json/i;
const TEXT_LIKE = /^(text\/|application\/(xml|xhtml\+xml|javascript|x-www-form-urlencoded|csv)|[^;]*\+xml)/i;
const TEXT_CHARS = 4_000;

const queryValue = z.union([z.string(), z.number(), z.boolean()]);
const jsonBody = z.union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown()), z.number(), z.boolean(), z.null()]);

export const httpRequestSchema = z.strictObject({
  source_id: z.string().regex(SOURCE_ID_PATTERN, SOURCE_ID_RULE),
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']),
  path: z
    .string()
    .min(1)
    .max(4096)
    .regex(/^\//, 'must start with "/" (beneath the source base URL)')
    .refine((p) => !p.includes('?') && !p.includes('#'), 'must not contain "?" or "#": pass the query string as `query`')
    .describe('Path beneath the source base URL, starting with "/"; percent-encode as you would in a URL.'),
  query: z
    .union([z.string().max(8192), z.record(z.string(), z.union([queryValue, z.array(queryValue)]))])
    .optional()
    .describe('Query string: an encoded string without "?", or an object of names to values (arrays repeat the name).'),
  body: jsonBody.optional().describe('Request body: a string is sent as is (text/plain unless content-type says otherwise); any other JSON value is sent as JSON.'),
  headers: z
    .strictObject(Object.fromEntries(FORWARDED_REQUEST_HEADERS.map((h) => [h, z.string().max(1024).optional()])) as Record<(typeof FORWARDED_REQUEST_HEADERS)[number], z.ZodOptional<z.ZodString>>)
    .optional()
    .describe(`Request headers, lower-case names; only ${FORWARDED_REQUEST_HEADERS.join(', ')} are accepted (the proxy forwards nothing else).`),
});

function queryString(q: z.output<typeof httpRequestSchema>['query']): string {
  if (q === undefined) return '';
  if (typeof q === 'string') return q.replace(/^\?/, '');
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(q)) for (const v of Array.isArray(value) ? value : [value]) params.append(name, String(v));
  return params.toString();
}

function renderBody(body: Buffer, contentType: string): { body: unknown; body_encoding: 'json' | 'utf8' | 'base64' } {
  if (body.length === 0) return { body: null, body_encoding: 'utf8' };
  const text = body.toString('utf8');
  // An upstream body nested past the bound is shown as text: the tool result is serialised recursively.
  if (JSON_LIKE.test(contentType) && !jsonDeeperThan(text, MAX_JSON_DEPTH)) {
    try {
      return { body: JSON.parse(text), body_encoding: 'json' };
    } catch {
      // Redaction already rewrote what it could; an invalid JSON body is shown as text.
    }
  }
  if (JSON_LIKE.test(contentType) || TEXT_LIKE.test(contentType)) return { body: text, body_encoding: 'utf8' };
  return { body: body.toString('base64'), body_encoding: 'base64' };
}

export function httpRequestTool(limits: { requestBodyBytes: number }): ToolDefinition<typeof httpRequestSchema> {
  return {
    name: 'http_request',
    title: 'Request an HTTP source',
    description:
      'Sends one request to an HTTP source you are granted, through the same governed proxy as /proxy/{source_id}/…: your source roles, policies, rate limits, caching, redaction and approvals apply. Returns {status, headers, body}; a JSON body comes back parsed. A write that needs approval is not sent: the result is an error carrying approval_id (check it with get_approval).',
    schema: httpRequestSchema,
    readOnly: false,
    async run(args, run) {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(args.headers ?? {})) if (v !== undefined) headers[k] = v;
      let body: Buffer | null = null;
      if (args.body !== undefined) {
        const isText = typeof args.body === 'string';
        body = Buffer.from(isText ? (args.body as string) : JSON.stringify(args.body));
        headers['content-type'] ??= isText ? 'text/plain; charset=utf-8' : 'application/json';
      }
      run.audit.set({ source_id: args.source_id, method: args.method, bytes_in: body?.length ?? 0 });
      if (body && body.length > limits.requestBodyBytes) throw new GatehouseError('payload_too_large');
      const qs = queryString(args.query);
      // The proxy's request target form, so the proxy's path validation (encodings, dot segments, traversal) applies unchanged.
      const rawTarget = `/proxy/${args.source_id}${args.path}${qs ? `?${qs}` : ''}`;
      const exec: HttpExecution = governedRequest(run, args.source_id, { kind: 'http', method: args.method, rawTarget, headers, body: body && body.length > 0 ? body : null });
      const outcome = await runHttpPipeline(exec, run.deps.pipeline);
      if (outcome.kind === 'queued') return queuedOutcome(outcome.approval, run.caller.requestId);
      const response = outcome.response;
      const rendered = renderBody(response.body, response.headers['content-type'] ?? '');
      const structured = { status: response.status, headers: response.headers, ...rendered, cache: exec.cacheOutcome ?? null };
      const bodyText = typeof rendered.body === 'string' ? rendered.body : JSON.stringify(rendered.body);
      const text = `HTTP ${response.status}\n${bodyText.length > TEXT_CHARS ? `${bodyText.slice(0, TEXT_CHARS)}\n… (see the structured result)` : bodyText}`;
      return {
        // The upstream answered, but an agent should treat a 4xx/5xx as a failed call.
        result: structuredResult(structured, text, response.status >= 400),
        audit: { status: response.status, cache: exec.cacheOutcome ?? null, redactions: exec.redactions ?? 0 },
      };
    },
  };
}
