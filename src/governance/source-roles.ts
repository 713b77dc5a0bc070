// Source roles and grants (DESIGN §6): role rule schemas, default roles, and the pure source-role decision.
import { z } from 'zod';
import { compileGlobs, GLOB_SEP } from './policy/glob.js';
import type { Matcher } from './policy/glob.js';
import { HTTP_METHODS, OPERATIONS } from './policy/schema.js';
import type { Operation } from './policy/schema.js';

export const APPROVAL_MODES = ['never', 'by_risk', 'always'] as const;
export type ApprovalMode = (typeof APPROVAL_MODES)[number];

/** Write methods of spec §4 rule 10: they need a rule that names them. */
export const WRITE_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface HttpRule {
  /** HTTP method names; `*` stands for the read method (GET) only, never for a write. */
  readonly methods: readonly string[];
  /** Path globs anchored at the source base path (`*` one segment, `**` any depth). */
  readonly paths: readonly string[];
  readonly approval: ApprovalMode;
}

export interface SqlRule {
  readonly operations: readonly Operation[];
  /** Schema-qualified table globs (`public.*`, `*.*`). */
  readonly tables: readonly string[];
  /** Extension of DESIGN §6 so all front doors can read a role's approval wish; defaults to `by_risk`. */
  readonly approval?: ApprovalMode | undefined;
  /**
   * Functions, procedures, operators and cast types outside the built-in allowlist that statements this rule allows
   * may call, by name as the agent writes it (`public.normalize_phone`, `nextval`, `public.===`); an unqualified entry
   * also covers its `pg_catalog.` spelling. docs/governance/sql.md "Functions: deny by default".
   */
  readonly functions?: readonly string[] | undefined;
}

export interface RoleRules {
  readonly http: readonly HttpRule[];
  readonly sql: readonly SqlRule[];
}

export interface SourceRole {
  readonly id: number;
  readonly source_id: string;
  readonly role_key: string;
  readonly description: string;
  readonly enabled: boolean;
  readonly rules: RoleRules;
}

export interface Grant {
  readonly id: number;
  readonly identity_id: number;
  readonly source_id: string;
  readonly role_id: number;
  readonly role_key: string;
  readonly enabled: boolean;
  readonly expires_at: Date | null;
  readonly granted_by: number | null;
}

const glob = z.string().min(1).max(512);
export const httpRuleSchema = z.strictObject({
  methods: z.array(z.enum([...HTTP_METHODS, '*'])).min(1).max(6),
  paths: z.array(glob.refine((s) => s.startsWith('/') || s === '**', 'must start with "/" (anchored at the source base path)')).min(1).max(128),
  approval: z.enum(APPROVAL_MODES).default('by_risk'),
});
/** A callable's name: one to three dot-separated parts, no whitespace and no glob (a pattern could admit what nobody reviewed). */
const callableName = z.string().min(1).max(256).regex(/^[^\s.*"]+(\.[^\s.*"]+){0,2}$/, 'must be a name like schema.function, without spaces, quotes or *');
export const sqlRuleSchema = z.strictObject({
  operations: z.array(z.enum(OPERATIONS)).min(1).max(4),
  tables: z.array(glob).min(1).max(128),
  approval: z.enum(APPROVAL_MODES).optional(),
  functions: z.array(callableName).max(256).optional(),
});
/** Rules of a role record as the admin API accepts them (unknown keys rejected). */
export const roleRulesSchema = z.strictObject({
  http: z.array(httpRuleSchema).max(64).default([]),
  sql: z.array(sqlRuleSchema).max(64).default([]),
});

export interface RoleTemplate {
  readonly role_key: 'reader' | 'writer' | 'admin';
  readonly description: string;
  readonly rules: RoleRules;
}

const ALL = ['/**'];
const ALL_TABLES = ['*.*'];

/**
 * Default roles created with a source when asked (`create_default_roles`):
 * - reader: GET anywhere / `read` on every table, no approval.
 * - writer: reader + POST/PUT/PATCH / `write`, approval by risk. No DELETE: removing data is the admin's.
 * - admin:  writer + DELETE (by risk) / `ddl` and `admin` statements, which always need an approval.
 * Templates for an unknown source type carry both rule kinds, so a new connector is usable at once.
 */
