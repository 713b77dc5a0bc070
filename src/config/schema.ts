// The configuration schema of spec §9: every section, field, default and range; strict objects reject unknown keys at every level.
import { z } from 'zod';

/** A `*_ref` field: a reference to a secret held outside the configuration (`env:NAME` or `file:/path`). */
const secretRef = z.string().max(4096).nullable().default(null);
/** 0 binds any free port (tests); production deployments name theirs. */
const port = z.number().int().min(0).max(65535);
const host = z.string().min(1).max(255);
const positiveInt = (max: number) => z.number().int().min(1).max(max);
const filePath = z.string().min(1).max(4096).nullable().default(null);

/** Sections default to `{}` and are then parsed, so nested defaults apply when a section is absent. */
function section<T extends z.ZodRawShape>(shape: T) {
  // Generic T hides that every field has a default, so `{}` is a valid input here.
  return z.strictObject(shape).prefault({} as never);
}

const MIB = 1024 * 1024;

export const gatewaySchema = section({
  host: host.default('127.0.0.1'),
  http_port: port.default(3000),
  /** The PostgreSQL wire listener; the development config moves it off 5432, where a real PostgreSQL usually listens. */
  pg_enabled: z.boolean().default(true),
  pg_host: host.nullable().default(null),
  pg_port: port.default(5432),
  /**
   * Gateway processes on this host sharing the gateway listeners (SO_REUSEPORT: the kernel spreads connections).
   * Node runs one request at a time per process, so this is how one host uses more than one core.
   */
  processes: positiveInt(64).default(1),
  trust_proxy: z.boolean().default(false),
  /** TLS on the HTTP listener (docs/tls.md); a client CA turns on client certificates (mTLS). */
  tls: section({
    cert_file: filePath,
    key_file: filePath,
    client_ca_file: filePath,
    /** A trusted component in front terminates TLS: satisfies the production TLS invariant without certificates here. */
    trusted_tls_offload: z.boolean().default(false),
  }),
  pg_tls: section({
    cert_file: filePath,
    key_file: filePath,
    require_client_tls: z.boolean().default(false),
    trusted_tls_offload: z.boolean().default(false),
    cleartext_password: z.boolean().default(false),
  }),
  limits: section({
    request_body_bytes: positiveInt(1024 * MIB).default(1 * MIB),
    response_body_bytes: positiveInt(1024 * MIB).default(10 * MIB),
    header_bytes: positiveInt(1 * MIB).default(16 * 1024),
    max_connections: positiveInt(1_000_000).default(10_000),
    pg_startup_packet_bytes: z.number().int().min(64).max(10_000).default(10_000),
    pg_message_bytes: positiveInt(1024 * MIB).default(16 * MIB),
    sql_bytes: positiveInt(64 * MIB).default(1 * MIB),
    result_rows: positiveInt(100_000_000).default(100_000),
  }),
  timeouts: section({
    upstream_connect_ms: positiveInt(600_000).default(5_000),
    upstream_request_ms: positiveInt(3_600_000).default(30_000),
    client_idle_ms: positiveInt(86_400_000).default(300_000),
    shutdown_grace_ms: positiveInt(600_000).default(10_000),
    /** How long wire sessions may finish their transaction after SIGTERM before they end with 57P01; null is half of shutdown_grace_ms. */
    pg_drain_ms: z.number().int().min(0).max(600_000).nullable().default(null),
  }),
  egress: section({
    /** source_ids the operator lets reach private addresses; set only in configuration, never through the admin API. */
    allow_private_sources: z.array(z.string().min(1).max(128)).max(10_000).default([]),
  }),
  circuit: section({
    failure_threshold: positiveInt(10_000).default(5),
    half_open_after_ms: positiveInt(3_600_000).default(30_000),
  }),
  mcp: section({
    legacy_tool_prefix: z.string().regex(/^[a-z][a-z0-9_]{0,31}$/, 'must be 1-32 lowercase letters, digits or underscores, starting with a letter').default('gatehouse'),
    session_ttl_seconds: positiveInt(86_400).default(3_600),
  }),
  /** Sources with `privileges: managed` (docs/least-privilege.md): how often drift, structure and grant expiry are reconciled besides change triggers. */
  managed_privileges: section({
    reconcile_interval_seconds: positiveInt(86_400).default(60),
  }),
  /**
   * Test-only switches; each is refused outside `environment: test` (config/invariants.ts), so no development or
   * production configuration can turn governance off.
   */
  test_hooks: section({
    /** The gateway's own table, column and call analysis of SQL is skipped: only the database's privileges refuse (docs/least-privilege.md "Tests"). */
    skip_sql_analysis: z.boolean().default(false),
  }),
});

