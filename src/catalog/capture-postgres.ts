// Captures a PostgreSQL source's structure from its system catalogs (structure only, never a row of user data) within the per-scan caps of spec §8.
//
// The queries read pg_namespace, pg_class, pg_attribute, pg_constraint and pg_inherits only: every role may read them,
// so a scanning role without SELECT on any table still captures everything (docs/catalog.md "What a scan reads").
// They run in one READ ONLY transaction with a statement timeout. Order is by name in the "C" collation, so which
// part a cap leaves unreached is the same on every scan and the diff can tell "unreached" from "removed".
import type pg from 'pg';
import type { CapName, CatalogColumn, CatalogRelation, CatalogSchema, CatalogStructure, ForeignKey, RelationKind } from './model.js';
import { pathOf } from './model.js';

export interface CatalogCaps {
  readonly max_nodes: number;
  readonly max_schemas: number;
  readonly max_tables: number;
  readonly max_columns_per_table: number;
}

const SCHEMAS_QUERY = `select n.oid::text as oid, n.nspname as name
from pg_catalog.pg_namespace n
where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
  and n.nspname not like 'pg\\_temp\\_%' and n.nspname not like 'pg\\_toast\\_temp\\_%'
order by n.nspname collate "C"
limit $1`;

/**
 * One row per relation of the reached schemas, columns (capped per table, one past the cap to tell it was reached),
 * primary key and foreign keys as JSON so that a wide catalog stays one row per relation.
 */
const RELATIONS_QUERY = `select c.oid::text as oid, n.nspname as schema, c.relname as name, c.relkind::text as relkind,
  (select pn.nspname from pg_catalog.pg_inherits i
     join pg_catalog.pg_class p on p.oid = i.inhparent join pg_catalog.pg_namespace pn on pn.oid = p.relnamespace
    where c.relispartition and i.inhrelid = c.oid limit 1) as parent_schema,
  (select p.relname from pg_catalog.pg_inherits i join pg_catalog.pg_class p on p.oid = i.inhparent
    where c.relispartition and i.inhrelid = c.oid limit 1) as parent_name,
  (select pg_catalog.json_agg(pg_catalog.json_build_array(a.attname, a.typ, a.nullable, a.hasdef, a.attnum) order by a.attnum)
     from (select a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) as typ, not a.attnotnull as nullable, a.atthasdef as hasdef
             from pg_catalog.pg_attribute a
            where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
            order by a.attnum limit $3) a)::text as columns,
  (select pg_catalog.json_agg(a.attname order by k.ord)
     from pg_catalog.pg_constraint co
     cross join lateral unnest(co.conkey) with ordinality as k(attnum, ord)
     join pg_catalog.pg_attribute a on a.attrelid = co.conrelid and a.attnum = k.attnum
    where co.conrelid = c.oid and co.contype = 'p')::text as pk,
  (select pg_catalog.json_agg(pg_catalog.json_build_array(co.conname, rn.nspname, rc.relname,
            (select pg_catalog.json_agg(a.attname order by k.ord) from unnest(co.conkey) with ordinality as k(attnum, ord)
               join pg_catalog.pg_attribute a on a.attrelid = co.conrelid and a.attnum = k.attnum),
            (select pg_catalog.json_agg(a.attname order by k.ord) from unnest(co.confkey) with ordinality as k(attnum, ord)
               join pg_catalog.pg_attribute a on a.attrelid = co.confrelid and a.attnum = k.attnum)) order by co.conname)
     from pg_catalog.pg_constraint co
     join pg_catalog.pg_class rc on rc.oid = co.confrelid join pg_catalog.pg_namespace rn on rn.oid = rc.relnamespace
    where co.conrelid = c.oid and co.contype = 'f')::text as fks
from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'v', 'm', 'p', 'f') and n.nspname = any($1::text[])
order by n.nspname collate "C", c.relname collate "C"
limit $2`;

const KINDS: Readonly<Record<string, RelationKind>> = { r: 'table', v: 'view', m: 'matview', p: 'partitioned', f: 'foreign' };

interface RelationRow {
  oid: string;
  schema: string;
  name: string;
  relkind: string;
  parent_schema: string | null;
  parent_name: string | null;
  columns: string | null;
  pk: string | null;
  fks: string | null;
}

function parseJson<T>(text: string | null, fallback: T): T {
  if (text === null || text === '') return fallback;
  return JSON.parse(text) as T;
}

/**
 * Reads the structure on a connected client. The client's transaction is opened READ ONLY here, with
 * `statement_timeout` set for it alone, and always ended (rolled back: nothing was written).
 */
