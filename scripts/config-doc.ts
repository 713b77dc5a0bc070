// Generates the key tables of docs/configuration.md from the configuration schema: `npx tsx scripts/config-doc.ts` rewrites them, `--check` exits 1 when the doc is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { z } from 'zod';
import { configSchema } from '../src/config/schema.js';

export const DOC_PATH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'configuration.md');
export const BEGIN = '<!-- BEGIN GENERATED KEY REFERENCE (scripts/config-doc.ts) -->';
export const END = '<!-- END GENERATED KEY REFERENCE -->';

/** What each key means; the generator refuses a schema key without an entry here, and an entry without a key. */
const MEANING: Record<string, string> = {
  environment: 'Deployment environment. `production` turns on the production invariants.',
  service_role: 'What this process runs when `gatehouse start` is given no `--role`: everything, one listener, the worker, or the migrations (then exits).',

  'gateway.host': 'Address the gateway HTTP listener binds.',
  'gateway.http_port': 'Gateway HTTP port (proxy, MCP, health). 0 binds any free port.',
  'gateway.pg_enabled': 'Whether the PostgreSQL wire listener is started.',
  'gateway.pg_host': 'Address the PostgreSQL wire listener binds; null uses `gateway.host`.',
  'gateway.pg_port': 'PostgreSQL wire listener port. The development config moves it to 15432 because a real PostgreSQL usually holds 5432.',
  'gateway.processes': 'Gateway processes on this host. Above 1, the service starts that many minus one gateway-role replicas that bind the same HTTP and PostgreSQL wire ports (SO_REUSEPORT; the kernel spreads connections), restarts a replica that dies and stops them with itself. Each process is a full replica, so this needs `database.url` and `redis.url`. Node serves one request at a time per process: set it to the cores the gateway may use.',
  'gateway.trust_proxy': 'Trust `X-Forwarded-*` headers from a fronting proxy when deriving the client address (gateway and admin listeners).',
  'gateway.tls.cert_file': 'PEM certificate for HTTPS on the gateway listener; set together with `key_file`.',
  'gateway.tls.key_file': 'PEM private key for HTTPS on the gateway listener; set together with `cert_file`.',
  'gateway.tls.client_ca_file': 'PEM CA bundle: when set, every client must present a certificate it signed (mTLS); needs `cert_file`. Files are re-read on SIGHUP (docs/tls.md).',
  'gateway.tls.trusted_tls_offload': 'Declares that a trusted component in front of the HTTP listener terminates TLS (satisfies the production TLS invariant without certificates here).',
  'gateway.pg_tls.cert_file': 'PEM certificate the PostgreSQL wire listener presents; set together with `key_file`.',
  'gateway.pg_tls.key_file': 'PEM private key of the PostgreSQL wire listener; set together with `cert_file`.',
  'gateway.pg_tls.require_client_tls': 'Refuse PostgreSQL clients that do not negotiate TLS. Needs `cert_file` and `key_file`.',
  'gateway.pg_tls.trusted_tls_offload': 'Declares that a trusted component in front of the listener terminates TLS (satisfies the production TLS invariant without certificates here).',
  'gateway.pg_tls.cleartext_password': 'Over TLS (or a trusted offload), ask PostgreSQL clients for the password in cleartext instead of SCRAM-SHA-256, for drivers without SCRAM; it is checked against the same stored verifier. Connections without TLS always use SCRAM.',
  'gateway.limits.request_body_bytes': 'Largest request body the HTTP proxy accepts (413 above).',
  'gateway.limits.response_body_bytes': 'Largest upstream response body the HTTP proxy relays (413 above).',
  'gateway.limits.header_bytes': 'Largest total request header size.',
  'gateway.limits.max_connections': 'Concurrent client connections per listener.',
  'gateway.limits.pg_startup_packet_bytes': 'Largest PostgreSQL startup packet accepted before authentication.',
  'gateway.limits.pg_message_bytes': 'Largest single PostgreSQL protocol message.',
  'gateway.limits.sql_bytes': 'Largest SQL text accepted for one statement batch.',
  'gateway.limits.result_rows': 'Most rows relayed from one query result.',
  'gateway.timeouts.upstream_connect_ms': 'Connect timeout towards upstream sources.',
  'gateway.timeouts.upstream_request_ms': 'Whole-request timeout towards upstream sources.',
  'gateway.timeouts.client_idle_ms': 'Idle client connections are closed after this long.',
  'gateway.timeouts.shutdown_grace_ms': 'On SIGTERM/SIGINT, how long draining may take before the process exits anyway.',
  'gateway.timeouts.pg_drain_ms': 'On SIGTERM/SIGINT, how long PostgreSQL wire sessions may finish their transaction: the listener stops accepting, each session ends with 57P01 at its next transaction boundary (idle ones at once), and those still open at this timeout end with 57P01 and their transaction rolled back. `null` is half of `shutdown_grace_ms`; a value must be shorter than it. docs/pgwire.md "Shutdown".',
  'gateway.egress.allow_private_sources': 'source_ids allowed to reach private/loopback addresses. Set only here, never through the admin API.',
  'gateway.circuit.failure_threshold': 'Consecutive upstream failures that open a source\'s circuit (503 while open).',
  'gateway.circuit.half_open_after_ms': 'How long a circuit stays open before one trial request is let through.',
  'gateway.mcp.legacy_tool_prefix': 'Prefix of tool names on the deprecated legacy MCP endpoints.',
  'gateway.mcp.session_ttl_seconds': 'Lifetime of an MCP session.',
  'gateway.managed_privileges.reconcile_interval_seconds': 'Sources with `privileges: managed`: how often their managed roles are reconciled besides the change triggers (hand-made drift, tables created outside the gateway, grants that expired). docs/least-privilege.md.',
  'gateway.test_hooks.skip_sql_analysis': 'Test-only: the gateway skips its table, column and call analysis of SQL so only the database\'s managed privileges refuse. Refused at startup unless `environment` is `test`.',

  'admin.host': 'Address the admin listener (API, console, health) binds.',
  'admin.port': 'Admin listener port. 0 binds any free port.',
  'admin.signing_secret_ref': 'Secret reference to the key that signs admin sessions and CSRF tokens; changing it invalidates every session. At least 32 characters in production.',
  'admin.bootstrap_password': 'Password of the first owner (`admin`): the value itself (e.g. from `SERVICE_ADMIN__BOOTSTRAP_PASSWORD`) or a secret reference. Masked when printed.',
  'admin.session_ttl_seconds': 'Absolute lifetime of an admin session.',
  'admin.session_idle_seconds': 'An admin session ends after this long without use; at most `session_ttl_seconds`.',
  'admin.tls.cert_file': 'PEM certificate for HTTPS on the admin listener; set together with `key_file`.',
  'admin.tls.key_file': 'PEM private key for HTTPS on the admin listener; set together with `cert_file`.',
  'admin.tls.client_ca_file': 'PEM CA bundle: when set, every admin client must present a certificate it signed (mTLS); needs `cert_file`. Re-read on SIGHUP.',
  'admin.tls.trusted_tls_offload': 'Declares that a trusted component in front of the admin listener terminates TLS (satisfies the production TLS invariant).',
  'admin.cookie.name': 'Name of the admin session cookie.',
  'admin.cookie.secure': 'Send the session cookie over HTTPS only. Must be true in production.',
  'admin.cookie.same_site': 'SameSite attribute of the session cookie.',
  'admin.login_throttle.max_attempts_per_username': 'Failed sign-ins per username within the window before further attempts are refused.',
  'admin.login_throttle.max_attempts_per_address': 'Failed sign-ins per client address within the window before further attempts are refused.',
  'admin.login_throttle.window_seconds': 'Window of the sign-in throttle.',

  'worker.id': 'Stable worker id; null derives one from the host name and process id.',
  'worker.concurrency': 'Jobs one worker runs at the same time.',
  'worker.heartbeat_interval_seconds': 'How often a worker records that it is alive.',
  'worker.stale_after_seconds': 'A worker without a heartbeat for this long is reported stale.',
  'worker.lease_seconds': 'How long a claimed job stays leased to a worker before another may take it over.',
  'worker.sweep_interval_seconds': 'How often expired leases and stale workers are swept.',
  'worker.alert_interval_seconds': 'How often alert rules are evaluated; one worker across replicas evaluates at a time (`docs/alerts.md`). The rules themselves live in the control store, not here (spec §9).',
  'worker.alert_repeat_seconds': 'A rule that stays firing is notified again after this long.',

  'database.url': 'Control database URL (`postgres://…`). Null runs the embedded store in development; required in production. The password is masked when printed; TLS parameters in the URL are ignored in favour of `ssl_mode`.',
  'database.read_url': 'Optional read replica of the control database (same TLS settings as `url`): audit search and export (`GET /api/audit`, `/api/audit/export`) read there, so long searches do not load the primary; a replica lags, so an entry written a moment ago may not be found yet. Userinfo passwords are masked when printed.',
  'database.pooler': '`transaction` when `url` (and `read_url`) reach PostgreSQL through a pooler in transaction mode, such as PgBouncer\'s `pool_mode = transaction`: no session setting is sent at connect (PgBouncer refuses a `statement_timeout` startup parameter; set it on the role instead, a warning says when none is in force), and migrations run on `direct_url`. docs/operations.md "PgBouncer".',
  'database.direct_url': 'A direct (session) connection to the control database, for what needs a session: the migrations\' advisory lock (`gatehouse migrate` and `migrate_on_start`). Required with `pooler: transaction`; same TLS settings as `url`. Userinfo passwords are masked when printed.',
  'database.pool_max': 'Connections in the control database pool.',
  'database.connect_timeout_ms': 'Connect timeout to the control database.',
  'database.statement_timeout_ms': 'Statement timeout of control database queries.',
  'database.ssl_mode': 'TLS towards the control database, with libpq\'s meanings. Must be `verify-full` in production.',
  'database.ssl_ca_file': 'CA bundle (PEM) that verifies the database server certificate. Required in production.',
  'database.embedded_dir': 'Data directory of the embedded store (development, no `database.url`).',
  'database.migrate_on_start': 'Apply pending migrations at start. Null means yes outside production; in production run `gatehouse migrate` (the `migration` role).',

  'redis.url': 'Redis URL for coordination, shared counters and cache invalidation. Null uses the in-process adapter in development; required in production (except the `migration` role). The password is masked when printed.',
  'redis.pool_max': 'Upper bound of Redis connections.',
  'redis.key_prefix': 'Prefix of every Redis key Gatehouse writes (several deployments may share one Redis).',
  'redis.connect_timeout_ms': 'Connect timeout to Redis.',
  'redis.command_timeout_ms': 'Timeout of one Redis command.',
  'redis.sentinel_master': 'Redis Sentinel: the name of the primary the sentinels monitor. Set, `url` names a sentinel (its user, password and TLS apply to the data nodes, not the sentinels) and commands go to the current primary, followed across a failover. docs/operations.md "Redis Sentinel and Cluster".',
  'redis.sentinels': 'Further sentinels (`host:port`) besides the one `url` names. Needs `sentinel_master`.',
  'redis.cluster': 'Redis Cluster: `url` names one node (its user, password and TLS apply to every node); keys are routed by hash slot and pub/sub reaches every node. Database 0 only. docs/operations.md "Redis Sentinel and Cluster".',
  'redis.cluster_nodes': 'Further cluster seed nodes (`host:port`) besides the one `url` names. Needs `cluster: true`.',

  'auth.api_key_pepper_ref': 'Secret reference to the HMAC pepper of agent API keys; changing it invalidates HMAC-key authentication. At least 32 characters in production.',
  'auth.key_session_ttl_seconds': 'How long a verified API key is remembered before it is verified again (0 disables).',
  'auth.legacy_unpeppered_keys_allowed': 'Accept API keys stored as unpeppered hashes (migration aid). Must be false in production.',
  'auth.custom_key.min_length': 'Shortest operator-supplied (custom) API key accepted.',
  'auth.custom_key.min_entropy_bits': 'Least estimated entropy of a custom API key.',
  'auth.oidc.enabled': 'Single sign-on through an OpenID Connect provider.',
  'auth.oidc.issuer_url': 'OIDC issuer URL (discovery). Required when enabled; HTTPS in production.',
  'auth.oidc.admin_client_id': 'Client id of the admin console at the provider. Required when enabled on admin roles.',
  'auth.oidc.admin_client_secret_ref': 'Secret reference to the admin console\'s client secret. Required when enabled on admin roles.',
  'auth.oidc.admin_redirect_uri': 'Redirect URI registered for the admin console. Required when enabled on admin roles; HTTPS in production.',
  'auth.oidc.agent_audience': 'Audience agent tokens must carry; null disables OIDC authentication of agents.',
  'auth.oidc.scopes': 'Scopes requested at sign-in; must include `openid`. From the environment: comma list or JSON array.',
  'auth.oidc.flow_ttl_seconds': 'How long a started sign-in flow (state, nonce) stays valid.',
  'auth.oidc.local_break_glass_enabled': 'Keep local password sign-in available while OIDC is enabled.',
  'auth.oidc.admin_group_role_map': 'Provider group → admin roles (`owner`, `admin`, `approver`, `auditor`, `viewer`). From the environment: a JSON object.',
  'auth.oidc.allow_insecure_endpoints': 'Allow plain-HTTP provider endpoints (local testing only). Must be false in production.',
  'auth.oidc.allow_private_network': 'Let the gateway and admin reach the identity provider on a private, loopback or link-local address: an operator exception to the egress rules, as `gateway.egress.allow_private_sources` is for sources.',
  'auth.oidc.clock_tolerance_seconds': 'Clock skew tolerated when checking token times.',
  'auth.oidc.agent_max_token_age_seconds': 'Oldest agent JWT accepted, counted from its `iat` (which agent JWTs must then carry), whatever its `exp` says; a wire session signed in with a JWT ends when the token does (docs/agent-jwt.md).',

  'cache.enabled': 'Response cache for read operations.',
  'cache.l1_ttl_seconds': 'Lifetime of in-process (L1) cache entries.',
  'cache.l1_max_entries': 'Most entries in the L1 cache.',
  'cache.l1_max_bytes': 'Most bytes held by the L1 cache.',
  'cache.l2_ttl_seconds': 'Lifetime of shared (Redis, L2) cache entries.',
  'cache.strict_write_barriers': 'Consistency barrier: a mutation advances the source generation before it executes; when that is impossible the write fails with 503.',
  'cache.generation_namespace': 'Key namespace of source generations.',
  'cache.invalidation_channel': 'Pub/sub channel of cache invalidations.',
  'cache.pubsub_reconnect_ms': 'Delay before the invalidation subscription reconnects.',

  'pii.fast_enabled': 'Pattern-based personal-data scanner.',
  'pii.deep_enabled': 'Deeper (slower) personal-data scanner.',
  'pii.default_mode': 'Scanner used when a policy does not choose one; `deep` needs `deep_enabled`, `fast` needs a scanner enabled.',
  'pii.free_text_fields': 'Key names or JSON-path globs whose whole string values are scanned as free text.',
  'pii.max_depth': 'Deepest nesting the scanner descends into.',
  'pii.max_nodes': 'Most values scanned in one payload.',
  'pii.max_string_bytes': 'Longest single string scanned.',

  'audit.durability_mode': '`strict`: a request completes only once its audit entry is durable; `buffered`: entries are written in batches. Must be `strict` in production.',
  'audit.strictness': 'When the buffer and the spool are both full: refuse requests (`fail_closed`) or serve them and report the loss (`fail_open`).',
  'audit.buffer_max_entries': 'Entries held in memory before spooling to disk.',
  'audit.batch_size': 'Entries written to the database per batch.',
  'audit.flush_interval_ms': 'Longest wait before a partial batch is written.',
  'audit.retry.initial_backoff_ms': 'First retry delay after a failed audit write; at most `max_backoff_ms`.',
  'audit.retry.max_backoff_ms': 'Longest retry delay.',
  'audit.spool.dir': 'Directory of the durable spool used while the database is unavailable. One process per directory: a process whose spool is locked by another live process refuses to start, naming this setting. Two services started from one directory need their own (`SERVICE_AUDIT__SPOOL__DIR`); the replicas of `gateway.processes` each spool under `<dir>/gateway-replica-<n>`.',
  'audit.spool.max_bytes': 'Most bytes the spool may hold.',
  'audit.spool.segment_bytes': 'Size of one spool segment file; at most `spool.max_bytes`.',
  'audit.partitions.months_ahead': 'Days of audit partitions created in advance (partitions are daily since docs/decisions/0024; the key keeps its name).',
  'audit.partitions.retention_days': 'Audit partitions older than this are dropped.',

  'ingestion.enabled': 'Workers run ingestion jobs.',
  'ingestion.max_retries': 'Retries of a failed ingestion job.',
  'ingestion.heartbeat_interval_seconds': 'How often a running job records progress.',
  'ingestion.job_timeout_seconds': 'A job running longer than this is failed.',
  'ingestion.poll_interval_ms': 'How often an idle worker looks for jobs.',
  'ingestion.retry_backoff_seconds': 'Backoff before the first retry of a failed job; doubles with each retry (docs/ingestion.md).',
  'ingestion.retry_backoff_max_seconds': 'Longest backoff between retries.',
  'ingestion.max_document_bytes': 'A fetched document larger than this fails (document_too_large).',
  'ingestion.max_decompressed_bytes': 'What a DOCX may decompress to; more fails as a suspected zip bomb.',
  'ingestion.max_extract_chars': 'Characters of extracted text stored per document; the rest is dropped and the document marked truncated.',
  'ingestion.files_roots': 'Directories a `files` source\'s `root` must lie in; empty means no `files` source can be ingested.',
  'ingestion.ocr.enabled': 'OCR of scanned PDF pages and images with Debian\'s tesseract-ocr (skipped with a reason when it is not installed).',
  'ingestion.ocr.language': 'OCR language(s): tesseract codes joined by "+".',
  'ingestion.ocr.max_pages': 'Pages OCR\'d per document; further pages are skipped with a note.',
  'ingestion.ocr.page_timeout_seconds': 'Bound on rendering and recognising one page.',
  'ingestion.prices.ocr_per_page': 'Unit price of one OCR\'d page; a job\'s ocr_cost is ocr_pages times this.',
  'ingestion.sync.min_interval_seconds': 'The shortest interval a source\'s sync schedule may set; a shorter one is refused with 422 (docs/ingestion.md "Scheduled sync").',
  'ingestion.sync.timeout_seconds': 'A source sync (enumeration and job creation) running longer than this is stopped and recorded failed; a run whose worker died is given up after it.',

  'notifications.enabled': 'Approval notifications to Slack. Needs a target (`slack_bot_token_ref` with `slack_channel`, or `slack_webhook_url_ref`).',
  'notifications.slack_bot_token_ref': 'Secret reference to a Slack bot token; needs `slack_channel`.',
  'notifications.slack_webhook_url_ref': 'Secret reference to a Slack incoming-webhook URL.',
  'notifications.slack_channel': 'Channel the bot posts to.',
  'notifications.admin_base_url': 'Public base URL of the admin console, for links in notifications.',
  'notifications.approval_events': 'Approval events that notify: `pending`, `approved`, `rejected`, `expired`, `failed`. Must not be empty when enabled.',
  'notifications.timeout_seconds': 'Timeout of one delivery attempt (fractions allowed).',
  'notifications.max_attempts': 'Delivery attempts per notification.',
  'notifications.allow_private_egress': 'Allow delivery to private/loopback addresses.',
  'notifications.slack_webhook_url': 'Deprecated literal webhook URL (warns at start); prefer `slack_webhook_url_ref`. Masked when printed.',

  'approvals.enabled': 'Policies may queue requests for human approval (202).',
  'approvals.expiry_seconds': 'How long a pending approval can be acted on.',
  'approvals.encryption_key_ref': 'Secret reference to the key that encrypts stored request bodies at rest.',
  'approvals.max_request_bytes': 'Largest request body stored with an approval.',
  'approvals.max_result_bytes': 'Largest result stored for the agent to fetch after approval.',

  'catalog.enabled': 'Catalog scanning; false stops all scanning.',
  'catalog.scan_on_save': 'Scan a source when it is saved.',
  'catalog.refresh_interval_seconds': 'Scheduled refresh interval of each source\'s catalog.',
  'catalog.max_nodes': 'Most catalog nodes per scan; hitting a cap records `truncated`.',
  'catalog.max_schemas': 'Most schemas per scan.',
  'catalog.max_tables': 'Most tables per scan.',
  'catalog.max_columns_per_table': 'Most columns recorded per table.',
  'catalog.scan_timeout_seconds': 'Statement timeout of one scan\'s catalog queries at the source (they run in one READ ONLY transaction).',

  'semantic_cache.enabled': 'Reserved; serving is disabled in this release, so only false is accepted.',

  'observability.otlp_endpoint': 'OTLP/HTTP collector base URL (`/v1/traces` and `/v1/metrics` are appended); when set, one span per HTTP request (with stage spans) and metrics are exported; when null no SDK is started and nothing is sent (docs/observability.md). Userinfo passwords are masked when printed.',
  'observability.trace_sample_ratio': 'Share of traces recorded and exported (head sampling by trace id) when no client `traceparent` decides; a client\'s sampled flag is followed. Metrics are never sampled. 1 records every request within `trace_max_per_second` (docs/observability.md "Sampling").',
  'observability.trace_max_per_second': 'New traces (those the ratio picks) recorded a second at most, per process, so tracing\'s cost stays bounded under load; a client\'s sampled `traceparent` is followed regardless (docs/observability.md "Sampling").',
  'observability.metrics_export_interval_ms': 'How often metrics are pushed to `otlp_endpoint` (traces leave in batches within about a second).',
  'observability.service_name': 'Service name in logs, traces and metrics.',
  'observability.public_stats_enabled': 'Expose aggregate statistics (`/stats`, `/metrics` on both listeners) without authentication.',
  'observability.readiness_details': 'Whether `/ready` includes each check\'s detail text, or only its state.',
  'observability.log_level': 'Lowest level written to the JSON log on stdout.',
};

