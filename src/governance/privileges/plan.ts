// Reconciliation plans for managed roles (docs/least-privilege.md): the difference between desired and actual privileges, and the SQL that closes it. Pure: no I/O.
import { atomKey, sortAtoms, type AtomKind, type DesiredPrivileges, type PrivilegeAtom } from './desired.js';
import { quoteIdent } from './quote.js';
import { markViewSql, type MaskedView } from './masking.js';

/** What the source's catalogs say about one managed role (a role whose name starts with the prefix). */
export interface ActualRole {
  readonly name: string;
  readonly atoms: readonly PrivilegeAtom[];
  /** Roles this role is a member of: a managed role must be a member of none (it would inherit their privileges). */
  readonly memberOf: readonly string[];
  /** LOGIN, SUPERUSER, CREATEDB, CREATEROLE, REPLICATION or BYPASSRLS set: each is drift. */
  readonly extraAttributes: readonly string[];
}

/** A view found in a managed role's masking schema, with its comment (the gateway's mark and definition). */
export interface ActualView {
  readonly schema: string;
  readonly name: string;
  readonly comment: string | null;
}

export interface ActualPrivileges {
  readonly roles: ReadonlyMap<string, ActualRole>;
  /** Schemas named like managed roles (masking schemas); absent: none. */
  readonly maskSchemas?: ReadonlySet<string>;
  /** Views in those schemas; absent: none. */
  readonly views?: readonly ActualView[];
  /** Managed roles the sessions' login user may SET ROLE to (it is a member of them). */
  readonly loginMemberOf: ReadonlySet<string>;
}

export interface PlannedGrant {
  readonly role: string;
  readonly atom: PrivilegeAtom;
}

export interface Plan {
  readonly createRoles: readonly string[];
  readonly dropRoles: readonly string[];
  /** Roles whose attributes drifted, with the attributes to take away (ALTER ROLE … NOLOGIN …). */
  readonly resetAttributes: readonly (readonly [string, readonly string[]])[];
  /** [managed role, role it was made a member of]: revoked. */
  readonly revokeMemberships: readonly (readonly [string, string])[];
  /** Managed roles the login user is granted (so its sessions can SET ROLE to them). */
  readonly grantLogin: readonly string[];
  readonly revokes: readonly PlannedGrant[];
  readonly grants: readonly PlannedGrant[];
  /** Masking schemas to create (named after their role) and to drop with what they hold (no role wants them). */
  readonly createSchemas: readonly string[];
  readonly dropSchemas: readonly string[];
  /** Masking views missing or different (`replace`: dropped first; its privileges are then granted again). */
  readonly createViews: readonly (MaskedView & { readonly replace: boolean })[];
  /** Views in a kept masking schema that no role wants: [schema, name]. */
  readonly dropViews: readonly (readonly [string, string])[];
}

export function emptyPlan(plan: Plan): boolean {
  return (
    plan.createRoles.length +
      plan.dropRoles.length +
      plan.resetAttributes.length +
      plan.revokeMemberships.length +
      plan.grantLogin.length +
      plan.revokes.length +
      plan.grants.length +
      plan.createSchemas.length +
      plan.dropSchemas.length +
      plan.createViews.length +
      plan.dropViews.length ===
    0
  );
}

const viewKey = (schema: string, name: string): string => JSON.stringify([schema, name]);

/** Masking schemas and views: what to create, replace and drop; and the views whose privileges a replacement drops. */
function planViews(desired: DesiredPrivileges, actual: ActualPrivileges): Pick<Plan, 'createSchemas' | 'dropSchemas' | 'createViews' | 'dropViews'> & { replaced: Set<string> } {
  const want = [...(desired.views ?? new Map<string, readonly MaskedView[]>()).values()].flat();
  const wantSchemas = new Set(want.map((v) => v.schema));
  const haveSchemas = actual.maskSchemas ?? new Set<string>();
  const have = new Map((actual.views ?? []).map((v) => [viewKey(v.schema, v.name), v]));
  const wantKeys = new Set(want.map((v) => viewKey(v.schema, v.name)));
  const replaced = new Set<string>();
  const createViews: (MaskedView & { replace: boolean })[] = [];
  for (const v of want) {
    const h = have.get(viewKey(v.schema, v.name));
    if (h !== undefined && h.comment === v.comment) continue;
    if (h !== undefined) replaced.add(viewKey(v.schema, v.name));
    createViews.push({ ...v, replace: h !== undefined });
  }
  const dropSchemas = [...haveSchemas].filter((s) => !wantSchemas.has(s)).sort();
  const dropViews = [...have.values()]
    .filter((v) => !wantKeys.has(viewKey(v.schema, v.name)) && wantSchemas.has(v.schema))
    .map((v) => [v.schema, v.name] as const)
    .sort();
  return { createSchemas: [...wantSchemas].filter((s) => !haveSchemas.has(s)).sort(), dropSchemas, createViews, dropViews, replaced };
}