export async function capturePostgres(client: pg.Client, caps: CatalogCaps, statementTimeoutMs: number): Promise<CatalogStructure> {
  await client.query('begin transaction isolation level repeatable read read only');
  try {
    await client.query(`set local statement_timeout = ${Math.max(1, Math.floor(statementTimeoutMs))}`);
    // Schemas are nodes too: never ask for more than the node budget allows.
    const schemaLimit = Math.min(caps.max_schemas, caps.max_nodes) + 1;
    const schemaRows = (await client.query<{ oid: string; name: string }>({ text: SCHEMAS_QUERY, values: [schemaLimit] })).rows;
    let truncatedBy: CapName | null = null;
    const note = (cap: CapName) => {
      truncatedBy ??= cap;
    };
    let schemaNames = schemaRows.map((r) => r.name);
    let schemasComplete = true;
    if (schemaNames.length > caps.max_schemas) {
      schemaNames = schemaNames.slice(0, caps.max_schemas);
      schemasComplete = false;
      note('max_schemas');
    }
    if (schemaNames.length > caps.max_nodes) {
      schemaNames = schemaNames.slice(0, caps.max_nodes);
      schemasComplete = false;
      note('max_nodes');
    }
    let nodes = schemaNames.length;
    const incomplete = new Set<string>();
    const relations: CatalogRelation[] = [];
    if (nodes >= caps.max_nodes) {
      // Not a relation could be read: every schema's content is unreached.
      for (const s of schemaNames) incomplete.add(s);
      if (schemaNames.length > 0) note('max_nodes');
    } else if (schemaNames.length > 0) {
      const rows = (await client.query<RelationRow>({ text: RELATIONS_QUERY, values: [schemaNames, caps.max_tables + 1, caps.max_columns_per_table + 1] })).rows;
      const cutFrom = (schema: string) => {
        // The relation at hand and everything after it in order is unreached: its schema and every later one are incomplete.
        const from = schemaNames.indexOf(schema);
        for (const s of from < 0 ? schemaNames : schemaNames.slice(from)) incomplete.add(s);
      };
      for (let i = 0; i < rows.length; i += 1) {
        const row = rows[i]!;
        if (i >= caps.max_tables) {
          note('max_tables');
          cutFrom(row.schema);
          break;
        }
        if (nodes + 1 > caps.max_nodes) {
          note('max_nodes');
          cutFrom(row.schema);
          break;
        }
        nodes += 1;
        const raw = parseJson<[string, string, boolean, boolean, number][]>(row.columns, []);
        let columns: CatalogColumn[] = raw.map(([name, type, nullable, has_default, attnum]) => ({ name, type, nullable, has_default, attnum }));
        let complete = true;
        if (columns.length > caps.max_columns_per_table) {
          columns = columns.slice(0, caps.max_columns_per_table);
          complete = false;
          note('max_columns_per_table');
        }
        let budgetHit = false;
        if (nodes + columns.length > caps.max_nodes) {
          columns = columns.slice(0, caps.max_nodes - nodes);
          complete = false;
          budgetHit = true;
          note('max_nodes');
        }
        nodes += columns.length;
        const fks = parseJson<[string, string, string, string[] | null, string[] | null][]>(row.fks, []).map(
          ([name, schema, table, cols, refCols]): ForeignKey => ({ name, columns: cols ?? [], references: { schema, table, columns: refCols ?? [] } }),
        );
        relations.push({
          oid: row.oid,
          schema: row.schema,
          name: row.name,
          kind: KINDS[row.relkind] ?? 'table',
          partition_of: row.parent_schema !== null && row.parent_name !== null ? pathOf(row.parent_schema, row.parent_name) : null,
          columns,
          primary_key: parseJson<string[] | null>(row.pk, null),
          foreign_keys: fks,
          complete,
        });
        if (budgetHit) {
          // Later relations of this schema and later schemas are unreached.
          const next = rows[i + 1];
          if (next !== undefined) cutFrom(next.schema);
          break;
        }
      }
    }
    const schemaOid = new Map(schemaRows.map((r) => [r.name, r.oid]));
    const schemas: CatalogSchema[] = schemaNames.map((name) => ({ oid: schemaOid.get(name)!, name, complete: !incomplete.has(name) }));
    return { kind: 'sql', schemas, schemas_complete: schemasComplete, relations, operations: [], truncated_by: truncatedBy, node_count: nodes };
  } finally {
    await client.query('rollback').catch(() => undefined);
  }
}
