// The naming report of GET /api/catalog/naming-report: reads roles, policies and every source's latest catalog, and asks naming.ts what each name resolves to.
import { roleRulesSchema } from '../governance/source-roles.js';
import { compileGlobs, GLOB_SEP } from '../governance/policy/glob.js';
import { parsePolicyBody } from '../governance/policy/schema.js';
import { listPolicies } from '../store/repos/policies.js';
import { latestStructure } from '../store/repos/catalog.js';
import type { Db } from '../store/repos/util.js';
import type { CatalogStructure } from './model.js';
import { namingFindings, type NamedPattern, type NamingFinding, type SourceCatalog } from './naming.js';

export interface NamingReport {
  readonly generated_at: string;
  /** SQL sources the report could read a catalog of, and those without one yet (never scanned, or every scan failed). */
  readonly sources: readonly { source_id: string; snapshot_version: number | null; truncated_by: string | null }[];
  readonly findings: readonly (NamingFinding & { rule_id: string })[];
}

export async function namingReport(db: Db): Promise<NamingReport> {
  const sources = await db.selectFrom('data_sources').select(['source_id', 'source_type', 'connector_key']).orderBy('source_id').execute();
  const sql = sources.filter((s) => (s.connector_key ?? s.source_type) === 'postgres').map((s) => s.source_id);
  const catalogs: SourceCatalog[] = [];
  const summary: NamingReport['sources'][number][] = [];
  for (const sourceId of sql) {
    const latest = await latestStructure(db, sourceId);
    if (latest === undefined) {
      summary.push({ source_id: sourceId, snapshot_version: null, truncated_by: null });
      continue;
    }
    const changes = await db.selectFrom('catalog_changes').select(['kind', 'path']).where('snapshot_id', '=', latest.id).execute();
    catalogs.push({
      source_id: sourceId,
      structure: latest.structure as unknown as CatalogStructure,
      added: changes.filter((c) => c.kind === 'added').map((c) => c.path),
      removed: changes.filter((c) => c.kind === 'removed').map((c) => c.path),
    });
    summary.push({ source_id: sourceId, snapshot_version: latest.version, truncated_by: latest.truncated_by });
  }

  const patterns: NamedPattern[] = [];
  const roles = await db.selectFrom('source_roles').select(['id', 'source_id', 'role_key', 'rules']).where('enabled', '=', true).orderBy('id').execute();
  for (const role of roles) {
    const parsed = roleRulesSchema.safeParse(role.rules);
    if (!parsed.success) continue;
    parsed.data.sql.forEach((rule, i) => {
      for (const name of rule.tables) patterns.push({ owner: { kind: 'source_role', role_id: role.id, role_key: role.role_key, rule_index: i }, field: 'tables', name, sources: [role.source_id] });
    });
  }
  for (const policy of await listPolicies(db, { enabledOnly: true })) {
    const parsed = parsePolicyBody(policy.conditions, policy.actions);
    if (!parsed.ok) continue;
    const { conditions, actions } = parsed;
    const isDeny = actions.effect === 'deny';
    const redacts = (actions.redact_columns?.length ?? 0) > 0;
    if (!isDeny && !redacts) continue;
    const m = conditions.source_ids ? compileGlobs(conditions.source_ids, GLOB_SEP.source) : null;
    const applies = sql.filter((s) => m === null || m(s));
    const owner = { kind: 'policy' as const, policy_id: policy.id, policy_name: policy.name };
    if (isDeny) for (const name of conditions.tables ?? []) patterns.push({ owner, field: 'tables', name, sources: applies });
    if (isDeny) for (const name of conditions.columns ?? []) patterns.push({ owner, field: 'columns', name, sources: applies });
    for (const name of actions.redact_columns ?? []) patterns.push({ owner, field: 'redact_columns', name, sources: applies });
  }
  const findings = namingFindings(patterns, catalogs).map((f) => ({
    ...f,
    rule_id: f.owner.kind === 'policy' ? `policy:${f.owner.policy_id}` : `role:${f.owner.role_id}:${f.owner.rule_index}`,
  }));
  return { generated_at: new Date().toISOString(), sources: summary, findings };
}