export const adminSchema = section({
  host: host.default('127.0.0.1'),
  port: port.default(9090),
  /** Secret reference to the key that signs admin sessions and CSRF tokens; changing it invalidates every session (spec §5.8). */
  signing_secret_ref: secretRef,
  /** The first owner's password, supplied from outside: the value itself or a secret reference (DESIGN §8). */
  bootstrap_password: z.string().min(1).max(1024).nullable().default(null),
  session_ttl_seconds: positiveInt(30 * 86_400).default(8 * 3_600),
  session_idle_seconds: positiveInt(30 * 86_400).default(3_600),
  /** TLS on the admin listener, as gateway.tls (docs/tls.md). */
  tls: section({
    cert_file: filePath,
    key_file: filePath,
    client_ca_file: filePath,
    trusted_tls_offload: z.boolean().default(false),
  }),
  cookie: section({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).default('gatehouse_session'),
    secure: z.boolean().default(false),
    same_site: z.enum(['strict', 'lax']).default('strict'),
  }),
  login_throttle: section({
    max_attempts_per_username: positiveInt(10_000).default(5),
    max_attempts_per_address: positiveInt(100_000).default(20),
    window_seconds: positiveInt(86_400).default(900),
  }),
});

export const workerSchema = section({
  /** Stable worker id; null derives one from the host name and process id. */
  id: z.string().min(1).max(128).nullable().default(null),
  concurrency: positiveInt(256).default(2),
  heartbeat_interval_seconds: positiveInt(3_600).default(10),
  stale_after_seconds: positiveInt(86_400).default(60),
  lease_seconds: positiveInt(86_400).default(300),
  sweep_interval_seconds: positiveInt(3_600).default(30),
  /** How often the alert evaluator runs (docs/alerts.md); one evaluator across replicas at a time. */
  alert_interval_seconds: positiveInt(3_600).default(30),
  /** A rule that stays firing is notified again after this long. */
  alert_repeat_seconds: positiveInt(7 * 86_400).default(3_600),
});

export const databaseSchema = section({
  /** Control database URL; null in development runs the embedded store. */
  url: z.string().min(1).max(4096).nullable().default(null),
  /** A read replica of the control database for audit search and export (docs/operations.md); null reads the primary. */
  read_url: z.string().min(1).max(4096).nullable().default(null),
  /**
   * `transaction`: `url` (and `read_url`) reach PostgreSQL through a pooler in transaction mode such as PgBouncer
   * (docs/operations.md "PgBouncer"): no session setting is sent at connect, and migrations use `direct_url`.
   */
  pooler: z.enum(['none', 'transaction']).default('none'),
  /** A direct (session) connection to the control database for what needs a session: the migrations' advisory lock. */
  direct_url: z.string().min(1).max(4096).nullable().default(null),
  pool_max: positiveInt(1_000).default(10),
  connect_timeout_ms: positiveInt(120_000).default(5_000),
  statement_timeout_ms: positiveInt(3_600_000).default(30_000),
  ssl_mode: z.enum(['disable', 'prefer', 'require', 'verify-ca', 'verify-full']).default('prefer'),
  ssl_ca_file: filePath,
  embedded_dir: z.string().min(1).max(4096).default('./.gatehouse/pgdata'),
  /** Apply pending migrations when the service starts; null means yes outside production, where `gatehouse migrate` (the migration role) does it. */
  migrate_on_start: z.boolean().nullable().default(null),
});

/** `host:port` of a Redis sentinel or cluster node. */
const hostPort = z.string().max(300).regex(/^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}$/, 'must be host:port');

