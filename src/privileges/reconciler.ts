// Reconciliation of managed privileges on one PostgreSQL source (docs/least-privilege.md): read the rules, grants, identities and policies from the control store and the structure and privileges from the source, plan the difference, apply it in one transaction, verify, and audit plan and result.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { compilePolicies, type CompiledPolicySet } from '../governance/policy/index.js';
import { roleRulesSchema, type Grant, type SourceRole } from '../governance/source-roles.js';
import { desiredPrivileges, type DesiredInput, type DesiredPrivileges } from '../governance/privileges/desired.js';
import { emptyPlan, planReconciliation, planStatements, planSummary, type Plan } from '../governance/privileges/plan.js';
import { postgresConfigOf, sanitizePgError, type PostgresConfig } from '../connectors/postgres.js';
import { connectPostgres } from '../connectors/postgres-connect.js';
import { resolveCredential } from '../connectors/credentials.js';
import { listSourceRoles } from '../store/repos/source-roles.js';
import { listGrantsForSource } from '../store/repos/grants.js';
import { listPolicies } from '../store/repos/policies.js';
import { listAnnotations } from '../store/repos/catalog.js';
import { buildClassifications } from '../catalog/governance.js';
import type { Db } from '../store/repos/util.js';
import type { RegisteredSource } from '../registry/sources.js';
import type { SecretRefResult } from '../config/secrets.js';
import { readActual, readStructure } from './catalog.js';

/** The managed-privilege settings of a source, or null when its sessions run as the configured user. */
export function managedSettings(source: RegisteredSource): { config: PostgresConfig; prefix: string } | null {
  if (source.source_type !== 'postgres') return null;
  const config = postgresConfigOf(source);
  if (config === null || config.privileges !== 'managed') return null;
  return { config, prefix: config.managed_role_prefix ?? defaultPrefix(source.source_id) };
}

/** Role names are global to a PostgreSQL server: the default prefix carries a hash of the source id. */
export function defaultPrefix(sourceId: string): string {
  return `gh_${createHash('sha256').update(sourceId).digest('hex').slice(0, 8)}_`;
}

export interface ReconcileDeps {
  readonly db: Db;
  resolveSecretRef(ref: string): SecretRefResult;
  checkTarget(sourceId: string, host: string): Promise<{ address: string }>;
  /** The policy set decisions use now; the store's own policies are compiled afresh and this is the fallback. */
  currentPolicies(): CompiledPolicySet;
  connectTimeoutMs: number;
}

export interface ReconcileResult {
  readonly source_id: string;
  readonly ok: boolean;
  readonly dry_run: boolean;
  /** Counts per kind of change; drift is what was found beyond the desired set (revokes, memberships, attributes, stray roles). */
  readonly summary: Record<string, number>;
  readonly drift: number;
  /** The statements planned (dry run) or applied, bounded. */
  readonly statements: readonly string[];
  readonly statement_count: number;
  readonly error: string | null;
  readonly duration_ms: number;
  /** Set when ok: who runs as what. */
  readonly desired?: DesiredPrivileges;
}

const MAX_REPORTED_STATEMENTS = 200;
/** Statements sent per query string inside the transaction (one round trip each). */
const STATEMENTS_PER_ROUND = 200;

type Inputs = Pick<DesiredInput, 'roles' | 'grants' | 'identities' | 'policies' | 'maskedReads' | 'classified'>;

async function loadInputs(deps: ReconcileDeps, sourceId: string, maskedReads: boolean): Promise<Inputs> {
  const [roleRows, grantRows, identityRows, policyRows, annotations] = await Promise.all([
    listSourceRoles(deps.db, sourceId),
    listGrantsForSource(deps.db, sourceId),
    deps.db.selectFrom('identities').select(['id', 'roles', 'team', 'enabled']).execute(),
    listPolicies(deps.db, { enabledOnly: true }),
    // The catalog's confirmed classifications choose masks and feed redact_classified (masked reads only).
    maskedReads ? listAnnotations(deps.db, sourceId) : Promise.resolve([]),
  ]);
  const roles: SourceRole[] = roleRows.map((r) => {
    // Stored rules that no longer validate count as no rules: a damaged record can only take privileges away.
    const parsed = roleRulesSchema.safeParse(r.rules);
    return { id: r.id, source_id: r.source_id, role_key: r.role_key, description: r.description, enabled: r.enabled, rules: parsed.success ? parsed.data : { http: [], sql: [] } };
  });
  const grants: Grant[] = grantRows.map((g) => ({
    id: g.id,
    identity_id: g.identity_id,
    source_id: g.source_id,
    role_id: g.role_id,
    role_key: g.role_key,
    enabled: g.enabled,
    expires_at: g.expires_at,
    granted_by: g.granted_by,
  }));
  let policies: CompiledPolicySet;
  try {
    policies = compilePolicies(policyRows, { version: `privileges-${Date.now()}` });
  } catch {
    policies = deps.currentPolicies();
  }
  const identities = identityRows.map((i) => ({ id: i.id, roles: [...i.roles], team: i.team, enabled: i.enabled }));
  if (!maskedReads) return { roles, grants, identities, policies };
  const { columnTags, byTag } = buildClassifications(annotations, []);
  return { roles, grants, identities, policies, maskedReads, classified: { columnTags, byTag } };
}