export function defaultRoles(sourceType: 'http' | 'postgres' | string): RoleTemplate[] {
  const http = sourceType !== 'postgres';
  const sql = sourceType !== 'http';
  const pick = (h: HttpRule[], s: SqlRule[]): RoleRules => ({ http: http ? h : [], sql: sql ? s : [] });
  return [
    {
      role_key: 'reader',
      description: 'Read-only: GET requests / SELECT statements on every table',
      rules: pick([{ methods: ['GET'], paths: ALL, approval: 'never' }], [{ operations: ['read'], tables: ALL_TABLES, approval: 'never' }]),
    },
    {
      role_key: 'writer',
      description: 'Read and write: adds POST, PUT, PATCH / INSERT, UPDATE, DELETE statements, approval by risk',
      rules: pick(
        [{ methods: ['GET'], paths: ALL, approval: 'never' }, { methods: ['POST', 'PUT', 'PATCH'], paths: ALL, approval: 'by_risk' }],
        [{ operations: ['read'], tables: ALL_TABLES, approval: 'never' }, { operations: ['write'], tables: ALL_TABLES, approval: 'by_risk' }],
      ),
    },
    {
      role_key: 'admin',
      description: 'Everything: adds HTTP DELETE (approval by risk) and DDL / administrative statements (always approved first)',
      rules: pick(
        [{ methods: ['GET'], paths: ALL, approval: 'never' }, { methods: ['POST', 'PUT', 'PATCH', 'DELETE'], paths: ALL, approval: 'by_risk' }],
        [
          { operations: ['read'], tables: ALL_TABLES, approval: 'never' },
          { operations: ['write'], tables: ALL_TABLES, approval: 'by_risk' },
          { operations: ['ddl', 'admin'], tables: ALL_TABLES, approval: 'always' },
        ],
      ),
    },
  ];
}

export type SourceRoleRequest =
  | { readonly kind: 'http'; readonly method: string; readonly path: string }
  | {
      readonly kind: 'sql';
      readonly operation: Operation;
      readonly tables: readonly string[];
      /** Calls outside the built-in allowlist (or not trusted on this source): each needs a rule naming it. */
      readonly calls?: readonly string[];
    };

export interface SourceRoleContext {
  readonly source_id: string;
  /** When given, grants of other identities are ignored (defence against a caller passing the wrong list). */
  readonly identity_id?: number | undefined;
  readonly grants: readonly Grant[];
  readonly roles: readonly SourceRole[];
  readonly now: Date;
}

export interface RuleMatch {
  readonly grant_id: number;
  readonly role_key: string;
  readonly rule_index: number;
  readonly approval: ApprovalMode;
  /** For SQL: the table this rule covered (absent for a statement without tables and for HTTP). */
  readonly table?: string;
}

export interface SourceRoleDecision {
  readonly allowed: boolean;
  readonly grant_id?: number;
  readonly role_key?: string;
  readonly rule_index?: number;
  readonly approval?: ApprovalMode;
  /** SQL: the rule that covered each table, in the statement's table order. */
  readonly matches?: readonly RuleMatch[];
  /** SQL: the call no rule names, when that is why the request is refused. */
  readonly refusedCall?: string;
  readonly reason: string;
}

const APPROVAL_WEIGHT: Readonly<Record<ApprovalMode, number>> = { never: 0, by_risk: 1, always: 2 };

// Compiled globs per rule object: role records change rarely and are reused across many decisions.
const pathMatchers = new WeakMap<HttpRule, Matcher>();
const tableMatchers = new WeakMap<SqlRule, Matcher>();

function pathMatcher(rule: HttpRule): Matcher {
  let m = pathMatchers.get(rule);
  if (m === undefined) {
    m = compileGlobs(rule.paths, GLOB_SEP.path);
    pathMatchers.set(rule, m);
  }
  return m;
}

function tableMatcher(rule: SqlRule): Matcher {
  let m = tableMatchers.get(rule);
  if (m === undefined) {
    m = compileGlobs(rule.tables, GLOB_SEP.table);
    tableMatchers.set(rule, m);
  }
  return m;
}

/** Does the rule name this method? `*` covers GET only: a write must be listed by name (spec §4 rule 10). */
export function ruleAllowsMethod(rule: HttpRule, method: string): boolean {
  const m = method.toUpperCase();
  if (rule.methods.includes(m)) return true;
  return m === 'GET' && rule.methods.includes('*');
}

export interface ActiveRole {
  readonly grant: Grant;
  readonly role: SourceRole;
}

/** The grants that can allow anything right now, with their roles, and why the others cannot (for the decision's reason). */
export function activeRoles(ctx: SourceRoleContext): { active: ActiveRole[]; skipped: string[] } {
  const roleById = new Map<number, SourceRole>();
  for (const r of ctx.roles) roleById.set(r.id, r);
  const skipped: string[] = [];
  const active: ActiveRole[] = [];
  const grants = [...ctx.grants].sort((a, b) => a.id - b.id);
  for (const g of grants) {
    if (ctx.identity_id !== undefined && g.identity_id !== ctx.identity_id) continue;
    if (g.source_id !== ctx.source_id) continue;
    if (!g.enabled) { skipped.push(`grant ${g.id} disabled`); continue; }
    if (g.expires_at !== null && g.expires_at.getTime() <= ctx.now.getTime()) { skipped.push(`grant ${g.id} expired`); continue; }
    const role = roleById.get(g.role_id);
    if (role === undefined) { skipped.push(`grant ${g.id}: role ${g.role_id} not found`); continue; }
    if (role.source_id !== ctx.source_id) { skipped.push(`grant ${g.id}: role ${role.role_key} belongs to another source`); continue; }
    if (!role.enabled) { skipped.push(`grant ${g.id}: role ${role.role_key} disabled`); continue; }
    active.push({ grant: g, role });
  }
  return { active, skipped };
}