export const redisSchema = section({
  /** Redis URL; null in development uses the in-process coordination adapter. */
  url: z.string().min(1).max(4096).nullable().default(null),
  pool_max: positiveInt(1_000).default(10),
  key_prefix: z.string().regex(/^[A-Za-z0-9:_.-]{0,64}$/).default('gh:'),
  connect_timeout_ms: positiveInt(120_000).default(2_000),
  command_timeout_ms: positiveInt(120_000).default(2_000),
  /** Redis Sentinel (docs/operations.md): set, `url` names a sentinel and commands go to this primary's current address. */
  sentinel_master: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, 'must be 1-128 letters, digits, dots, underscores or hyphens').nullable().default(null),
  /** Further sentinels besides the one `url` names. */
  sentinels: z.array(hostPort).max(16).default([]),
  /** Redis Cluster (docs/operations.md): `url` names one node of the cluster; keys are routed by hash slot. */
  cluster: z.boolean().default(false),
  /** Further cluster seed nodes besides the one `url` names. */
  cluster_nodes: z.array(hostPort).max(64).default([]),
});

export const oidcSchema = section({
  enabled: z.boolean().default(false),
  issuer_url: z.string().url().max(2048).nullable().default(null),
  admin_client_id: z.string().min(1).max(512).nullable().default(null),
  admin_client_secret_ref: secretRef,
  admin_redirect_uri: z.string().url().max(2048).nullable().default(null),
  agent_audience: z.string().min(1).max(512).nullable().default(null),
  scopes: z.array(z.string().min(1).max(128)).min(1).max(64).refine((s) => s.includes('openid'), 'must include openid').default(['openid', 'profile', 'email']),
  flow_ttl_seconds: positiveInt(3_600).default(600),
  local_break_glass_enabled: z.boolean().default(true),
  admin_group_role_map: z.record(z.string().min(1).max(256), z.array(z.enum(['owner', 'admin', 'approver', 'auditor', 'viewer'])).max(5)).default({}),
  allow_insecure_endpoints: z.boolean().default(false),
  /** The identity provider may be on a private, loopback or link-local address (an operator exception to the egress rules, spec §4 rule 5). */
  allow_private_network: z.boolean().default(false),
  clock_tolerance_seconds: z.number().int().min(0).max(300).default(30),
  /** Oldest agent JWT accepted, counted from its `iat` (required); its `exp` may not stretch a session past this either. */
  agent_max_token_age_seconds: z.number().int().min(60).max(7 * 86_400).default(86_400),
});

export const authSchema = section({
  /** Secret reference to the HMAC pepper for agent API keys; changing it invalidates HMAC-key authentication (spec §5.8). */
  api_key_pepper_ref: secretRef,
  key_session_ttl_seconds: z.number().int().min(0).max(3_600).default(60),
  legacy_unpeppered_keys_allowed: z.boolean().default(false),
  custom_key: section({
    min_length: z.number().int().min(16).max(1024).default(32),
    min_entropy_bits: z.number().int().min(64).max(4096).default(128),
  }),
  oidc: oidcSchema,
});

export const cacheSchema = section({
  enabled: z.boolean().default(true),
  l1_ttl_seconds: z.number().int().min(0).max(86_400).default(30),
  l1_max_entries: z.number().int().min(0).max(10_000_000).default(10_000),
  l1_max_bytes: positiveInt(16 * 1024 * MIB).default(64 * MIB),
  l2_ttl_seconds: z.number().int().min(0).max(30 * 86_400).default(300),
  /** Consistency barrier: a mutation advances the source generation before it executes, and writes fail 503 when that is impossible. */
  strict_write_barriers: z.boolean().default(true),
  generation_namespace: z.string().regex(/^[A-Za-z0-9:_.-]{1,64}$/).default('gen'),
  invalidation_channel: z.string().regex(/^[A-Za-z0-9:_.-]{1,128}$/).default('cache-invalidation'),
  pubsub_reconnect_ms: positiveInt(600_000).default(1_000),
});

export const piiSchema = section({
  fast_enabled: z.boolean().default(true),
  deep_enabled: z.boolean().default(false),
  default_mode: z.enum(['off', 'fast', 'deep']).default('fast'),
  /** Key names or JSON paths (globs) whose whole string values are scanned as free text. */
  free_text_fields: z.array(z.string().min(1).max(256)).max(1_000).default([]),
  max_depth: positiveInt(1_000).default(64),
  max_nodes: positiveInt(10_000_000).default(100_000),
  max_string_bytes: positiveInt(64 * MIB).default(1 * MIB),
});

