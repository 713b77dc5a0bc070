// What every MCP tool is given: the shared pipeline dependencies, the caller (already authenticated), and the audit entry the call owns.
import type { Span } from '../../observability/tracing.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import type { AuditContext, Auditor } from '../../audit/context.js';
import type { AuditFields } from '../../audit/entry.js';
import type { AgentIdentity } from '../../identity/index.js';
import type { Logger } from '../../observability/logger.js';
import type { HttpPipelineDeps } from '../../pipeline/http.js';
import type { GovernedAction, GovernedRequest } from '../../pipeline/context.js';
import type { PostgresExecutor } from '../../connectors/postgres-exec.js';
import type { Db } from '../../store/repos/util.js';

export interface McpDeps {
  /** The governance runtime's pipeline deps: the same decisions as the HTTP proxy and the wire listener. */
  readonly pipeline: HttpPipelineDeps;
  readonly auditor: Auditor;
  readonly db: Db;
  /** The process's buffered PostgreSQL executor (shared pools with the wire listener). */
  postgres(): Promise<PostgresExecutor>;
  readonly log: Logger;
  readonly legacyPrefix: string;
}

/** Who calls: established by the endpoint before any tool runs (every HTTP request carries the key again). */
export interface ToolCaller {
  readonly identity: AgentIdentity;
  /** The HTTP request id (x-request-id), shared by the audit entry. */
  readonly requestId: string;
  readonly clientIp: string | null;
  /** The HTTP request's server span when tracing is on: each tool call's span hangs beneath it. */
  readonly span?: Span | undefined;
}

export interface ToolRun {
  readonly deps: McpDeps;
  readonly caller: ToolCaller;
  /** The call's one audit entry; tools add fields, the dispatcher ends it. */
  readonly audit: AuditContext;
}

/** A finished call: what the client sees, and the audit fields that describe how it ended (status 200 / allow unless set). */
export interface ToolOutcome {
  readonly result: CallToolResult;
  readonly audit?: Partial<AuditFields>;
}

export interface ToolDefinition<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly schema: S;
  readonly readOnly: boolean;
  run(args: z.output<S>, run: ToolRun): Promise<ToolOutcome>;
}

/** The GovernedRequest of a tool call: the caller, already authenticated by the endpoint, and the call's audit entry. */
export function governedRequest(run: ToolRun, sourceId: string, action: GovernedAction): GovernedRequest {
  const { caller } = run;
  return { channel: 'mcp', requestId: caller.requestId, clientIp: caller.clientIp, sourceId, credential: { kind: 'authenticated', identity: caller.identity }, action, audit: run.audit };
}

export { SOURCE_ID_PATTERN, SOURCE_ID_RULE } from '../../registry/sources.js';

/** A structured result with a short text rendering for clients that show only text. */
export function structuredResult(structured: Record<string, unknown>, text: string, isError = false): ToolOutcome['result'] {
  return { content: [{ type: 'text', text }], structuredContent: structured, ...(isError ? { isError: true } : {}) };
}
