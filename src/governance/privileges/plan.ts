// Reconciliation plans for managed roles (docs/least-privilege.md): the difference between desired and actual privileges, and the SQL that closes it. Pure: no I/O.
import { atomKey, sortAtoms, type AtomKind, type DesiredPrivileges, type PrivilegeAtom } from './desired.js';

/** What the source's catalogs say about one managed role (a role whose name starts with the prefix). */
export interface ActualRole {
  readonly name: string;
  readonly atoms: readonly PrivilegeAtom[];
  /** Roles this role is a member of: a managed role must be a member of none (it would inherit their privileges). */
  readonly memberOf: readonly string[];
  /** LOGIN, SUPERUSER, CREATEDB, CREATEROLE, REPLICATION or BYPASSRLS set: each is drift. */
  readonly extraAttributes: readonly string[];
}

export interface ActualPrivileges {
  readonly roles: ReadonlyMap<string, ActualRole>;
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
}

export function emptyPlan(plan: Plan): boolean {
  return (
    plan.createRoles.length + plan.dropRoles.length + plan.resetAttributes.length + plan.revokeMemberships.length + plan.grantLogin.length + plan.revokes.length + plan.grants.length ===
    0
  );
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
    const haveKeys = new Set((have?.atoms ?? []).map(atomKey));
    // A table-level REVOKE of a privilege also drops that privilege's column-level grants on the table: those the
    // role should keep are granted again after it.
    const revokedTables = new Set<string>();
    for (const a of have?.atoms ?? []) {
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
  return { createRoles, dropRoles, resetAttributes, revokeMemberships, grantLogin, revokes, grants };
}

/** Double-quoted identifier, as quote_ident would produce. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

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
  // Only the attributes that drifted: taking SUPERUSER away needs a superuser, and the admin is not one (that drift
  // then fails the reconciliation: fail closed).
  for (const [r, attrs] of plan.resetAttributes) out.push(`ALTER ROLE ${quoteIdent(r)} ${attrs.map((a) => `NO${a}`).join(' ')}`);
  for (const [r, of] of plan.revokeMemberships) out.push(`REVOKE ${quoteIdent(of)} FROM ${quoteIdent(r)}`);
  out.push(...privilegeStatements('REVOKE', plan.revokes));
  out.push(...privilegeStatements('GRANT', plan.grants));
  for (const r of plan.grantLogin) out.push(`GRANT ${quoteIdent(r)} TO ${quoteIdent(loginUser)}`);
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
  };
}