async function adminClient(deps: ReconcileDeps, sourceId: string, config: PostgresConfig): Promise<pg.Client> {
  const admin = config.privilege_admin!;
  const cred = resolveCredential({ password_ref: admin.password_ref }, { literal: 'password', ref: 'password_ref' }, (ref) => deps.resolveSecretRef(ref));
  if (!cred.ok) throw new ReconcileError('the privilege_admin credential reference cannot be resolved');
  let address: string;
  try {
    ({ address } = await deps.checkTarget(sourceId, config.host));
  } catch (err) {
    throw new ReconcileError(`the source address is not allowed (${sanitizePgError(err)})`);
  }
  try {
    return await connectPostgres({
      config: { ...config, user: admin.user },
      password: cred.value,
      address,
      timeoutMs: Math.min(config.connect_timeout_ms, deps.connectTimeoutMs),
      applicationName: 'gatehouse-privileges',
      clientOptions: { statement_timeout: 60_000, options: '-c search_path=pg_catalog' },
    });
  } catch (err) {
    throw new ReconcileError(`the privilege admin cannot connect (${sanitizePgError(err)})`);
  }
}

/** A failure whose message is safe to show (no host, user name beyond the configured role, password or SQL detail). */
export class ReconcileError extends Error {
  readonly code = 'privileges_reconcile_failed';
}

function driftOf(plan: Plan): number {
  return plan.revokes.length + plan.revokeMemberships.length + plan.resetAttributes.length + plan.dropRoles.length + plan.dropViews.length + plan.dropSchemas.length;
}

export interface ReconcileTarget {
  readonly sourceId: string;
  readonly prefix: string;
  /** The sessions' login user: made a member of every managed role so it can SET ROLE to them. */
  readonly loginUser: string;
  readonly inputs: Omit<DesiredInput, 'sourceId' | 'prefix' | 'structure' | 'now'>;
  readonly dryRun: boolean;
}

type Report = Omit<ReconcileResult, 'source_id' | 'dry_run' | 'duration_ms'>;

/**
 * The reconciliation itself on an admin connection: structure and actual privileges read, desired computed, the plan
 * applied in one transaction and verified. `onPlan` sees the plan's report before it is applied (for a failure's report).
 */
export async function reconcileOn(client: pg.Client, t: ReconcileTarget, onPlan: (r: Report) => void = () => undefined): Promise<Report> {
  const structure = await readStructure(client, t.prefix);
  const desired = desiredPrivileges({ sourceId: t.sourceId, prefix: t.prefix, structure, ...t.inputs, now: new Date() });
  const plan = planReconciliation(desired, await readActual(client, t.prefix, t.loginUser));
  const statements = planStatements(plan, t.loginUser);
  const report = { ok: true, summary: planSummary(plan), drift: driftOf(plan), statements: statements.slice(0, MAX_REPORTED_STATEMENTS), statement_count: statements.length, error: null };
  onPlan(report);
  if (t.dryRun || statements.length === 0) return { ...report, desired };
  await client.query('BEGIN');
  try {
    for (let i = 0; i < statements.length; i += STATEMENTS_PER_ROUND) await client.query(statements.slice(i, i + STATEMENTS_PER_ROUND).join(';\n'));
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    const e = err as { code?: string; message?: string };
    // PostgreSQL's own message names objects and roles of the plan, never a secret; the SQLSTATE says the class.
    throw new ReconcileError(`the plan could not be applied (SQLSTATE ${e.code ?? '?'}: ${String(e.message ?? '').slice(0, 300)})`);
  }
  const left = planReconciliation(desired, await readActual(client, t.prefix, t.loginUser));
  if (!emptyPlan(left)) {
    throw new ReconcileError(`after applying, ${planStatements(left, t.loginUser).length} difference(s) remain (e.g. grants made by another grantor the privilege admin cannot revoke)`);
  }
  return { ...report, desired };
}

/**
 * One reconciliation. With `dryRun` nothing is changed: the answer is the plan. Otherwise the plan runs in one
 * transaction (all or nothing), and the source's privileges are read again: anything still different (a grant by
 * another grantor the admin cannot revoke, a concurrent change) makes the result a failure, so sessions stay refused.
 */
export async function reconcileSource(deps: ReconcileDeps, source: RegisteredSource, opts: { dryRun: boolean }): Promise<ReconcileResult> {
  const started = performance.now();
  const settings = managedSettings(source);
  const base = { source_id: source.source_id, dry_run: opts.dryRun };
  const done = (r: Omit<ReconcileResult, 'source_id' | 'dry_run' | 'duration_ms'>): ReconcileResult => ({ ...base, ...r, duration_ms: Math.round(performance.now() - started) });
  if (settings === null) return done({ ok: false, summary: {}, drift: 0, statements: [], statement_count: 0, error: 'the source does not use managed privileges' });
  const { config, prefix } = settings;
  let client: pg.Client | null = null;
  let partial: Partial<ReconcileResult> = {};
  try {
    const inputs = await loadInputs(deps, source.source_id, config.masked_reads === true);
    client = await adminClient(deps, source.source_id, config);
    const r = await reconcileOn(client, { sourceId: source.source_id, prefix, loginUser: config.user, inputs, dryRun: opts.dryRun }, (p) => (partial = p));
    return done(r);
  } catch (err) {
    const message = err instanceof ReconcileError ? err.message : `reconciliation failed (${sanitizePgError(err)})`;
    return done({ ok: false, summary: partial.summary ?? {}, drift: partial.drift ?? 0, statements: partial.statements ?? [], statement_count: partial.statement_count ?? 0, error: message });
  } finally {
    await client?.end().catch(() => undefined);
  }
}
