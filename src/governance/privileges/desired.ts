// Desired database privileges of managed roles (docs/least-privilege.md): the grants PostgreSQL itself must hold so it refuses what the gateway's rules and deny policies refuse. Pure: no I/O.
//
// API: `desiredPrivileges(input)` answers, for one source, the managed roles (one per source role, one per identity
// whose privileges differ from every role it is granted, one base role with CONNECT only), each role's privileges as
// `PrivilegeAtom`s, and the role every identity's sessions run as. `atomKey` gives an atom its identity for diffs.
import { compileGlobs, GLOB_SEP, type Matcher } from '../policy/glob.js';
import { candidatesFor, evaluate, type CompiledPolicySet, type Operation } from '../policy/index.js';
import { activeRoles, type Grant, type SourceRole, type SqlRule } from '../source-roles.js';
import { joinName } from '../sql/names.js';
import { DEFAULT_SCHEMA } from '../sql/types.js';
import { redactedColumnMatcher } from '../sql/result-columns.js';
import { maskedView, maskExpression, type MaskSpec, type MaskedView } from './masking.js';

export type AtomKind = 'database' | 'schema' | 'table' | 'column' | 'sequence' | 'function';
export type AtomPrivilege = 'CONNECT' | 'USAGE' | 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE' | 'EXECUTE';

/**
 * One privilege on one object. `schema`/`name` name the object (`name` of a function is its regprocedure signature,
 * of the database its name; `schema` is '' for both); `column` only for column privileges.
 */
export interface PrivilegeAtom {
  readonly kind: AtomKind;
  readonly schema: string;
  readonly name: string;
  readonly column: string;
  readonly privilege: AtomPrivilege;
}

export type RelationKind = 'table' | 'view' | 'matview' | 'foreign' | 'partitioned';

export interface PrivilegeRelation {
  readonly schema: string;
  readonly name: string;
  readonly kind: RelationKind;
  /** Visible columns in attnum order. */
  readonly columns: readonly string[];
  /** Each column's type as `format_type` prints it (masked reads choose a mask by it); absent: every mask is NULL-typed text. */
  readonly types?: readonly string[];
  /** Sequences owned by the relation's columns (serial defaults), `[schema, name]`: an INSERT needs USAGE on them. */
  readonly sequences: readonly (readonly [string, string])[];
}

export interface PrivilegeFunction {
  readonly schema: string;
  readonly name: string;
  /** `oid::regprocedure` text: the spelling GRANT … ON FUNCTION takes. */
  readonly signature: string;
}

/** What grants can be expressed against: the source's own structure (schemas other than pg_catalog/information_schema). */
export interface PrivilegeStructure {
  readonly database: string;
  readonly relations: readonly PrivilegeRelation[];
  readonly functions: readonly PrivilegeFunction[];
}

export interface PrivilegeIdentity {
  readonly id: number;
  readonly roles: readonly string[];
  readonly team: string | null;
  readonly enabled: boolean;
}

export interface DesiredInput {
  readonly sourceId: string;
  /** Managed role names start with it (validated by the source configuration: lower-case letters, digits, `_`). */
  readonly prefix: string;
  readonly structure: PrivilegeStructure;
  readonly roles: readonly SourceRole[];
  readonly grants: readonly Grant[];
  readonly identities: readonly PrivilegeIdentity[];
  readonly policies: CompiledPolicySet;
  readonly now: Date;
  /**
   * Masked reads (the source's `masked_reads`): columns a policy redacts for a role are left out of its base-table
   * privileges and read through a masking view instead (masking.ts). Off: redaction stays the gateway's alone.
   */
  readonly maskedReads?: boolean;
  /** The catalog's confirmed classifications: column (`schema.table.column`) → tags, and tag → columns (`redact_classified`). */
  readonly classified?: { readonly columnTags: ReadonlyMap<string, readonly string[]>; readonly byTag: ReadonlyMap<string, readonly string[]> };
}

