// What the gateway knows of pg_catalog's relations without asking the source: the names every supported server has there, and the ones that hold other tables' data.

/**
 * Relations pg_catalog has held since PostgreSQL 10. pg_catalog is searched before the session's path, so an
 * unqualified one of these names is always pg_catalog's. Any other `pg_*` name may be a table of the path's schemas
 * (`public.pg_notes`, or a newer catalog's name on an older server): it is governed as both (docs/governance/sql.md
 * "Tables"). Checked against the real pg_class by test/governance/sql/catalog-relations.test.ts.
 */
export const STABLE_CATALOG_RELATIONS: ReadonlySet<string> = new Set([
  'pg_aggregate', 'pg_am', 'pg_amop', 'pg_amproc', 'pg_attrdef', 'pg_attribute', 'pg_auth_members', 'pg_authid',
  'pg_available_extension_versions', 'pg_available_extensions', 'pg_cast', 'pg_class', 'pg_collation', 'pg_config',
  'pg_constraint', 'pg_conversion', 'pg_cursors', 'pg_database', 'pg_db_role_setting', 'pg_default_acl', 'pg_depend',
  'pg_description', 'pg_enum', 'pg_event_trigger', 'pg_extension', 'pg_file_settings', 'pg_foreign_data_wrapper',
  'pg_foreign_server', 'pg_foreign_table', 'pg_group', 'pg_hba_file_rules', 'pg_index', 'pg_indexes', 'pg_inherits',
  'pg_init_privs', 'pg_language', 'pg_largeobject', 'pg_largeobject_metadata', 'pg_locks', 'pg_matviews',
  'pg_namespace', 'pg_opclass', 'pg_operator', 'pg_opfamily', 'pg_partitioned_table', 'pg_policies', 'pg_policy',
  'pg_prepared_statements', 'pg_prepared_xacts', 'pg_proc', 'pg_publication', 'pg_publication_rel',
  'pg_publication_tables', 'pg_range', 'pg_replication_origin', 'pg_replication_origin_status', 'pg_replication_slots',
  'pg_rewrite', 'pg_roles', 'pg_rules', 'pg_seclabel', 'pg_seclabels', 'pg_sequence', 'pg_sequences', 'pg_settings',
  'pg_shadow', 'pg_shdepend', 'pg_shdescription', 'pg_shseclabel', 'pg_stat_activity', 'pg_stat_all_indexes',
  'pg_stat_all_tables', 'pg_stat_archiver', 'pg_stat_bgwriter', 'pg_stat_database', 'pg_stat_database_conflicts',
  'pg_stat_progress_vacuum', 'pg_stat_replication', 'pg_stat_ssl', 'pg_stat_subscription', 'pg_stat_sys_indexes',
  'pg_stat_sys_tables', 'pg_stat_user_functions', 'pg_stat_user_indexes', 'pg_stat_user_tables',
  'pg_stat_wal_receiver', 'pg_stat_xact_all_tables', 'pg_stat_xact_sys_tables', 'pg_stat_xact_user_functions',
  'pg_stat_xact_user_tables', 'pg_statio_all_indexes', 'pg_statio_all_sequences', 'pg_statio_all_tables',
  'pg_statio_sys_indexes', 'pg_statio_sys_sequences', 'pg_statio_sys_tables', 'pg_statio_user_indexes',
  'pg_statio_user_sequences', 'pg_statio_user_tables', 'pg_statistic', 'pg_statistic_ext', 'pg_stats',
  'pg_subscription', 'pg_subscription_rel', 'pg_tables', 'pg_tablespace', 'pg_timezone_abbrevs', 'pg_timezone_names',
  'pg_transform', 'pg_trigger', 'pg_ts_config', 'pg_ts_config_map', 'pg_ts_dict', 'pg_ts_parser', 'pg_ts_template',
  'pg_type', 'pg_user', 'pg_user_mapping', 'pg_user_mappings', 'pg_views',
]);

/**
 * pg_catalog's planner statistics: `most_common_vals`, `histogram_bounds` and their extended forms are values
 * sampled from the columns of every table the source login may read, outside every grant and redaction. Reading
 * them is refused (trap `statistics_read`, docs/governance/sql.md "Traps").
 */
export const STATISTICS_RELATIONS: ReadonlySet<string> = new Set(['pg_statistic', 'pg_stats', 'pg_statistic_ext_data', 'pg_stats_ext', 'pg_stats_ext_exprs']);

/** True for a qualified relation name (`pg_catalog.pg_stats`) that is one of the statistics relations. */
export function isStatisticsRelation(qualified: string): boolean {
  return qualified.startsWith('pg_catalog.') && STATISTICS_RELATIONS.has(qualified.slice('pg_catalog.'.length));
}
