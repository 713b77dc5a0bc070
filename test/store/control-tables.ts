// The tables migration 0001_foundation creates; later migrations add more, so tests check inclusion.
export const FOUNDATION_TABLES = [
  'admin_tokens',
  'admin_users',
  'approvals',
  'data_sources',
  'identities',
  'ingestion_jobs',
  'policies',
  'policy_set_version',
  'source_role_grants',
  'source_roles',
  'workers',
];