export interface DesiredPrivileges {
  /** Managed role name → its privileges (sorted by atomKey). */
  readonly roles: ReadonlyMap<string, readonly PrivilegeAtom[]>;
  /** Identity id → the managed role its sessions `SET ROLE` to. Identities absent here get `baseRole`. */
  readonly sessionRoles: ReadonlyMap<number, string>;
  /** CONNECT only: the role of identities without an active grant. */
  readonly baseRole: string;
  /** Managed role name → its masking views (masked reads only; roles without any are absent; absent: none). */
  readonly views?: ReadonlyMap<string, readonly MaskedView[]>;
}

/** Stable identity of an atom (diffs, sets, sorting). */
export function atomKey(a: PrivilegeAtom): string {
  return JSON.stringify([a.kind, a.schema, a.name, a.column, a.privilege]);
}

export function sortAtoms(atoms: Iterable<PrivilegeAtom>): PrivilegeAtom[] {
  const byKey = new Map<string, PrivilegeAtom>();
  for (const a of atoms) byKey.set(atomKey(a), a);
  return [...byKey.keys()].sort().map((k) => byKey.get(k)!);
}

export const MAX_ROLE_NAME_BYTES = 63;

export function sourceRoleName(prefix: string, roleKey: string): string {
  return boundedName(`${prefix}r_${roleKey.toLowerCase().replace(/[^a-z0-9_]/g, '_')}`, roleKey);
}

export function identityRoleName(prefix: string, identityId: number): string {
  return `${prefix}i_${identityId}`;
}

export function baseRoleName(prefix: string): string {
  return `${prefix}base`;
}

/** Names past PostgreSQL's 63 bytes would be truncated (and could collide): the tail becomes a hash of the key. */
function boundedName(name: string, key: string): string {
  if (name.length <= MAX_ROLE_NAME_BYTES) return name;
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193) >>> 0;
  const tail = `_${h.toString(16).padStart(8, '0')}`;
  return name.slice(0, MAX_ROLE_NAME_BYTES - tail.length) + tail;
}

/** The identity a source role's own managed role is computed for: no id, role, or team, so only unconditional policies apply. */
interface Who {
  readonly id: number;
  readonly roles: readonly string[];
  readonly team: string | null;
}
const NOBODY: Who = { id: -1, roles: [], team: null };

const WRITE_PRIVILEGES: readonly AtomPrivilege[] = ['INSERT', 'UPDATE', 'DELETE'];

const tableMatchers = new WeakMap<SqlRule, Matcher>();
function tableMatcher(rule: SqlRule): Matcher {
  let m = tableMatchers.get(rule);
  if (m === undefined) tableMatchers.set(rule, (m = compileGlobs(rule.tables, GLOB_SEP.table)));
  return m;
}

/** Whether any policy that may apply to reads on this source conditions on columns (then each column is decided on its own). */
function columnPoliciesFor(set: CompiledPolicySet, sourceId: string): boolean {
  return candidatesFor(set, sourceId, 'read').some((p) => p.conditions.columns !== undefined);
}

interface Ctx {
  readonly input: DesiredInput;
  readonly columnPolicies: boolean;
}

/** The gateway's own decision for one read or write of a table (and column), as the policy stage would take it. */
function denies(ctx: Ctx, who: Who, operation: Operation, table: string, column: string | null): boolean {
  const d = evaluate(ctx.input.policies, {
    identity: who,
    source_id: ctx.input.sourceId,
    operation,
    tables: [table],
    columns: column === null ? [] : [`${table}.${column}`],
    classification_tags: [],
    roleDecision: { allowed: true },
  });
  return d.effect === 'deny';
}

function entryNamesFunction(entry: string, f: PrivilegeFunction): boolean {
  const parts = entry.split('.');
  if (parts.length === 1) return f.name === entry && (f.schema === 'public' || f.schema === 'pg_catalog');
  if (parts.length === 2) return f.schema === parts[0] && f.name === parts[1];
  return false;
}

/** The columns of a table that the policies redact on reads by `who` (their redact_columns and redact_classified obligations). */
function redactedColumns(ctx: Ctx, who: Who, rel: PrivilegeRelation, table: string, columns: readonly string[]): Set<string> {
  const qualified = columns.map((c) => joinName(rel.schema, rel.name, c));
  const d = evaluate(ctx.input.policies, {
    identity: who,
    source_id: ctx.input.sourceId,
    operation: 'read',
    tables: [table],
    columns: qualified,
    classification_tags: [],
    classified: ctx.input.classified?.byTag,
    roleDecision: { allowed: true },
  });
  const globs = d.effect === 'deny' ? [] : d.obligations.redact_columns;
  if (globs.length === 0) return new Set();
  const redacted = redactedColumnMatcher(globs);
  return new Set(columns.filter((_, i) => redacted(qualified[i]!)));
}

