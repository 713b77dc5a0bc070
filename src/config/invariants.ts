// Cross-field rules and the production invariants of spec §9: each unmet rule is one problem line naming the key path.
import type { Config } from './schema.js';
import type { Secrets } from './secrets.js';

const MIN_PRODUCTION_SECRET_CHARS = 32;

function isHttps(url: string | null): boolean {
  if (url === null) return false;
  try {
    return new URL(url).protocol === 'https:';
  } catch {
    return false;
  }
}

const servesAdmin = (c: Config) => c.service_role === 'all' || c.service_role === 'admin';
const servesGateway = (c: Config) => c.service_role === 'all' || c.service_role === 'gateway';
/** Roles that hash or verify agent API keys: the gateway authenticates, the admin creates and rotates. */
const usesApiKeys = (c: Config) => servesAdmin(c) || servesGateway(c);

/** Rules that hold in every environment. */
export function crossFieldProblems(c: Config): string[] {
  const problems: string[] = [];
  const pairs: Array<[string, { cert_file: string | null; key_file: string | null }]> = [
    ['gateway.tls', c.gateway.tls],
    ['gateway.pg_tls', c.gateway.pg_tls],
    ['admin.tls', c.admin.tls],
  ];
  for (const [path, tls] of pairs) {
    if ((tls.cert_file === null) !== (tls.key_file === null)) {
      problems.push(`${path}: cert_file and key_file must be set together`);
    }
  }
  for (const [path, tls] of [['gateway.tls', c.gateway.tls], ['admin.tls', c.admin.tls]] as const) {
    if (tls.client_ca_file !== null && tls.cert_file === null) problems.push(`${path}.client_ca_file: needs ${path}.cert_file and key_file (client certificates are checked only over TLS)`);
  }
  if (c.gateway.pg_tls.require_client_tls && c.gateway.pg_tls.cert_file === null) {
    problems.push('gateway.pg_tls.require_client_tls: needs gateway.pg_tls.cert_file and key_file');
  }
  if (c.database.pooler === 'transaction' && c.database.url !== null && c.database.direct_url === null) {
    problems.push('database.direct_url: required with database.pooler: transaction (migrations hold a session advisory lock, which a transaction pooler cannot keep)');
  }
  if (c.database.direct_url !== null && c.database.url === null) problems.push('database.direct_url: needs database.url');
  const r = c.redis;
  if (r.sentinels.length > 0 && r.sentinel_master === null) problems.push('redis.sentinels: needs redis.sentinel_master (the primary the sentinels monitor)');
  if (r.cluster_nodes.length > 0 && !r.cluster) problems.push('redis.cluster_nodes: needs redis.cluster: true');
  if (r.cluster && r.sentinel_master !== null) problems.push('redis.cluster: a Redis Cluster is not managed by sentinels; set redis.cluster or redis.sentinel_master, not both');
  if ((r.cluster || r.sentinel_master !== null) && r.url === null) problems.push(`redis.${r.cluster ? 'cluster' : 'sentinel_master'}: needs redis.url (a node to start from, and the credentials and TLS of the data nodes)`);
  if (r.cluster && r.url !== null && !/^rediss?:\/\/[^/]*(\/0?)?$/.test(r.url)) problems.push('redis.url: a Redis Cluster has only database 0');
  const t = c.gateway.timeouts;
  if (t.pg_drain_ms !== null && t.pg_drain_ms >= t.shutdown_grace_ms) {
    problems.push('gateway.timeouts.pg_drain_ms: must be shorter than gateway.timeouts.shutdown_grace_ms (the sessions still open at the drain timeout are ended before the process exits)');
  }
  if (c.database.read_url !== null && c.database.url === null) problems.push('database.read_url: needs database.url (a replica of the embedded store does not exist)');
  if (c.service_role === 'all') {
    const ports: Array<[string, number, string]> = [
      ['gateway.http_port', c.gateway.http_port, c.gateway.host],
      ['admin.port', c.admin.port, c.admin.host],
    ];
    if (c.gateway.pg_enabled) ports.push(['gateway.pg_port', c.gateway.pg_port, c.gateway.pg_host ?? c.gateway.host]);
    for (let i = 0; i < ports.length; i++) {
      for (let j = i + 1; j < ports.length; j++) {
        const [a, pa] = ports[i]!;
        const [b, pb] = ports[j]!;
        if (pa === pb && pa !== 0) problems.push(`${b}: ${pb} is also used by ${a}; each listener needs its own port`);
      }
    }
  }
  if (servesGateway(c) && c.gateway.processes > 1) {
    // Each process is a replica: key-session revocations and cache invalidations must reach the others.
    if (c.database.url === null) problems.push('gateway.processes: more than one gateway process needs database.url (the embedded store belongs to one process)');
    if (c.redis.url === null) problems.push('gateway.processes: more than one gateway process needs redis.url (in-process coordination cannot reach the other processes)');
  }
  if (c.audit.spool.segment_bytes > c.audit.spool.max_bytes) {
    problems.push('audit.spool.segment_bytes: must not exceed audit.spool.max_bytes');
  }
  if (c.audit.retry.initial_backoff_ms > c.audit.retry.max_backoff_ms) {
    problems.push('audit.retry.initial_backoff_ms: must not exceed audit.retry.max_backoff_ms');
  }
  if (c.pii.default_mode === 'deep' && !c.pii.deep_enabled) {
    problems.push('pii.default_mode: "deep" needs pii.deep_enabled: true');
  }
  if (c.pii.default_mode === 'fast' && !c.pii.fast_enabled && !c.pii.deep_enabled) {
    problems.push('pii.default_mode: "fast" needs pii.fast_enabled: true');
  }
  if (c.admin.session_idle_seconds > c.admin.session_ttl_seconds) {
    problems.push('admin.session_idle_seconds: must not exceed admin.session_ttl_seconds');
  }
  if (c.gateway.test_hooks.skip_sql_analysis && c.environment !== 'test') {
    problems.push('gateway.test_hooks.skip_sql_analysis: test-only; refused unless environment is test');
  }
  const n = c.notifications;
  if (n.enabled) {
    if (n.slack_bot_token_ref === null && n.slack_webhook_url_ref === null && n.slack_webhook_url === null) {
      problems.push('notifications.enabled: needs at least one Slack target (slack_bot_token_ref with slack_channel, or slack_webhook_url_ref)');
    }
    if (n.approval_events.length === 0) problems.push('notifications.approval_events: must name at least one event when notifications are enabled');
  }
  if (n.slack_bot_token_ref !== null && n.slack_channel === null) {
    problems.push('notifications.slack_channel: required with notifications.slack_bot_token_ref');
  }
  const o = c.auth.oidc;
  if (o.enabled) {
    if (o.issuer_url === null) problems.push('auth.oidc.issuer_url: required when auth.oidc.enabled is true');
    else if (c.environment !== 'production' && !isHttps(o.issuer_url) && !o.allow_insecure_endpoints) problems.push('auth.oidc.issuer_url: must use https unless auth.oidc.allow_insecure_endpoints is true (development only)');
    if (servesAdmin(c)) {
      if (o.admin_client_id === null) problems.push('auth.oidc.admin_client_id: required when auth.oidc.enabled is true');
      if (o.admin_client_secret_ref === null) problems.push('auth.oidc.admin_client_secret_ref: required when auth.oidc.enabled is true');
      if (o.admin_redirect_uri === null) problems.push('auth.oidc.admin_redirect_uri: required when auth.oidc.enabled is true');
    }
  }
  return problems;
}