/**
 * Desired against actual. Drift is whatever a managed role holds beyond its desired set (revoked), a membership or
 * attribute it should not have, or a managed-prefix role nobody wants (its privileges revoked, then dropped).
 */
export function planReconciliation(desired: DesiredPrivileges, actual: ActualPrivileges): Plan {
  const createRoles: string[] = [];
  const dropRoles: string[] = [];
  const resetAttributes: [string, string[]][] = [];
  const revokeMemberships: [string, string][] = [];
  const grantLogin: string[] = [];
  const revokes: PlannedGrant[] = [];
  const grants: PlannedGrant[] = [];
  const views = planViews(desired, actual);
  // A replaced view loses its privileges with it: they are neither revoked nor assumed, but granted again.
  const kept = (a: PrivilegeAtom): boolean => a.kind !== 'table' || !views.replaced.has(viewKey(a.schema, a.name));
  const names = [...new Set([...desired.roles.keys(), ...actual.roles.keys()])].sort();
  for (const name of names) {
    const want = desired.roles.get(name);
    const have = actual.roles.get(name);
    if (have === undefined) createRoles.push(name);
    else {
      if (have.extraAttributes.length > 0) resetAttributes.push([name, [...have.extraAttributes].sort()]);
      for (const of of have.memberOf) revokeMemberships.push([name, of]);
    }
    const wantKeys = new Set((want ?? []).map(atomKey));
    const haveAtoms = (have?.atoms ?? []).filter(kept);
    const haveKeys = new Set(haveAtoms.map(atomKey));
    // A table-level REVOKE of a privilege also drops that privilege's column-level grants on the table: those the
    // role should keep are granted again after it.
    const revokedTables = new Set<string>();
    for (const a of haveAtoms) {
      if (wantKeys.has(atomKey(a))) continue;
      revokes.push({ role: name, atom: a });
      if (a.kind === 'table') revokedTables.add(JSON.stringify([a.schema, a.name, a.privilege]));
    }
    for (const a of want ?? []) {
      const regrant = a.kind === 'column' && revokedTables.has(JSON.stringify([a.schema, a.name, a.privilege]));
      if (regrant || !haveKeys.has(atomKey(a))) grants.push({ role: name, atom: a });
    }
    if (want === undefined) dropRoles.push(name);
    else if (!actual.loginMemberOf.has(name)) grantLogin.push(name);
  }
  const { replaced: _replaced, ...viewPlan } = views;
  return { createRoles, dropRoles, resetAttributes, revokeMemberships, grantLogin, revokes, grants, ...viewPlan };
}


export { quoteIdent } from './quote.js';

const OBJECT_WORD: Readonly<Record<AtomKind, string>> = {
  database: 'DATABASE',
  schema: 'SCHEMA',
  table: 'TABLE',
  column: 'TABLE',
  sequence: 'SEQUENCE',
  function: 'FUNCTION',
};

function objectName(a: PrivilegeAtom): string {
  switch (a.kind) {
    case 'database':
    case 'schema':
      return quoteIdent(a.name);
    case 'function':
      return a.name; // regprocedure text: already quoted as PostgreSQL prints it
    default:
      return `${quoteIdent(a.schema)}.${quoteIdent(a.name)}`;
  }
}

/**
 * GRANT/REVOKE statements, grouped so a large plan stays a few hundred statements: one per (role, object kind,
 * privilege set) listing every object with that set, one per table for column privileges.
 */
