// The policy dry-run (POST /api/policies/dry-run): the source-role decision and the policy evaluation for one described request, changing nothing.
import { z } from 'zod';
import { evaluate, HTTP_METHODS, OPERATIONS } from '../../governance/policy/index.js';
import type { CompiledPolicySet, Decision, Operation } from '../../governance/policy/index.js';
import { sourceRoleDecision } from '../../governance/source-roles.js';
import { UNCALLABLE_TRAPS } from '../../governance/sql/allowlist.js';
import type { SourceRoleDecision, SourceRoleRequest } from '../../governance/source-roles.js';
import type { SqlClassification } from '../../governance/sql/types.js';
import { GatehouseError } from '../../errors/registry.js';
import { validationError } from '../../http/validation.js';
import { getDataSourceBySourceId } from '../../store/repos/data-sources.js';
import { loadSourceRoleContext } from '../../store/repos/grants.js';
import { getIdentityById } from '../../store/repos/identities.js';
import type { Db } from '../../store/repos/util.js';
import type { CatalogPort } from '../../pipeline/context.js';
import { splitList } from './compat.js';
import { operationClassifications } from '../../catalog/governance.js';

const MAX_SQL = 100_000;
const name = z.string().min(1).max(512);

export const dryRunSchema = z.strictObject({
  identity_id: z.number().int().min(1).max(2_147_483_647),
  source_id: z.string().min(1).max(255),
  operation: z.enum(OPERATIONS).optional(),
  method: z.string().transform((m) => m.toUpperCase()).pipe(z.enum(HTTP_METHODS)).optional(),
  path: z.string().min(1).max(8192).refine((p) => p.startsWith('/'), 'must start with "/"').optional(),
  sql: z.string().min(1).max(MAX_SQL).optional(),
  tables: z.array(name).max(256).optional(),
  columns: z.array(name).max(1024).optional(),
  classification_tags: z.array(z.string().min(1).max(128)).max(256).optional(),
});
export type DryRunRequest = z.output<typeof dryRunSchema>;

/** The spec §2 dry-run form: every field a string; lists comma-separated; operation defaults to "read". */
export const dryRunFormSchema = z.object({
  classification_tags: z.string().max(32_768).optional(),
  columns: z.string().max(65_536).optional(),
  identity_id: z.string().max(32).optional(),
  method: z.string().max(16).optional(),
  operation: z.string().max(16).optional(),
  path: z.string().max(8192).optional(),
  source_id: z.string().max(255).optional(),
  sql: z.string().max(MAX_SQL).optional(),
  tables: z.string().max(65_536).optional(),
  csrf_token: z.string().optional(),
});

/** Converts the form into the JSON request shape; empty strings are absent fields. The JSON schema then validates it. */
export function dryRunFromForm(form: z.output<typeof dryRunFormSchema>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const str = (v: string | undefined) => (v === undefined || v.trim() === '' ? undefined : v.trim());
  const id = str(form.identity_id);
  if (id !== undefined) out.identity_id = /^\d+$/.test(id) ? Number(id) : id;
  for (const k of ['source_id', 'method', 'path'] as const) if (str(form[k]) !== undefined) out[k] = str(form[k]);
  if (form.sql !== undefined && form.sql.trim() !== '') out.sql = form.sql;
  const hasRequestShape = out.method !== undefined || out.sql !== undefined;
  // The form's default operation ("read") applies only when neither a method nor SQL says what the request is.
  if (!hasRequestShape) out.operation = str(form.operation) ?? 'read';
  else if (str(form.operation) !== undefined) out.operation = str(form.operation);
  for (const k of ['tables', 'columns', 'classification_tags'] as const) {
    const list = splitList(form[k]);
    if (list) out[k] = list;
  }
  return out;
}

export interface DryRunResult {
  effect: Decision['effect'];
  operation: Operation | null;
  tables: string[];
  columns: string[];
  matched_policies: Decision['matched_policies'];
  obligations: Decision['obligations'];
  trace: Decision['trace'];
  reasons: string[];
  deciding_policy_id: number | null;
  policy_version: number;
  source_role: SourceRoleDecision;
  sql?: { ok: boolean; operation?: Operation; multi_statement?: boolean; traps?: readonly string[]; error?: string };
}

export interface DryRunDeps {
  db: Db;
  policies: () => CompiledPolicySet;
  /** The SQL classifier (libpg-query); unparseable SQL comes back as `ok: false`. */
  classifySql: (sql: string) => Promise<SqlClassification>;
  now?: () => Date;
  /** The source catalog's classifications (docs/catalog.md): tags of the named columns, and what redact_classified redacts. */
  catalog?: CatalogPort;
}

/**
 * Tags of the columns a dry run names. A dry run resolves no structure, so a column is matched by as many trailing
 * segments as it gives (`email`, `users.email`, `public.users.email`): it may say more than the gateway would, never less.
 */
function tagsOfColumns(columnTags: ReadonlyMap<string, readonly string[]>, columns: readonly string[]): string[] {
  const tags = new Set<string>();
  for (const [full, list] of columnTags) {
    for (const c of columns) if (full === c || full.endsWith(`.${c}`)) for (const t of list) tags.add(t);
  }
  return [...tags];
}

function readOrWrite(method: string): Operation {
  return method === 'GET' ? 'read' : 'write';
}

