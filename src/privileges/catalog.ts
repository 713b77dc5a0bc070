// What a PostgreSQL source's own catalogs say for managed privileges: the structure grants are expressed against, and every privilege, membership and attribute of the managed roles (pg_class.relacl, pg_attribute.attacl, pg_namespace.nspacl, pg_proc.proacl, pg_database.datacl, pg_auth_members).
import type pg from 'pg';
import type { PrivilegeAtom, PrivilegeFunction, PrivilegeRelation, PrivilegeStructure, RelationKind } from '../governance/privileges/desired.js';
import type { ActualPrivileges, ActualRole, ActualView } from '../governance/privileges/plan.js';
import { viewFingerprintSql } from '../governance/privileges/masking.js';

/** Relations read at most: a source past it is not reconciled (fail closed), as column governance refuses it. */
export const MAX_RELATIONS = 100_000;
const MAX_FUNCTIONS = 50_000;

const KINDS: Readonly<Record<string, RelationKind>> = { r: 'table', v: 'view', m: 'matview', f: 'foreign', p: 'partitioned' };

/** Schemas no grant of a managed role is about: PostgreSQL's own. */
const SYSTEM_SCHEMAS = `n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg\\_toast%' and n.nspname not like 'pg\\_temp\\_%'`;

// The managed roles' masking schemas ($1: the managed-role pattern) are the gateway's own views, not the source's structure.
const STRUCTURE_SQL = `select n.nspname as schema, c.relname as name, c.relkind::text as relkind,
  coalesce((select pg_catalog.json_agg(a.attname order by a.attnum) from pg_catalog.pg_attribute a
            where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '[]')::text as columns,
  coalesce((select pg_catalog.json_agg(pg_catalog.format_type(a.atttypid, a.atttypmod) order by a.attnum) from pg_catalog.pg_attribute a
            where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '[]')::text as types,
  coalesce((select pg_catalog.json_agg(pg_catalog.json_build_array(sn.nspname, s.relname))
            from pg_catalog.pg_depend d join pg_catalog.pg_class s on s.oid = d.objid and s.relkind = 'S'
            join pg_catalog.pg_namespace sn on sn.oid = s.relnamespace
            where d.refobjid = c.oid and d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
              and d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass and d.deptype = 'a'), '[]')::text as sequences
from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'v', 'm', 'f', 'p') and ${SYSTEM_SCHEMAS} and n.nspname !~ $1
order by 1, 2 limit ${MAX_RELATIONS + 1}`;

const FUNCTIONS_SQL = `select n.nspname as schema, p.proname as name, p.oid::pg_catalog.regprocedure::text as signature
from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
where ${SYSTEM_SCHEMAS} order by 1, 3 limit ${MAX_FUNCTIONS}`;

/** The managed roles: the three name forms of governance/privileges/desired.ts under the prefix, nothing else. */
export function managedRolePattern(prefix: string): string {
  return `^${prefix.replace(/[^a-z0-9_]/g, '')}(r_.+|i_[0-9]+|base)$`;
}

const ROLES_SQL = `select r.rolname as name,
  array_remove(array[case when r.rolcanlogin then 'LOGIN' end, case when r.rolsuper then 'SUPERUSER' end,
    case when r.rolcreatedb then 'CREATEDB' end, case when r.rolcreaterole then 'CREATEROLE' end,
    case when r.rolreplication then 'REPLICATION' end, case when r.rolbypassrls then 'BYPASSRLS' end], null)::text[] as extra,
  array(select g.rolname::text from pg_catalog.pg_auth_members m join pg_catalog.pg_roles g on g.oid = m.roleid where m.member = r.oid order by 1)::text[] as member_of,
  exists(select 1 from pg_catalog.pg_auth_members m join pg_catalog.pg_roles u on u.oid = m.member where m.roleid = r.oid and u.rolname = $2) as login_member
from pg_catalog.pg_roles r where r.rolname ~ $1`;