export const auditSchema = section({
  durability_mode: z.enum(['strict', 'buffered']).default('strict'),
  /** What happens when the buffer and the spool are both full: refuse requests (fail_closed) or serve them and report the loss (fail_open). */
  strictness: z.enum(['fail_closed', 'fail_open']).default('fail_closed'),
  buffer_max_entries: positiveInt(10_000_000).default(10_000),
  batch_size: positiveInt(100_000).default(500),
  flush_interval_ms: positiveInt(60_000).default(200),
  retry: section({
    initial_backoff_ms: positiveInt(60_000).default(100),
    max_backoff_ms: positiveInt(600_000).default(10_000),
  }),
  spool: section({
    dir: z.string().min(1).max(4096).default('./.gatehouse/audit-spool'),
    max_bytes: positiveInt(1024 * 1024 * MIB).default(1024 * MIB),
    segment_bytes: positiveInt(1024 * MIB).default(16 * MIB),
  }),
  partitions: section({
    months_ahead: z.number().int().min(1).max(24).default(3),
    retention_days: positiveInt(36_500).default(365),
  }),
});

export const ingestionSchema = section({
  enabled: z.boolean().default(true),
  max_retries: z.number().int().min(0).max(100).default(3),
  heartbeat_interval_seconds: positiveInt(3_600).default(15),
  job_timeout_seconds: positiveInt(86_400).default(3_600),
  poll_interval_ms: positiveInt(600_000).default(2_000),
  /** Retry backoff (docs/ingestion.md "Runner"): base × 2^retries, capped. */
  retry_backoff_seconds: positiveInt(86_400).default(30),
  retry_backoff_max_seconds: positiveInt(86_400).default(3_600),
  /** A fetched document larger than this fails with document_too_large. */
  max_document_bytes: positiveInt(1024 * MIB).default(50 * MIB),
  /** Bound on what an archive-based format (DOCX) may decompress to. */
  max_decompressed_bytes: positiveInt(1024 * MIB).default(64 * MIB),
  /** Characters of extracted text stored per document; the rest is dropped and the document marked truncated. */
  max_extract_chars: positiveInt(100_000_000).default(5_000_000),
  /** Directories `files` sources may be rooted in (absolute); empty: no `files` source can be ingested. */
  files_roots: z.array(z.string().min(1).max(4096).refine((p) => p.startsWith('/'), 'must be an absolute path')).max(256).default([]),
  ocr: section({
    /** Scanned PDF pages and images through Debian's tesseract-ocr, when installed. */
    enabled: z.boolean().default(true),
    language: z.string().regex(/^[a-z_]{3,16}(\+[a-z_]{3,16}){0,4}$/, 'must be tesseract language codes joined by "+"').default('eng'),
    max_pages: z.number().int().min(0).max(10_000).default(100),
    page_timeout_seconds: positiveInt(3_600).default(60),
  }),
  /** Unit prices for the job's cost fields (spec §2 ocr_cost); 0 means free. */
  prices: section({
    ocr_per_page: z.number().min(0).max(1_000_000).default(0),
  }),
  /** Scheduled source sync (docs/ingestion.md "Scheduled sync", decision record 0025). */
  sync: section({
    /** The shortest interval a source's schedule may set (the admin API answers 422 below it). */
    min_interval_seconds: positiveInt(30 * 86_400).default(60),
    /** A sync (enumeration and job creation) running longer than this is stopped and recorded failed; also its lease. */
    timeout_seconds: positiveInt(86_400).default(600),
  }),
});

export const approvalEvents = ['pending', 'approved', 'rejected', 'expired', 'failed'] as const;

export const notificationsSchema = section({
  enabled: z.boolean().default(false),
  slack_bot_token_ref: secretRef,
  slack_webhook_url_ref: secretRef,
  slack_channel: z.string().min(1).max(256).nullable().default(null),
  admin_base_url: z.string().url().max(2048).nullable().default(null),
  approval_events: z.array(z.enum(approvalEvents)).max(approvalEvents.length).default(['pending']),
  timeout_seconds: z.number().min(0.1).max(120).default(5),
  max_attempts: positiveInt(10).default(3),
  allow_private_egress: z.boolean().default(false),
  /** Deprecated literal webhook URL; prefer slack_webhook_url_ref. */
  slack_webhook_url: z.string().url().max(2048).nullable().default(null),
});

