// The tool set and the one dispatcher every MCP entry point (Streamable HTTP and the legacy endpoints) calls: argument validation, the call's single audit entry, and failure rendering.
import { ErrorCode, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { AuditContext } from '../../audit/context.js';
import type { AuditFields } from '../../audit/entry.js';
import { z } from 'zod';
import type { Config } from '../../config/index.js';
import { asGatehouseError, auditFailure } from '../../pipeline/run.js';
import type { McpDeps, ToolCaller, ToolDefinition, ToolOutcome } from './context.js';
import { invalidArguments, renderToolFailure, unknownTool } from './errors.js';
import { describeSourceTool, listSourcesTool } from './source-tools.js';
import { queryTool } from './query-tool.js';
import { httpRequestTool } from './http-tool.js';
import { getApprovalTool } from './approval-tool.js';
import { readDocumentTool, searchDocumentsTool } from './document-tools.js';
import type { GatehouseError } from '../../errors/registry.js';

export const TOOL_NAMES = ['list_sources', 'describe_source', 'query', 'http_request', 'get_approval', 'search_documents', 'read_document'] as const;

export interface Toolset {
  /** The MCP tool list; with a prefix, every name is `<prefix>_<tool>` (legacy endpoints). */
  list(prefix?: string): Tool[];
  /** Runs one tool call; a JSON-RPC-level failure is thrown as McpError, everything else is a result. */
  call(deps: McpDeps, caller: ToolCaller, name: string, args: unknown): Promise<CallToolResult>;
}

function inputSchemaOf(schema: z.ZodType): Tool['inputSchema'] {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  delete json.$schema;
  return json as Tool['inputSchema'];
}

export function buildToolset(config: Readonly<Config>): Toolset {
  const limits = config.gateway.limits;
  const defs: ToolDefinition[] = [
    listSourcesTool,
    describeSourceTool,
    queryTool({ maxRows: limits.result_rows, responseBytes: limits.response_body_bytes }),
    httpRequestTool({ requestBodyBytes: limits.request_body_bytes }),
    getApprovalTool,
    searchDocumentsTool,
    readDocumentTool,
  ] as unknown as ToolDefinition[];
  const byName = new Map(defs.map((d) => [d.name, d]));
  // Schemas are fixed for the process's configuration: converted once, not per tools/list.
  const listed: Tool[] = defs.map((d) => ({
    name: d.name,
    title: d.title,
    description: d.description,
    inputSchema: inputSchemaOf(d.schema),
    annotations: { title: d.title, readOnlyHint: d.readOnly, destructiveHint: !d.readOnly, openWorldHint: d.name === 'query' || d.name === 'http_request' },
  }));

  return {
    list(prefix) {
      return prefix === undefined ? listed : listed.map((t) => ({ ...t, name: `${prefix}_${t.name}` }));
    },
    async call(deps, caller, name, args) {
      const tool = byName.get(name);
      const audit = deps.auditor.begin({
        channel: 'mcp',
        request_id: caller.requestId,
        client_ip: caller.clientIp,
        identity_id: caller.identity.id,
        operation: tool ? name : null,
        action: `mcp.${tool ? name : 'unknown_tool'}`,
      }, caller.span);
      if (!tool) {
        await endAudit(audit, { status: 400, decision: 'error', error_code: 'invalid_request', reasons: ['mcp: unknown tool'] }, caller.requestId);
        throw unknownTool(name);
      }
      let outcome: ToolOutcome | undefined;
      let error: GatehouseError | undefined;
      try {
        const parsed = tool.schema.safeParse(args ?? {});
        if (!parsed.success) throw invalidArguments(name, parsed.error);
        outcome = await tool.run(parsed.data, { deps, caller, audit });
      } catch (err) {
        error = asGatehouseError(err);
        if (error.code === 'internal') deps.log.error({ err, tool: name }, 'MCP tool call failed');
        else if (error.code === 'upstream_failed') deps.log.warn({ err, tool: name }, 'MCP tool upstream request failed');
      }
      const rendered = error ? renderToolFailure(error, caller.requestId) : null;
      const result = outcome?.result ?? (rendered?.kind === 'result' ? rendered.result : null);
      const bytesOut = result ? Buffer.byteLength(JSON.stringify(result.structuredContent ?? result.content)) : 0;
      await endAudit(
        audit,
        error
          ? { ...auditFailure(error), bytes_out: bytesOut }
          : { status: 200, decision: 'allow', error_code: null, bytes_out: bytesOut, ...outcome!.audit },
        caller.requestId,
      );
      if (rendered?.kind === 'rpc') throw rendered.error;
      return result!;
    },
  };
}

/** Strict durability: the answer leaves only once its audit entry is recorded, as on the proxy; if it cannot be, the call fails as a JSON-RPC error. */
async function endAudit(audit: AuditContext, fields: Partial<AuditFields>, requestId: string): Promise<void> {
  try {
    await audit.end(fields);
  } catch (auditErr) {
    const failed = renderToolFailure(asGatehouseError(auditErr), requestId);
    if (failed.kind === 'rpc') throw failed.error;
    throw new McpError(ErrorCode.InternalError, 'The audit log cannot record this request.', { error: 'audit_unavailable', request_id: requestId });
  }
}
