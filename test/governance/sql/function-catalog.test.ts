// Deny by default, checked against the real pg_proc: every allowlisted name is a pg_catalog function no more volatile than its family says, and a table of catalog functions gets the verdict it should.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlClassifier, initSqlParser } from '../../../src/governance/sql/index.js';
import { BUILTIN_FUNCTION_FAMILIES, BUILTIN_OPERATORS, BUILTIN_CAST_TYPES, judgeFunction, VOLATILITY_RANK } from '../../../src/governance/sql/allowlist.js';
import { callTrustFromCatalog, type CatalogCallRow } from '../../../src/governance/sql/source-calls.js';
import { TEST_PG_HOST, TEST_PG_PORT } from '../../support/pg.js';

/** Functions refused unless a role names them, and why (docs/governance/sql.md "Functions: deny by default"). */
const REFUSED: Readonly<Record<string, readonly string[]>> = {
  'runs SQL given as text, or reads a table named as text': [
    'ts_stat', 'ts_rewrite', 'query_to_xml', 'query_to_xml_and_xmlschema', 'query_to_xmlschema', 'table_to_xml',
    'table_to_xml_and_xmlschema', 'table_to_xmlschema', 'cursor_to_xml', 'cursor_to_xmlschema', 'schema_to_xml',
    'database_to_xml', 'xpath', 'xpath_exists', 'to_regclass',
  ],
  'sequences: change state, or read another session\'s counters': ['nextval', 'setval', 'currval', 'lastval', 'pg_get_serial_sequence'],
  'server files': ['pg_read_file', 'pg_read_binary_file', 'pg_ls_dir', 'pg_stat_file', 'pg_ls_logdir', 'pg_ls_waldir', 'pg_ls_tmpdir', 'pg_ls_archive_statusdir', 'pg_current_logfile'],
  'large objects (server-side files and shared storage)': ['lo_import', 'lo_export', 'lo_open', 'lo_get', 'lo_put', 'lo_create', 'lo_creat', 'lo_unlink', 'lo_from_bytea', 'loread', 'lowrite', 'lo_truncate'],
  'other sessions: signals and what they do': [
    'pg_terminate_backend', 'pg_cancel_backend', 'pg_log_backend_memory_contexts', 'pg_blocking_pids', 'pg_stat_get_activity',
    'pg_backend_pid', 'pg_safe_snapshot_blocking_pids',
  ],
  'settings and configuration': ['current_setting', 'set_config', 'pg_reload_conf', 'pg_show_all_settings', 'pg_hba_file_rules', 'pg_ident_file_mappings', 'pg_show_all_file_settings'],
  'server operations, WAL and replication': [
    'pg_rotate_logfile', 'pg_switch_wal', 'pg_create_restore_point', 'pg_backup_start', 'pg_backup_stop', 'pg_promote',
    'pg_wal_replay_pause', 'pg_wal_replay_resume', 'pg_create_logical_replication_slot', 'pg_create_physical_replication_slot',
    'pg_drop_replication_slot', 'pg_logical_slot_get_changes', 'pg_logical_emit_message', 'pg_replication_origin_create',
    'pg_walfile_name', 'pg_import_system_collations', 'pg_export_snapshot',
  ],
  'locks, sleeps, transaction ids, notifications': [
    'pg_sleep', 'pg_sleep_for', 'pg_sleep_until', 'pg_advisory_lock', 'pg_try_advisory_lock', 'pg_advisory_xact_lock',
    'pg_advisory_unlock_all', 'pg_try_advisory_xact_lock', 'txid_current', 'pg_current_xact_id', 'txid_current_snapshot', 'pg_notify',
  ],
  'statistics and sizes: facts about data the role may not read': [
    'pg_relation_size', 'pg_total_relation_size', 'pg_table_size', 'pg_indexes_size', 'pg_database_size', 'pg_column_size',
    'pg_relation_filepath', 'pg_relation_filenode', 'pg_stat_get_live_tuples', 'pg_stat_reset', 'pg_stat_get_numscans',
  ],
  'definitions that may embed SQL bodies, and privilege probes': [
    'pg_get_viewdef', 'pg_get_functiondef', 'pg_get_ruledef', 'has_table_privilege', 'has_column_privilege', 'pg_has_role',
    'row_security_active',
  ],
  'server and client details': ['version', 'inet_client_addr', 'inet_server_addr', 'inet_server_port', 'pg_postmaster_start_time', 'pg_conf_load_time'],
  'session state': ['setseed'],
};