/** Every privilege held by a managed role, one row per (object, privilege), in the atoms' shape. */
const ACL_SQL = `with r as (select oid, rolname from pg_catalog.pg_roles where rolname ~ $1)
select r.rolname as role, case when c.relkind = 'S' then 'sequence' else 'table' end as kind, n.nspname as schema, c.relname as name, '' as col, a.privilege_type as privilege
  from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
  cross join lateral pg_catalog.aclexplode(c.relacl) a join r on r.oid = a.grantee
  where c.relkind in ('r', 'v', 'm', 'f', 'p', 'S')
union all
select r.rolname, 'column', n.nspname, c.relname, att.attname, a.privilege_type
  from pg_catalog.pg_attribute att join pg_catalog.pg_class c on c.oid = att.attrelid join pg_catalog.pg_namespace n on n.oid = c.relnamespace
  cross join lateral pg_catalog.aclexplode(att.attacl) a join r on r.oid = a.grantee
  where att.attnum > 0 and not att.attisdropped
union all
select r.rolname, 'schema', n.nspname, n.nspname, '', a.privilege_type
  from pg_catalog.pg_namespace n cross join lateral pg_catalog.aclexplode(n.nspacl) a join r on r.oid = a.grantee
union all
select r.rolname, 'database', '', d.datname, '', a.privilege_type
  from pg_catalog.pg_database d cross join lateral pg_catalog.aclexplode(d.datacl) a join r on r.oid = a.grantee
  where d.datname = pg_catalog.current_database()
union all
select r.rolname, 'function', n.nspname, p.oid::pg_catalog.regprocedure::text, '', a.privilege_type
  from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
  cross join lateral pg_catalog.aclexplode(p.proacl) a join r on r.oid = a.grantee`;

/** Every relation in a masking schema (schemas named like a managed role), with its comment: the gateway's mark and definition. */
// The comment counts only while the fingerprint written after it still matches the view (masking.ts markViewSql):
// a view replaced or altered by hand reads back without one, so it is drift and is made again.
const MASK_VIEWS_SQL = `select n.nspname as schema, c.relname as name,
  case when c.relkind = 'v' and pg_catalog.split_part(pg_catalog.obj_description(c.oid, 'pg_class'), E'\\n', 2) = ${viewFingerprintSql('c.oid')}
       then pg_catalog.split_part(pg_catalog.obj_description(c.oid, 'pg_class'), E'\\n', 1) end as comment
from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
where n.nspname ~ $1 and c.relkind in ('r', 'v', 'm', 'f', 'p')`;

interface StructureRow {
  schema: string;
  name: string;
  relkind: string;
  columns: string;
  types: string;
  sequences: string;
}

export async function readStructure(client: pg.Client, prefix: string): Promise<PrivilegeStructure> {
  const db = await client.query<{ d: string }>('select pg_catalog.current_database() as d');
  const rels = await client.query<StructureRow>(STRUCTURE_SQL, [managedRolePattern(prefix)]);
  if (rels.rows.length > MAX_RELATIONS) throw new Error(`the source has more than ${MAX_RELATIONS} relations`);
  const relations: PrivilegeRelation[] = rels.rows.map((r) => ({
    schema: r.schema,
    name: r.name,
    kind: KINDS[r.relkind] ?? 'table',
    columns: JSON.parse(r.columns) as string[],
    types: JSON.parse(r.types) as string[],
    sequences: JSON.parse(r.sequences) as [string, string][],
  }));
  const fns = await client.query<PrivilegeFunction>(FUNCTIONS_SQL);
  return { database: db.rows[0]!.d, relations, functions: fns.rows };
}

export async function readActual(client: pg.Client, prefix: string, loginUser: string): Promise<ActualPrivileges> {
  const pattern = managedRolePattern(prefix);
  const roles = await client.query<{ name: string; extra: string[]; member_of: string[]; login_member: boolean }>(ROLES_SQL, [pattern, loginUser]);
  const acl = await client.query<{ role: string; kind: PrivilegeAtom['kind']; schema: string; name: string; col: string; privilege: string }>(ACL_SQL, [pattern]);
  const atoms = new Map<string, PrivilegeAtom[]>();
  for (const a of acl.rows) {
    let l = atoms.get(a.role);
    if (l === undefined) atoms.set(a.role, (l = []));
    l.push({ kind: a.kind, schema: a.schema, name: a.name, column: a.col, privilege: a.privilege as PrivilegeAtom['privilege'] });
  }
  const out = new Map<string, ActualRole>();
  const loginMemberOf = new Set<string>();
  for (const r of roles.rows) {
    out.set(r.name, { name: r.name, atoms: atoms.get(r.name) ?? [], memberOf: r.member_of, extraAttributes: r.extra });
    if (r.login_member) loginMemberOf.add(r.name);
  }
  const schemas = await client.query<{ name: string }>('select nspname as name from pg_catalog.pg_namespace where nspname ~ $1', [pattern]);
  const views = await client.query<ActualView>(MASK_VIEWS_SQL, [pattern]);
  return { roles: out, loginMemberOf, maskSchemas: new Set(schemas.rows.map((r) => r.name)), views: views.rows };
}
