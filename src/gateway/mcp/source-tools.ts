// The discovery tools: `list_sources` (sources the caller holds an active grant on) and `describe_source` (type, allowed operations, catalog when captured); structure only, never row data.
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import { activeRoles, type SourceRole } from '../../governance/source-roles.js';
import type { RegisteredSource } from '../../registry/sources.js';
import { listGrantsForIdentity } from '../../store/repos/grants.js';
import { latestStructure } from '../../store/repos/catalog.js';
import { visibleCatalog } from '../../catalog/describe.js';
import type { CatalogStructure } from '../../catalog/model.js';
import { SOURCE_ID_PATTERN, SOURCE_ID_RULE, structuredResult, type ToolDefinition, type ToolRun } from './context.js';

/** One usable role on a source, as the agent may see it: its key and what its rules allow. */
export interface RoleSummary {
  role_key: string;
  description: string;
  http: Array<{ methods: string[]; paths: string[]; approval: string }>;
  sql: Array<{ operations: string[]; tables: string[]; approval: string }>;
  summary: string;
}

export interface SourceSummary {
  source_id: string;
  name: string;
  type: string;
  roles: RoleSummary[];
}

function summarize(role: SourceRole): RoleSummary {
  const http = role.rules.http.map((r) => ({ methods: [...r.methods], paths: [...r.paths], approval: r.approval }));
  const sql = role.rules.sql.map((r) => ({ operations: [...r.operations], tables: [...r.tables], approval: r.approval ?? 'by_risk' }));
  const parts = [
    ...http.map((r) => `${r.methods.join('/')} ${r.paths.join(', ')}${r.approval === 'never' ? '' : ` (approval ${r.approval})`}`),
    ...sql.map((r) => `${r.operations.join('/')} on ${r.tables.join(', ')}${r.approval === 'never' ? '' : ` (approval ${r.approval})`}`),
  ];
  return { role_key: role.role_key, description: role.description, http, sql, summary: parts.length === 0 ? 'nothing (no rules)' : parts.join('; ') };
}

/**
 * The roles the caller can use on the source right now (grant enabled and unexpired, role enabled), read through
 * the pipeline's role context so this answer and a data request's decision come from the same records.
 */
async function usableRoles(run: ToolRun, sourceId: string): Promise<RoleSummary[]> {
  const { grants, roles } = await run.deps.pipeline.roleContext(run.caller.identity, sourceId);
  // The same rule the source-role decision applies (enabled, unexpired, role of this source and enabled).
  const { active } = activeRoles({ source_id: sourceId, identity_id: run.caller.identity.id, grants, roles, now: new Date() });
  const out: RoleSummary[] = [];
  for (const { role } of active) if (!out.some((o) => o.role_key === role.role_key)) out.push(summarize(role));
  return out;
}

/** The source if the caller may know of it: registered, enabled and granted. Anything else is "unknown source", so nothing about its existence leaks. */
async function visibleSource(run: ToolRun, sourceId: string): Promise<{ source: RegisteredSource; roles: RoleSummary[] }> {
  const source = run.deps.pipeline.lookupSource(sourceId);
  if (!source || !source.enabled) throw new GatehouseError('unknown_source');
  const roles = await usableRoles(run, sourceId);
  if (roles.length === 0) throw new GatehouseError('unknown_source');
  return { source, roles };
}

function summaryOf(source: RegisteredSource, roles: RoleSummary[]): SourceSummary {
  return { source_id: source.source_id, name: source.name, type: source.source_type, roles };
}

const listSourcesSchema = z.strictObject({});

export const listSourcesTool: ToolDefinition<typeof listSourcesSchema> = {
  name: 'list_sources',
  title: 'List data sources',
  description: 'Lists the data sources you hold an active grant on, with their type and what your roles allow on each (HTTP methods and paths, SQL operations and tables, and when an approval is needed).',
  schema: listSourcesSchema,
  readOnly: true,
  async run(_args, run) {
    const grants = await listGrantsForIdentity(run.deps.db, run.caller.identity.id);
    // Every granted source is a candidate; usableRoles applies the decision's own rule to keep only usable ones.
    const sourceIds = [...new Set(grants.map((g) => g.source_id))].sort();
    const sources: SourceSummary[] = [];
    for (const id of sourceIds) {
      const source = run.deps.pipeline.lookupSource(id);
      if (!source || !source.enabled) continue;
      const roles = await usableRoles(run, id);
      if (roles.length > 0) sources.push(summaryOf(source, roles));
    }
    const text =
      sources.length === 0
        ? 'No data sources are available to you.'
        : sources.map((s) => `${s.source_id} (${s.type}, ${s.name}): ${s.roles.map((r) => `${r.role_key}: ${r.summary}`).join(' | ')}`).join('\n');
    return { result: structuredResult({ sources }, text), audit: { operation: 'list_sources' } };
  },
};

const describeSourceSchema = z.strictObject({
  source_id: z.string().regex(SOURCE_ID_PATTERN, SOURCE_ID_RULE),
});

export const describeSourceTool: ToolDefinition<typeof describeSourceSchema> = {
  name: 'describe_source',
  title: 'Describe a data source',
  description:
    'Describes one data source you are granted: its type, the operations and paths your roles allow, and its captured catalog (schemas, tables, columns) when the service has captured one. Never returns row data.',
  schema: describeSourceSchema,
  readOnly: true,
  async run(args, run) {
    run.audit.set({ source_id: args.source_id });
    const { source, roles } = await visibleSource(run, args.source_id);
    const allowed = {
      http: roles.flatMap((r) => r.http),
      sql_operations: [...new Set(roles.flatMap((r) => r.sql.flatMap((s) => s.operations)))],
      sql_tables: [...new Set(roles.flatMap((r) => r.sql.flatMap((s) => s.tables)))],
    };
    // The catalog the worker captured (docs/catalog.md), cut to what the caller's roles name: structure only, never rows.
    const latest = await latestStructure(run.deps.db, source.source_id);
    const catalog = latest === undefined ? null : visibleCatalog(latest.structure as unknown as CatalogStructure, { sqlTables: allowed.sql_tables, http: allowed.http });
    const status = latest === undefined ? 'no catalog captured' : `captured ${latest.finished_at.toISOString()} (version ${latest.version}${latest.truncated_by ? `, truncated by ${latest.truncated_by}` : ''})`;
    const structured = { ...summaryOf(source, roles), allowed, catalog, catalog_status: status };
    const how = source.source_type === 'http' ? 'Use http_request with this source_id.' : 'Use query with this source_id.';
    const shown =
      catalog === null
        ? 'No catalog captured.'
        : catalog.kind === 'sql'
          ? `Catalog: ${catalog.relations.map((r) => `${r.schema}.${r.name}(${r.columns.map((c) => `${c.name} ${c.type}`).join(', ')})`).join('; ') || 'no table your roles name'}.`
          : `Catalog: ${catalog.operations.map((o) => `${o.method} ${o.path}`).join('; ') || 'no operation your roles allow'}.`;
    const text = `${source.source_id} (${source.source_type}, ${source.name}). ${roles.map((r) => `${r.role_key}: ${r.summary}`).join(' | ')}. ${shown} ${how}`;
    return { result: structuredResult(structured, text), audit: { operation: 'describe_source' } };
  },
};
