// The one place where MCP tool failures are rendered: a registry code becomes a tool error result or a JSON-RPC error (errorRegistry.mcpToolError), and either one an HTTP answer on the legacy endpoints.
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { errorRegistry, GatehouseError, type ErrorCode as GatehouseCode } from '../../errors/registry.js';

/** Bad tool arguments: one `invalid_request` that names every offending field, so an agent can correct its call. */
export function invalidArguments(tool: string, error: z.ZodError): GatehouseError {
  const problems = error.issues.slice(0, 10).map((i) => {
    const where = i.path.length === 0 ? 'arguments' : i.path.map(String).join('.');
    const keys = i.code === 'unrecognized_keys' ? ` (${i.keys.join(', ')})` : '';
    return `${where}: ${i.message}${keys}`;
  });
  return new GatehouseError('invalid_request', `Invalid arguments for ${tool}: ${problems.join('; ')}.`);
}

/** A tool name that is not offered: a JSON-RPC "invalid params" error, as the MCP specification shows it. */
export function unknownTool(name: string): McpError {
  return new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name.slice(0, 64)}`, { error: 'invalid_request' });
}

/** The tool error result of a refusal: the safe message as text, and the registry code as structured content. */
export function toolErrorResult(err: GatehouseError, requestId: string, extra: Record<string, unknown> = {}): CallToolResult {
  const structured: Record<string, unknown> = { error: err.code, message: err.message, request_id: requestId, ...extra };
  if (err.retryAfterSeconds !== undefined) structured.retry_after_seconds = err.retryAfterSeconds;
  return { content: [{ type: 'text', text: `${err.code}: ${err.message}` }], structuredContent: structured, isError: true };
}

/**
 * How a failure leaves a tool call: codes the registry marks `mcpToolError` are results the model can read and
 * act on (denied, unknown source, bad input); the others (unavailable, internal, audit) are JSON-RPC errors of
 * the call itself, because nothing about the request was wrong.
 */
export function renderToolFailure(err: GatehouseError, requestId: string): { kind: 'result'; result: CallToolResult } | { kind: 'rpc'; error: McpError } {
  if (err.spec.mcpToolError) return { kind: 'result', result: toolErrorResult(err, requestId) };
  const data: Record<string, unknown> = { error: err.code, request_id: requestId };
  if (err.retryAfterSeconds !== undefined) data.retry_after_seconds = err.retryAfterSeconds;
  return { kind: 'rpc', error: new McpError(ErrorCode.InternalError, err.message, data) };
}

/** A legacy tools/call body that is not `{name, arguments}`: answered like any invalid call (400). */
export function invalidLegacyBody(error: z.ZodError): McpError {
  const problems = error.issues.slice(0, 10).map((i) => `${i.path.length ? i.path.map(String).join('.') : 'body'}: ${i.message}`);
  return new McpError(ErrorCode.InvalidParams, `The body must be {name, arguments}: ${problems.join('; ')}.`, { error: 'invalid_request' });
}

/** A JSON-RPC error on the legacy endpoints: the gateway error body (DESIGN §6) with the registry's status. */
export function legacyHttpError(err: McpError, requestId: string): { status: number; body: { error: string; message: string; request_id: string } } {
  const code = (err.data as { error?: unknown } | undefined)?.error;
  const known = typeof code === 'string' && code in errorRegistry ? (code as GatehouseCode) : err.code === ErrorCode.InvalidParams ? 'invalid_request' : 'internal';
  // McpError prefixes "MCP error <code>: "; the legacy body carries the plain message.
  const message = err.message.replace(/^MCP error -?\d+: /, '');
  return { status: errorRegistry[known].http, body: { error: known, message, request_id: requestId } };
}