type JsonSchema = {
  type?: string | string[];
  anyOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  format?: string;
};

interface Leaf {
  path: string;
  schema: JsonSchema;
}

function rootSchema(): JsonSchema {
  return z.toJSONSchema(configSchema, { io: 'input' }) as JsonSchema;
}

const isSection = (s: JsonSchema) => s.type === 'object' && s.properties !== undefined;

function leaves(node: JsonSchema, prefix = ''): Leaf[] {
  return Object.entries(node.properties ?? {}).flatMap(([k, v]) => {
    const p = prefix === '' ? k : `${prefix}.${k}`;
    return isSection(v) ? leaves(v, p) : [{ path: p, schema: v }];
  });
}

/** Every key path of the schema (leaves only), in schema order. */
export function leafPaths(): string[] {
  return leaves(rootSchema()).map((l) => l.path);
}

const code = (v: unknown) => `\`${typeof v === 'string' ? v : JSON.stringify(v)}\``;

function nonNull(s: JsonSchema): { base: JsonSchema; nullable: boolean } {
  if (Array.isArray(s.type)) {
    const rest = s.type.filter((t) => t !== 'null');
    return { base: { ...s, type: rest[0] }, nullable: rest.length < s.type.length };
  }
  if (s.anyOf) {
    const rest = s.anyOf.filter((a) => a.type !== 'null');
    return { base: rest[0] ?? {}, nullable: rest.length < s.anyOf.length };
  }
  return { base: s, nullable: false };
}