/** One table's masking view for `who`: every allowed column, the redacted ones through their masks. */
function maskSpec(ctx: Ctx, rel: PrivilegeRelation, allowed: readonly string[], masked: ReadonlySet<string>): MaskSpec {
  return {
    schema: rel.schema,
    name: rel.name,
    columns: allowed.map((c) => {
      if (!masked.has(c)) return { name: c, mask: null };
      const i = rel.columns.indexOf(c);
      const type = rel.types?.[i] ?? 'text';
      return { name: c, mask: maskExpression(c, type, ctx.input.classified?.columnTags.get(joinName(rel.schema, rel.name, c)) ?? []) };
    }),
  };
}

interface RoleSet {
  readonly atoms: PrivilegeAtom[];
  /** Masking views to create for the role (its name decides their schema: see withViews). */
  readonly masks: readonly MaskSpec[];
}

/**
 * The privileges the SQL rules give `who`, less every table or column a deny policy refuses `who`; with masked
 * reads, less the base columns a policy redacts for `who`, which it reads through a masking view instead.
 */
function atomsFor(ctx: Ctx, rules: readonly SqlRule[], who: Who): RoleSet {
  const { structure } = ctx.input;
  const masks: MaskSpec[] = [];
  const out: PrivilegeAtom[] = [{ kind: 'database', schema: '', name: structure.database, column: '', privilege: 'CONNECT' }];
  const schemas = new Set<string>();
  for (const rel of structure.relations) {
    const q = `${rel.schema}.${rel.name}`;
    let read = false;
    let write = false;
    for (const rule of rules) {
      if (!tableMatcher(rule)(q)) continue;
      read ||= rule.operations.includes('read');
      write ||= rule.operations.includes('write');
    }
    let any = false;
    if (read && !denies(ctx, who, 'read', q, null)) {
      const allowed = ctx.columnPolicies ? rel.columns.filter((c) => !denies(ctx, who, 'read', q, c)) : rel.columns;
      const masked = ctx.input.maskedReads === true && allowed.length > 0 ? redactedColumns(ctx, who, rel, q, allowed) : new Set<string>();
      const plain = masked.size === 0 ? allowed : allowed.filter((c) => !masked.has(c));
      if (plain.length === rel.columns.length) out.push({ kind: 'table', schema: rel.schema, name: rel.name, column: '', privilege: 'SELECT' });
      else for (const c of plain) out.push({ kind: 'column', schema: rel.schema, name: rel.name, column: c, privilege: 'SELECT' });
      // Views mirror the schema unqualified names are governed in (the masking schema stands in front of it in the
      // upstream search_path): elsewhere a redacted column is simply not granted, and the database refuses it.
      if (masked.size > 0 && rel.schema === DEFAULT_SCHEMA) masks.push(maskSpec(ctx, rel, allowed, masked));
      any ||= allowed.length > 0;
    }
    // A materialized view cannot be written; DDL and admin operations have no grant (they need ownership).
    if (write && rel.kind !== 'matview' && !denies(ctx, who, 'write', q, null)) {
      for (const p of WRITE_PRIVILEGES) out.push({ kind: 'table', schema: rel.schema, name: rel.name, column: '', privilege: p });
      for (const [s, n] of rel.sequences) {
        out.push({ kind: 'sequence', schema: s, name: n, column: '', privilege: 'USAGE' });
        schemas.add(s);
      }
      any = true;
    }
    if (any) schemas.add(rel.schema);
  }
  const named = rules.flatMap((r) => r.functions ?? []);
  if (named.length > 0) {
    for (const f of structure.functions) {
      if (f.schema === 'pg_catalog' || !named.some((e) => entryNamesFunction(e, f))) continue;
      out.push({ kind: 'function', schema: f.schema, name: f.signature, column: '', privilege: 'EXECUTE' });
      schemas.add(f.schema);
    }
  }
  for (const s of schemas) out.push({ kind: 'schema', schema: s, name: s, column: '', privilege: 'USAGE' });
  return { atoms: sortAtoms(out), masks };
}

