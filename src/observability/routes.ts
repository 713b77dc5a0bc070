// GET /metrics (Prometheus text) on the admin and gateway listeners, and the gateway's component gauges (docs/observability.md).
import type { FastifyInstance } from 'fastify';
import type { AdminModule } from '../admin/module.js';
import type { Services } from '../runtime/services.js';
import type { GovernanceRuntime } from '../runtime/governance.js';
import { authorizeStats } from '../gateway/stats.js';
import { postgresRuntimeFor } from '../connectors/postgres-runtime.js';
import { countApprovalsByStatus } from '../approvals/store.js';
import type { Metrics } from './metrics.js';

function sendMetrics(metrics: Metrics) {
  return async (_req: unknown, reply: { type(t: string): unknown; send(b: string): unknown }) => {
    const body = await metrics.render();
    reply.type(metrics.contentType);
    return reply.send(body);
  };
}

/**
 * The admin listener's /metrics: behind the admin guard (session or admin API token, any admin role) unless
 * observability.public_stats_enabled, which the guard reads too. Also reports approvals by state.
 */
export const metricsModule: AdminModule = ({ app, api, services }) => {
  services.metrics.addGauge('gatehouse_approvals', 'Approvals by state in the control store (pending ones await a human).', ['status'], async () => {
    const counts = await countApprovalsByStatus(services.db);
    return Object.entries(counts).map(([status, value]) => ({ labels: { status }, value }));
  });
  app.get('/metrics', sendMetrics(services.metrics));
  api.describe({ method: 'GET', url: '/metrics', summary: "This process's metrics in Prometheus text format (docs/observability.md)", tags: ['health'], produces: ['text/plain'] });
};

/** The gateway listener's /metrics (same gate as /stats) and the gauges of what only a gateway holds. */
export function registerGatewayMetrics(app: FastifyInstance, services: Services, governance: GovernanceRuntime, connections: { activeConnections(): number }): void {
  const m = services.metrics;
  m.addGauge('gatehouse_http_connections', 'Open client connections on the gateway HTTP listener.', [], () => [{ value: connections.activeConnections() }]);
  m.addCounterReader('gatehouse_cache_lookups_total', 'Governed cache lookups by result (l1_hit, l2_hit, miss, bypass).', ['result'], () => {
    const s = governance.cache.stats();
    return [
      { labels: { result: 'l1_hit' }, value: s.l1_hits },
      { labels: { result: 'l2_hit' }, value: s.l2_hits },
      { labels: { result: 'miss' }, value: s.misses },
      { labels: { result: 'bypass' }, value: s.bypasses },
    ];
  });
  m.addGauge('gatehouse_cache_l1_bytes', 'Bytes held in this process\'s L1 cache.', [], () => [{ value: governance.cache.stats().l1_bytes }]);
  m.addGauge('gatehouse_circuit_open', '1 for each source whose circuit is open or isolated.', ['source_id'], () =>
    Object.entries(governance.circuits.states()).map(([source_id, state]) => ({ labels: { source_id }, value: state === 'open' || state === 'isolated' ? 1 : 0 })),
  );
  // The PostgreSQL sources' pools (wire sessions, MCP query, approvals): what /stats shows, as series.
  const pools = async () => (await postgresRuntimeFor(services)).pools.stats();
  m.addGauge('gatehouse_upstream_pool_connections', 'Upstream connections per PostgreSQL source pool, by state (open, idle, max).', ['source_id', 'state'], async () =>
    (await pools()).flatMap((p) => [
      { labels: { source_id: p.source_id, state: 'open' }, value: p.open },
      { labels: { source_id: p.source_id, state: 'idle' }, value: p.idle },
      { labels: { source_id: p.source_id, state: 'max' }, value: p.max },
    ]),
  );
  m.addGauge('gatehouse_upstream_pool_waiting', 'Requests waiting now for an upstream connection, per source.', ['source_id'], async () => (await pools()).map((p) => ({ labels: { source_id: p.source_id }, value: p.waiting })));
  m.addCounterReader('gatehouse_upstream_pool_waits_total', 'Times a request had to wait for an upstream connection, per source.', ['source_id'], async () => (await pools()).map((p) => ({ labels: { source_id: p.source_id }, value: p.waits })));
  m.addCounterReader('gatehouse_upstream_pool_wait_timeouts_total', 'Waits for an upstream connection that timed out (53300), per source.', ['source_id'], async () => (await pools()).map((p) => ({ labels: { source_id: p.source_id }, value: p.wait_timeouts })));
  app.get('/metrics', async (req, reply) => {
    await authorizeStats(services, governance, req);
    const body = await m.render();
    return reply.type(m.contentType).send(body);
  });
}