function denied(reason: string, skipped: readonly string[]): SourceRoleDecision {
  return { allowed: false, reason: skipped.length > 0 ? `${reason} (${skipped.join('; ')})` : reason };
}

function decideHttp(active: readonly ActiveRole[], method: string, path: string): RuleMatch | null {
  for (const { grant, role } of active) {
    const rules = role.rules.http;
    for (let i = 0; i < rules.length; i += 1) {
      const rule = rules[i] as HttpRule;
      if (ruleAllowsMethod(rule, method) && pathMatcher(rule)(path)) {
        return { grant_id: grant.id, role_key: role.role_key, rule_index: i, approval: rule.approval };
      }
    }
  }
  return null;
}

function firstSqlRule(active: readonly ActiveRole[], op: Operation, table: string | null): RuleMatch | null {
  for (const { grant, role } of active) {
    const rules = role.rules.sql;
    for (let i = 0; i < rules.length; i += 1) {
      const rule = rules[i] as SqlRule;
      if (!rule.operations.includes(op)) continue;
      if (table !== null && !tableMatcher(rule)(table)) continue;
      const base = { grant_id: grant.id, role_key: role.role_key, rule_index: i, approval: rule.approval ?? 'by_risk' };
      return table === null ? base : { ...base, table };
    }
  }
  return null;
}

/** An entry names the call as written; `nextval` also names `pg_catalog.nextval` (the same function: pg_catalog is searched first). */
function entryNames(entry: string, call: string): boolean {
  return entry === call || (!entry.includes('.') && call === `pg_catalog.${entry}`);
}

function ruleNamesCall(active: readonly ActiveRole[], op: Operation, call: string): boolean {
  for (const { role } of active) {
    for (const rule of role.rules.sql) {
      if (rule.operations.includes(op) && rule.functions?.some((e) => entryNames(e, call)) === true) return true;
    }
  }
  return false;
}

/**
 * Answers whether an identity's grants on one source allow the request. Grants are tried in id order and
 * a role's rules in their stored order; the first rule that allows is reported, so the answer is stable.
 * HTTP: one rule must name the method and match the path. SQL: every table must be covered by a rule
 * allowing the statement's operation (rules of different grants may cover different tables); a statement
 * without tables needs a rule allowing the operation, and every call outside the built-in allowlist needs a rule of
 * that operation naming it. The approval reported is the strictest of the rules used.
 */
export function sourceRoleDecision(ctx: SourceRoleContext, request: SourceRoleRequest): SourceRoleDecision {
  const { active, skipped } = activeRoles(ctx);
  if (active.length === 0) return denied(`no active grant on source ${ctx.source_id}`, skipped);

  if (request.kind === 'http') {
    const method = request.method.toUpperCase();
    const hit = decideHttp(active, method, request.path);
    if (hit === null) {
      const what = WRITE_METHODS.has(method) ? 'write method must be listed explicitly by a rule' : 'no rule matches';
      return denied(`${method} ${request.path} not allowed by any granted role: ${what}`, skipped);
    }
    return { allowed: true, ...hit, matches: [hit], reason: `role ${hit.role_key} (grant ${hit.grant_id}) rule ${hit.rule_index} allows ${method} ${request.path}` };
  }

  if (!(OPERATIONS as readonly string[]).includes(request.operation)) {
    return denied(`unknown SQL operation "${String(request.operation)}"`, skipped);
  }
  // Calls first: when a refused call is why, the reason names it (an escalating call would otherwise hide behind
  // "no role allows admin statements").
  for (const call of request.calls ?? []) {
    if (!ruleNamesCall(active, request.operation, call)) {
      return { ...denied(`call of ${call} is not allowed: not a trusted built-in, and no granted role names it for ${request.operation} statements`, skipped), refusedCall: call };
    }
  }
  const tables: (string | null)[] = request.tables.length === 0 ? [null] : [...new Set(request.tables)];
  const matches: RuleMatch[] = [];
  for (const t of tables) {
    const hit = firstSqlRule(active, request.operation, t);
    if (hit === null) {
      const what = t === null ? `${request.operation} statements` : `${request.operation} on ${t}`;
      return denied(`no granted role allows ${what}`, skipped);
    }
    matches.push(hit);
  }
  const first = matches[0] as RuleMatch;
  let approval: ApprovalMode = first.approval;
  for (const m of matches) if (APPROVAL_WEIGHT[m.approval] > APPROVAL_WEIGHT[approval]) approval = m.approval;
  const covered = request.tables.length === 0 ? 'a statement without tables' : `${matches.length} table(s)`;
  return {
    allowed: true,
    grant_id: first.grant_id,
    role_key: first.role_key,
    rule_index: first.rule_index,
    approval,
    matches,
    reason: `role ${first.role_key} (grant ${first.grant_id}) allows ${request.operation} on ${covered}`,
  };
}