function sameSet(a: RoleSet, b: RoleSet): boolean {
  if (a.atoms.length !== b.atoms.length || JSON.stringify(a.masks) !== JSON.stringify(b.masks)) return false;
  for (let i = 0; i < a.atoms.length; i++) if (atomKey(a.atoms[i]!) !== atomKey(b.atoms[i]!)) return false;
  return true;
}

/** A role's final privileges: its set, plus USAGE on its masking schema (named after it) and SELECT on its views. */
function withViews(role: string, set: RoleSet, views: Map<string, readonly MaskedView[]>): readonly PrivilegeAtom[] {
  if (set.masks.length === 0) return set.atoms;
  const made = set.masks.map((m) => maskedView(role, m));
  views.set(role, made);
  return sortAtoms([
    ...set.atoms,
    { kind: 'schema', schema: role, name: role, column: '', privilege: 'USAGE' },
    ...made.map((v): PrivilegeAtom => ({ kind: 'table', schema: v.schema, name: v.name, column: '', privilege: 'SELECT' })),
  ]);
}

/**
 * The managed roles of one source and their privileges:
 * - one role per enabled source role (`<prefix>r_<role_key>`): its SQL rules' tables (globs expanded against the
 *   structure) with SELECT for `read`, INSERT/UPDATE/DELETE for `write`, less what unconditional deny policies refuse;
 * - per identity with an active grant, the union of its roles' rules less what deny policies refuse *that identity*
 *   (by id, role or team, at any priority the gateway would let decide); when that equals one of its roles' sets, its
 *   sessions use that role, otherwise a role of its own (`<prefix>i_<id>`);
 * - `<prefix>base`: CONNECT only, for identities without an active grant.
 * Every role has CONNECT on the database and USAGE on the schemas of what it may touch; columns a deny policy names
 * are left out of a column-level SELECT; EXECUTE only on non-system functions a rule names.
 */
export function desiredPrivileges(input: DesiredInput): DesiredPrivileges {
  const ctx: Ctx = { input, columnPolicies: columnPoliciesFor(input.policies, input.sourceId) };
  const roles = new Map<string, readonly PrivilegeAtom[]>();
  const baseRole = baseRoleName(input.prefix);
  roles.set(baseRole, [{ kind: 'database', schema: '', name: input.structure.database, column: '', privilege: 'CONNECT' }]);
  const ownRoles = [...input.roles].filter((r) => r.source_id === input.sourceId && r.enabled).sort((a, b) => a.id - b.id);
  const views = new Map<string, readonly MaskedView[]>();
  const roleSets = new Map<number, RoleSet>();
  for (const r of ownRoles) {
    const set = atomsFor(ctx, r.rules.sql, NOBODY);
    roleSets.set(r.id, set);
    const name = sourceRoleName(input.prefix, r.role_key);
    roles.set(name, withViews(name, set, views));
  }
  const sessionRoles = new Map<number, string>();
  const identities = [...input.identities].filter((i) => i.enabled).sort((a, b) => a.id - b.id);
  for (const identity of identities) {
    const { active } = activeRoles({ source_id: input.sourceId, identity_id: identity.id, grants: input.grants, roles: ownRoles, now: input.now });
    if (active.length === 0) continue;
    const who = { id: identity.id, roles: [...identity.roles], team: identity.team };
    const set = atomsFor(ctx, active.flatMap((a) => a.role.rules.sql), who);
    const same = [...new Set(active.map((a) => a.role))].sort((a, b) => a.id - b.id).find((r) => sameSet(roleSets.get(r.id)!, set));
    if (same !== undefined) {
      sessionRoles.set(identity.id, sourceRoleName(input.prefix, same.role_key));
    } else {
      const own = identityRoleName(input.prefix, identity.id);
      roles.set(own, withViews(own, set, views));
      sessionRoles.set(identity.id, own);
    }
  }
  return { roles, sessionRoles, baseRole, views };
}