/** Spec §9 production invariants, plus the refusal of the embedded adapters (DESIGN §2). */
export function productionProblems(c: Config, secrets: Secrets): string[] {
  if (c.environment !== 'production') return [];
  const problems: string[] = [];
  if (c.database.url === null) {
    problems.push('database.url: required in production (the embedded store is for development only)');
  }
  if (c.service_role !== 'migration' && c.redis.url === null) {
    problems.push('redis.url: required in production (the in-process coordination adapter is for development only)');
  }
  if (servesAdmin(c)) {
    const signing = secrets.get('admin.signing_secret_ref');
    if (signing === undefined) problems.push('admin.signing_secret_ref: required in production');
    else if (signing.length < MIN_PRODUCTION_SECRET_CHARS) problems.push(`admin.signing_secret_ref: the referenced secret must be at least ${MIN_PRODUCTION_SECRET_CHARS} characters in production`);
    if (!c.admin.cookie.secure) problems.push('admin.cookie.secure: must be true in production');
    // Admin sessions and passwords cross this listener (docs/tls.md "Production").
    if (c.admin.tls.cert_file === null && !c.admin.tls.trusted_tls_offload) problems.push('admin.tls: production needs cert_file and key_file, or trusted_tls_offload: true');
  }
  if (usesApiKeys(c)) {
    const pepper = secrets.get('auth.api_key_pepper_ref');
    if (pepper === undefined) problems.push('auth.api_key_pepper_ref: required in production');
    else if (pepper.length < MIN_PRODUCTION_SECRET_CHARS) problems.push(`auth.api_key_pepper_ref: the referenced secret must be at least ${MIN_PRODUCTION_SECRET_CHARS} characters in production`);
  }
  if (c.auth.legacy_unpeppered_keys_allowed) {
    problems.push('auth.legacy_unpeppered_keys_allowed: must be false in production');
  }
  // Agents' bearer keys cross the gateway's HTTP listener (docs/tls.md "Production").
  if (servesGateway(c) && c.gateway.tls.cert_file === null && !c.gateway.tls.trusted_tls_offload) {
    problems.push('gateway.tls: production needs cert_file and key_file, or trusted_tls_offload: true');
  }
  if (servesGateway(c) && c.gateway.pg_enabled) {
    const t = c.gateway.pg_tls;
    const tlsTerminated = t.cert_file !== null && t.key_file !== null && t.require_client_tls;
    if (!tlsTerminated && !t.trusted_tls_offload) {
      problems.push('gateway.pg_tls: production needs cert_file, key_file and require_client_tls: true, or trusted_tls_offload: true');
    }
  }
  if (c.database.ssl_mode !== 'verify-full') problems.push('database.ssl_mode: must be verify-full in production');
  if (c.database.ssl_ca_file === null) problems.push('database.ssl_ca_file: required in production');
  if (c.audit.durability_mode !== 'strict') problems.push('audit.durability_mode: must be strict in production');
  const o = c.auth.oidc;
  if (o.allow_insecure_endpoints) problems.push('auth.oidc.allow_insecure_endpoints: must be false in production');
  if (o.enabled) {
    if (!isHttps(o.issuer_url)) problems.push('auth.oidc.issuer_url: must use https in production');
    if (o.admin_redirect_uri !== null && !isHttps(o.admin_redirect_uri)) problems.push('auth.oidc.admin_redirect_uri: must use https in production');
  }
  return problems;
}