function typeOf(s: JsonSchema): string {
  const { base, nullable } = nonNull(s);
  let t: string;
  if (base.type === 'array') t = `list of ${typeOf(base.items ?? {})}`;
  else if (base.type === 'object') t = `map of string → ${typeOf(typeof base.additionalProperties === 'object' ? base.additionalProperties : {})}`;
  else if (base.enum || base.const !== undefined) t = 'enum';
  else t = typeof base.type === 'string' ? base.type : 'any';
  return nullable ? `${t} or null` : t;
}

function bound(min: number | undefined, max: number | undefined, unit: string): string | null {
  if (min !== undefined && max !== undefined) return `${min}–${max}${unit}`;
  if (min !== undefined) return `≥ ${min}${unit}`;
  if (max !== undefined) return `≤ ${max}${unit}`;
  return null;
}

function rangeOf(s: JsonSchema): string {
  const { base } = nonNull(s);
  const parts: string[] = [];
  if (base.enum) parts.push(base.enum.map(code).join(', '));
  if (base.const !== undefined) parts.push(`only ${code(base.const)}`);
  else if (base.type === 'boolean') parts.push('`true`, `false`');
  const num = bound(base.minimum, base.maximum, '');
  if (num) parts.push(num);
  const len = bound(base.minLength, base.maxLength, ' chars');
  if (len) parts.push(len);
  if (base.pattern) parts.push(`matches ${code(base.pattern)}`);
  if (base.format === 'uri') parts.push('URL');
  if (base.type === 'array') {
    const items = bound(base.minItems, base.maxItems, ' items');
    if (items) parts.push(items);
    const inner = base.items ? rangeOf(base.items) : '';
    if (inner !== '') parts.push(`each: ${inner}`);
  }
  if (base.type === 'object' && typeof base.additionalProperties === 'object') {
    const inner = rangeOf(base.additionalProperties);
    if (inner !== '') parts.push(`each value: ${inner}`);
  }
  return parts.join('; ');
}