let client: pg.Client;
let classifier: SqlClassifier;
/** pg_catalog's functions: name → the volatility classes of its overloads. */
const catalog = new Map<string, Set<string>>();
const rows: CatalogCallRow[] = [];

beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier();
  client = new pg.Client({ host: TEST_PG_HOST, port: TEST_PG_PORT, user: 'postgres', database: 'postgres' });
  await client.connect();
  const r = await client.query<{ proname: string; provolatile: string }>(
    `select proname, provolatile::text as provolatile from pg_proc where pronamespace = 'pg_catalog'::regnamespace`,
  );
  for (const { proname, provolatile } of r.rows) {
    let s = catalog.get(proname);
    if (!s) catalog.set(proname, (s = new Set()));
    s.add(provolatile);
    rows.push({ kind: 'function', name: proname, builtin: true, volatility: provolatile });
  }
});
afterAll(async () => client?.end());

const allowed = Object.entries(BUILTIN_FUNCTION_FAMILIES).flatMap(([family, f]) => f.names.map((n) => [n, family] as const));
const refused = Object.entries(REFUSED).flatMap(([why, names]) => names.map((n) => [n, why] as const));

describe('the classification table', () => {
  it('holds at least 150 catalog functions, each in one verdict only', () => {
    expect(allowed.length + refused.length).toBeGreaterThanOrEqual(150);
    expect(refused.length).toBeGreaterThanOrEqual(100);
    const names = [...allowed, ...refused].map(([n]) => n);
    expect(new Set(names).size).toBe(names.length);
  });

  it.each(allowed)('%s (%s) exists in pg_catalog, no more volatile than its family allows, and is allowed', (name, family) => {
    const classes = catalog.get(name);
    expect(classes, `${name} is not a function of this PostgreSQL's pg_catalog`).toBeDefined();
    const max = BUILTIN_FUNCTION_FAMILIES[family]!.volatility;
    for (const v of classes!) expect(VOLATILITY_RANK[v as 'i' | 's' | 'v'], `${name} has a ${v} overload`).toBeLessThanOrEqual(VOLATILITY_RANK[max]);
    expect(judgeFunction([name]).refusal).toBeNull();
    expect(judgeFunction(['pg_catalog', name]).refusal).toBeNull();
  });

  it.each(refused)('%s exists in pg_catalog and is refused: %s', (name) => {
    expect(catalog.has(name), `${name} is not a function of this PostgreSQL's pg_catalog`).toBe(true);
    for (const sql of [`select ${name}()`, `select pg_catalog.${name}()`, `select * from ${name}()`]) {
      const c = classifier.classify(sql);
      if (!c.ok) throw new Error(c.error.message);
      expect(c.calls.find((k) => k.base === name)?.refusal, sql).toBe('not_allowlisted');
    }
  });

  it('trusts every allowlisted name against this PostgreSQL\'s own catalog, and doubts a shadowing definition', async () => {
    const trust = callTrustFromCatalog(rows);
    expect([...trust.doubted]).toEqual([]);
    const shadowed = callTrustFromCatalog([...rows, { kind: 'function', name: 'lower', builtin: false, volatility: 'v' }]);
    expect([...shadowed.doubted]).toEqual(['function:lower']);
    const ops = await client.query<{ oprname: string }>(`select distinct oprname from pg_operator where oprnamespace = 'pg_catalog'::regnamespace`);
    for (const { oprname } of ops.rows) expect(BUILTIN_OPERATORS.has(oprname), oprname).toBe(true);
    const types = await client.query<{ typname: string }>(`select typname from pg_type where typnamespace = 'pg_catalog'::regnamespace and typname = any($1)`, [[...BUILTIN_CAST_TYPES]]);
    expect(types.rows.map((t) => t.typname).sort()).toEqual([...BUILTIN_CAST_TYPES].sort());
  });
});