function privilegeStatements(verb: 'GRANT' | 'REVOKE', items: readonly PlannedGrant[]): string[] {
  const out: string[] = [];
  const byRole = new Map<string, PrivilegeAtom[]>();
  for (const { role, atom } of items) {
    let l = byRole.get(role);
    if (l === undefined) byRole.set(role, (l = []));
    l.push(atom);
  }
  const dir = verb === 'GRANT' ? 'TO' : 'FROM';
  for (const [role, atoms] of [...byRole].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const objects = new Map<string, { kind: AtomKind; object: string; privs: Set<string>; columns: Map<string, Set<string>> }>();
    for (const a of sortAtoms(atoms)) {
      const object = objectName(a);
      const k = `${OBJECT_WORD[a.kind]} ${object}`;
      let o = objects.get(k);
      if (o === undefined) objects.set(k, (o = { kind: a.kind, object, privs: new Set(), columns: new Map() }));
      if (a.kind === 'column') {
        let cols = o.columns.get(a.privilege);
        if (cols === undefined) o.columns.set(a.privilege, (cols = new Set()));
        cols.add(a.column);
      } else o.privs.add(a.privilege);
    }
    const groups = new Map<string, string[]>();
    for (const o of objects.values()) {
      if (o.privs.size > 0) {
        const g = `${[...o.privs].sort().join(', ')} ON ${OBJECT_WORD[o.kind]}`;
        let l = groups.get(g);
        if (l === undefined) groups.set(g, (l = []));
        l.push(o.object);
      }
      for (const [priv, cols] of o.columns) {
        out.push(`${verb} ${priv} (${[...cols].map(quoteIdent).join(', ')}) ON TABLE ${o.object} ${dir} ${quoteIdent(role)}`);
      }
    }
    for (const [g, objs] of groups) {
      for (let i = 0; i < objs.length; i += 500) out.push(`${verb} ${g} ${objs.slice(i, i + 500).join(', ')} ${dir} ${quoteIdent(role)}`);
    }
  }
  return out;
}

/**
 * The plan as statements, in an order that works in one transaction: roles created, drift undone (attributes,
 * memberships, extra privileges — revokes before grants, as a table-level REVOKE also drops column privileges), the
 * desired privileges granted, the login user made a member, unwanted roles dropped last.
 */
export function planStatements(plan: Plan, loginUser: string): string[] {
  const out: string[] = [];
  for (const r of plan.createRoles) out.push(`CREATE ROLE ${quoteIdent(r)} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS`);
  // Masking schemas and views before the grants on them; owned by the privilege admin, so a view reads its table with
  // the admin's privileges and the role needs none on the masked base columns.
  for (const s of plan.createSchemas) out.push(`CREATE SCHEMA ${quoteIdent(s)}`);
  for (const v of plan.createViews) {
    if (v.replace) out.push(`DROP VIEW ${quoteIdent(v.schema)}.${quoteIdent(v.name)}`);
    out.push(v.create, markViewSql(v));
  }
  // Only the attributes that drifted: taking SUPERUSER away needs a superuser, and the admin is not one (that drift
  // then fails the reconciliation: fail closed).
  for (const [r, attrs] of plan.resetAttributes) out.push(`ALTER ROLE ${quoteIdent(r)} ${attrs.map((a) => `NO${a}`).join(' ')}`);
  for (const [r, of] of plan.revokeMemberships) out.push(`REVOKE ${quoteIdent(of)} FROM ${quoteIdent(r)}`);
  out.push(...privilegeStatements('REVOKE', plan.revokes));
  out.push(...privilegeStatements('GRANT', plan.grants));
  for (const r of plan.grantLogin) out.push(`GRANT ${quoteIdent(r)} TO ${quoteIdent(loginUser)}`);
  for (const [s, n] of plan.dropViews) out.push(`DROP VIEW ${quoteIdent(s)}.${quoteIdent(n)}`);
  // Only schemas named like a managed role (catalog.ts reads no other): what they hold is the gateway's own views.
  for (const s of plan.dropSchemas) out.push(`DROP SCHEMA ${quoteIdent(s)} CASCADE`);
  for (const r of plan.dropRoles) out.push(`DROP ROLE ${quoteIdent(r)}`);
  return out;
}

/** A short, secret-free summary for the audit entry and the dry-run answer. */
export function planSummary(plan: Plan): Record<string, number> {
  return {
    create_roles: plan.createRoles.length,
    drop_roles: plan.dropRoles.length,
    reset_attributes: plan.resetAttributes.length,
    revoke_memberships: plan.revokeMemberships.length,
    grant_login: plan.grantLogin.length,
    revokes: plan.revokes.length,
    grants: plan.grants.length,
    create_schemas: plan.createSchemas.length,
    drop_schemas: plan.dropSchemas.length,
    create_views: plan.createViews.length,
    drop_views: plan.dropViews.length,
  };
}