export async function dryRun(deps: DryRunDeps, req: DryRunRequest): Promise<DryRunResult> {
  if (req.sql !== undefined && (req.method !== undefined || req.path !== undefined)) {
    throw validationError([{ loc: ['body', 'sql'], msg: 'give either sql or method and path, not both', type: 'value_error' }]);
  }
  if ((req.method === undefined) !== (req.path === undefined)) {
    const missing = req.method === undefined ? 'method' : 'path';
    throw validationError([{ loc: ['body', missing], msg: 'method and path go together', type: 'missing' }]);
  }
  const identity = await getIdentityById(deps.db, req.identity_id);
  if (!identity) throw new GatehouseError('not_found', 'Identity not found.');
  if (!(await getDataSourceBySourceId(deps.db, req.source_id))) throw new GatehouseError('not_found', 'Data source not found.');
  const set = deps.policies();

  let operation: Operation | null = req.operation ?? null;
  let tables = req.tables ?? [];
  let columns = req.columns ?? [];
  let roleRequest: SourceRoleRequest;
  let sqlReport: DryRunResult['sql'];
  if (req.sql !== undefined) {
    const c = await deps.classifySql(req.sql);
    if (!c.ok) {
      // Unparseable SQL is denied, never guessed (docs/governance/sql.md); nothing else is evaluated.
      const roleDecision: SourceRoleDecision = { allowed: false, reason: `SQL not understood: ${c.error.message}` };
      return {
        effect: 'deny', operation: null, tables, columns, matched_policies: [],
        obligations: { rate_limits: [], strictest_rate_limit: null, redact_columns: [], pii_mode: null, cache: true },
        trace: [{ kind: 'source_role', allowed: false, reason: roleDecision.reason }],
        reasons: [`SQL not understood (${c.error.code}): ${c.error.message}`], deciding_policy_id: null, policy_version: Number(set.version),
        source_role: roleDecision, sql: { ok: false, error: c.error.message },
      };
    }
    operation = c.operation;
    tables = [...new Set([...c.tables, ...tables])];
    columns = [...new Set([...c.columns, ...columns])];
    // The allowlist alone: the dry run does not read the source's catalog, which can only refuse more.
    roleRequest = { kind: 'sql', operation, tables, calls: c.calls.filter((k) => k.refusal !== null).map((k) => k.name) };
    sqlReport = { ok: true, operation: c.operation, multi_statement: c.multiStatement, traps: c.traps };
  } else if (req.method !== undefined && req.path !== undefined) {
    operation = readOrWrite(req.method);
    roleRequest = { kind: 'http', method: req.method, path: req.path };
  } else {
    operation ??= 'read';
    roleRequest = { kind: 'sql', operation, tables };
  }

  const ctx = await loadSourceRoleContext(deps.db, identity.id, req.source_id);
  // DO and unknown statement kinds are refused whatever the grants, as every front door does (pipeline/calls.ts).
  const uncallable = sqlReport?.traps?.map((t) => UNCALLABLE_TRAPS.get(t)).find((m) => m !== undefined);
  const roleDecision: SourceRoleDecision =
    uncallable !== undefined
      ? { allowed: false, reason: uncallable }
      : sourceRoleDecision({ source_id: req.source_id, identity_id: identity.id, grants: ctx?.grants ?? [], roles: ctx?.roles ?? [], now: deps.now?.() ?? new Date() }, roleRequest);
  const catalog = deps.catalog ? await deps.catalog.get(req.source_id) : undefined;
  // An HTTP request reads the classifications of the OpenAPI operations its path matches, as the proxy does.
  const http = catalog && req.method !== undefined && req.path !== undefined ? operationClassifications(catalog, req.method, [req.path]) : null;
  const classificationTags = [...new Set([...(req.classification_tags ?? []), ...(catalog ? tagsOfColumns(catalog.columnTags, columns) : []), ...(http?.tags ?? [])])];
  const evaluated = evaluate(set, {
    identity: { id: identity.id, roles: identity.roles, team: identity.team },
    source_id: req.source_id,
    operation,
    method: req.method,
    path: req.path,
    tables,
    columns,
    classification_tags: classificationTags,
    ...(http !== null ? { classified: http.byTag } : catalog ? { classified: catalog.byTag } : {}),
    roleDecision: { allowed: roleDecision.allowed, reason: roleDecision.reason },
  });
  // Drift protection redacts whatever the policies say, as on the front doors.
  const drift = catalog?.protectedColumns ?? [];
  const decision = drift.length === 0 ? evaluated : { ...evaluated, obligations: { ...evaluated.obligations, redact_columns: [...new Set([...evaluated.obligations.redact_columns, ...drift])].sort() } };
  const reasons = [...decision.reasons];
  if (!identity.enabled) reasons.push('note: the identity is disabled; the gateway refuses its credentials before any decision');
  const result: DryRunResult = {
    effect: decision.effect,
    operation,
    tables,
    columns,
    matched_policies: decision.matched_policies,
    obligations: decision.obligations,
    trace: decision.trace,
    reasons,
    deciding_policy_id: decision.deciding_policy_id,
    policy_version: Number(decision.policy_version),
    source_role: roleDecision,
  };
  if (sqlReport) result.sql = sqlReport;
  return result;
}