export const approvalsSchema = section({
  enabled: z.boolean().default(true),
  expiry_seconds: positiveInt(30 * 86_400).default(900),
  /** Secret reference to the key that encrypts stored request bodies at rest. */
  encryption_key_ref: secretRef,
  max_request_bytes: positiveInt(64 * MIB).default(1 * MIB),
  max_result_bytes: positiveInt(64 * MIB).default(64 * 1024),
});

export const catalogSchema = section({
  enabled: z.boolean().default(true),
  scan_on_save: z.boolean().default(true),
  refresh_interval_seconds: z.number().int().min(900).max(30 * 86_400).default(86_400),
  max_nodes: positiveInt(10_000_000).default(100_000),
  max_schemas: positiveInt(100_000).default(1_000),
  max_tables: positiveInt(1_000_000).default(10_000),
  max_columns_per_table: positiveInt(10_000).default(1_600),
  /** Bound of one scan's catalog queries at the source (the statement_timeout of its READ ONLY transaction). */
  scan_timeout_seconds: positiveInt(3_600).default(300),
});

export const semanticCacheSchema = section({
  /** Reserved: serving is disabled in this release, so only false is accepted. */
  enabled: z.literal(false).default(false),
});

export const observabilitySchema = section({
  otlp_endpoint: z.string().url().max(2048).nullable().default(null),
  /**
   * Share of traces recorded and exported when no sampled parent decides (head sampling by trace id; a client's
   * sampled `traceparent` is followed). Metrics are never sampled. Measured cost: docs/decisions/0015-operations.md.
   */
  trace_sample_ratio: z.number().min(0).max(1).default(0.1),
  /**
   * New traces (those the ratio picks) recorded a second at most, per process: tracing's cost stays bounded however
   * high the load (docs/decisions/0030-telemetry-overhead.md). A client's sampled `traceparent` is followed regardless.
   */
  trace_max_per_second: positiveInt(1_000_000).default(100),
  /** How often metrics are pushed to the OTLP endpoint (traces are batched and sent within about a second). */
  metrics_export_interval_ms: z.number().int().min(100).max(3_600_000).default(60_000),
  service_name: z.string().min(1).max(128).default('gatehouse'),
  public_stats_enabled: z.boolean().default(false),
  /** Whether /ready lists each check's detail text, or only its state. */
  readiness_details: z.boolean().default(true),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export const serviceRoles = ['all', 'gateway', 'admin', 'worker', 'migration'] as const;
export type ServiceRole = (typeof serviceRoles)[number];

export const configSchema = z.strictObject({
  environment: z.enum(['development', 'test', 'production']).default('development'),
  service_role: z.enum(serviceRoles).default('all'),
  gateway: gatewaySchema,
  admin: adminSchema,
  worker: workerSchema,
  database: databaseSchema,
  redis: redisSchema,
  auth: authSchema,
  cache: cacheSchema,
  pii: piiSchema,
  audit: auditSchema,
  ingestion: ingestionSchema,
  notifications: notificationsSchema,
  approvals: approvalsSchema,
  catalog: catalogSchema,
  semantic_cache: semanticCacheSchema,
  observability: observabilitySchema,
});

export type Config = z.infer<typeof configSchema>;

/**
 * Fields that hold secrets or may embed one: never printed, logged or echoed in an error.
 * `*_ref` fields must be references; the others may be literal values supplied from outside.
 */
export const secretRefPaths = [
  'admin.signing_secret_ref',
  'auth.api_key_pepper_ref',
  'auth.oidc.admin_client_secret_ref',
  'notifications.slack_bot_token_ref',
  'notifications.slack_webhook_url_ref',
  'approvals.encryption_key_ref',
] as const;
export type SecretRefPath = (typeof secretRefPaths)[number];

/** Fields that may carry a secret as a literal (or, for bootstrap_password, a reference). */
export const secretValuePaths = ['admin.bootstrap_password', 'notifications.slack_webhook_url'] as const;

/** URL fields whose userinfo password is masked. */
export const credentialUrlPaths = ['database.url', 'database.read_url', 'database.direct_url', 'redis.url'] as const;
