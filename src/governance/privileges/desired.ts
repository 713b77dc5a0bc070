// Desired database privileges of managed roles (docs/least-privilege.md): the grants PostgreSQL itself must hold so it refuses what the gateway's rules and deny policies refuse. Pure: no I/O.
//
// API: `desiredPrivileges(input)` answers, for one source, the managed roles (one per source role, one per identity
// whose privileges differ from every role it is granted, one base role with CONNECT only), each role's privileges as
// `PrivilegeAtom`s, and the role every identity's sessions run as. `atomKey` gives an atom its identity for diffs.
import { compileGlobs, GLOB_SEP, type Matcher } from '../policy/glob.js';
import { candidatesFor, evaluate, type CompiledPolicySet, type Operation } from '../policy/index.js';
import { activeRoles, type Grant, type SourceRole, type SqlRule } from '../source-roles.js';

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
}

export interface DesiredPrivileges {
  /** Managed role name → its privileges (sorted by atomKey). */
  readonly roles: ReadonlyMap<string, readonly PrivilegeAtom[]>;
  /** Identity id → the managed role its sessions `SET ROLE` to. Identities absent here get `baseRole`. */
  readonly sessionRoles: ReadonlyMap<number, string>;
  /** CONNECT only: the role of identities without an active grant. */
  readonly baseRole: string;
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

/** The privileges the SQL rules give `who`, less every table or column a deny policy refuses `who`. */
function atomsFor(ctx: Ctx, rules: readonly SqlRule[], who: Who): PrivilegeAtom[] {
  const { structure } = ctx.input;
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
      if (allowed.length === rel.columns.length) out.push({ kind: 'table', schema: rel.schema, name: rel.name, column: '', privilege: 'SELECT' });
      else for (const c of allowed) out.push({ kind: 'column', schema: rel.schema, name: rel.name, column: c, privilege: 'SELECT' });
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
  return sortAtoms(out);
}

function sameAtoms(a: readonly PrivilegeAtom[], b: readonly PrivilegeAtom[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (atomKey(a[i]!) !== atomKey(b[i]!)) return false;
  return true;
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
  const roleAtoms = new Map<number, readonly PrivilegeAtom[]>();
  for (const r of ownRoles) {
    const atoms = atomsFor(ctx, r.rules.sql, NOBODY);
    roleAtoms.set(r.id, atoms);
    roles.set(sourceRoleName(input.prefix, r.role_key), atoms);
  }
  const sessionRoles = new Map<number, string>();
  const identities = [...input.identities].filter((i) => i.enabled).sort((a, b) => a.id - b.id);
  for (const identity of identities) {
    const { active } = activeRoles({ source_id: input.sourceId, identity_id: identity.id, grants: input.grants, roles: ownRoles, now: input.now });
    if (active.length === 0) continue;
    const who = { id: identity.id, roles: [...identity.roles], team: identity.team };
    const atoms = atomsFor(ctx, active.flatMap((a) => a.role.rules.sql), who);
    const same = [...new Set(active.map((a) => a.role))].sort((a, b) => a.id - b.id).find((r) => sameAtoms(roleAtoms.get(r.id)!, atoms));
    if (same !== undefined) {
      sessionRoles.set(identity.id, sourceRoleName(input.prefix, same.role_key));
    } else {
      const own = identityRoleName(input.prefix, identity.id);
      roles.set(own, atoms);
      sessionRoles.set(identity.id, own);
    }
  }
  return { roles, sessionRoles, baseRole };
}