const cell = (s: string) => s.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The generated Markdown: one table per top-level section. */
export function renderKeyReference(): string {
  const all = leaves(rootSchema());
  const missing = all.filter((l) => MEANING[l.path] === undefined).map((l) => l.path);
  const stale = Object.keys(MEANING).filter((k) => !all.some((l) => l.path === k));
  if (missing.length > 0 || stale.length > 0) {
    throw new Error(`config-doc: keys without a meaning: ${missing.join(', ') || 'none'}; meanings without a key: ${stale.join(', ') || 'none'}`);
  }
  const sections = new Map<string, Leaf[]>();
  for (const l of all) {
    const top = l.path.includes('.') ? l.path.slice(0, l.path.indexOf('.')) : '(top level)';
    sections.set(top, [...(sections.get(top) ?? []), l]);
  }
  const out: string[] = [];
  for (const [section, list] of sections) {
    out.push(`### ${section === '(top level)' ? 'Top level' : `\`${section}\``}`, '');
    out.push('| Key | Type | Default | Allowed | Meaning |', '|---|---|---|---|---|');
    for (const l of list) {
      const def = l.schema.default === undefined ? '—' : code(l.schema.default);
      out.push(`| \`${l.path}\` | ${cell(typeOf(l.schema))} | ${cell(def)} | ${cell(rangeOf(l.schema) || 'any')} | ${cell(MEANING[l.path]!)} |`);
    }
    out.push('');
  }
  return out.join('\n');
}

/** The doc with its generated section replaced by the current rendering. */
export function withFreshReference(doc: string): string {
  const start = doc.indexOf(BEGIN);
  const end = doc.indexOf(END);
  if (start === -1 || end === -1 || end < start) throw new Error(`config-doc: ${DOC_PATH} lacks the generated-section markers`);
  return `${doc.slice(0, start + BEGIN.length)}\n\n${renderKeyReference()}\n${doc.slice(end)}`;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const current = readFileSync(DOC_PATH, 'utf8');
  const fresh = withFreshReference(current);
  if (process.argv.includes('--check')) {
    if (fresh !== current) {
      process.stderr.write(`${DOC_PATH} is out of date: run npx tsx scripts/config-doc.ts\n`);
      process.exit(1);
    }
  } else if (fresh !== current) {
    writeFileSync(DOC_PATH, fresh);
    process.stdout.write(`updated ${DOC_PATH}\n`);
  }
}
