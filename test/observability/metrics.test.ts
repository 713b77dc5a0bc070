// GET /metrics scraped by a real Prometheus server (Debian's), with its authentication; and with observability.otlp_endpoint unset nothing is exported and no SDK runs.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startWorld, type World } from '../support/world.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.js';
import { freePort } from '../support/ports.js';

const SOURCE = 'metrics_http';

function sample(text: string, name: string, labels: Record<string, string>): number | null {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return null;
}

describe('with metrics behind authentication', () => {
  let world: World;
  let upstream: TestUpstream;
  let agent: { id: number; key: string };
  let dir: string;
  let prometheus: ChildProcess | null = null;

  beforeAll(async () => {
    upstream = await startUpstream({
      '/base/items': (_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' }).end('{"items":[1,2]}'),
    });
    world = await startWorld({ privateSources: [SOURCE] });
    await world.httpSource(SOURCE, `http://127.0.0.1:${upstream.port}/base/`);
    agent = await world.agent('metrics-agent', [{ source_id: SOURCE, role_key: 'reader' }]);
    dir = await mkdtemp(path.join(tmpdir(), 'gh-prom-'));
  }, 60_000);

  afterAll(async () => {
    prometheus?.kill('SIGTERM');
    await world?.stop();
    await upstream?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('requests, decisions, statuses and cache outcomes are counted per front door', async () => {
    expect((await world.proxy(agent.key, 'GET', `/proxy/${SOURCE}/items`)).status).toBe(200); // miss
    expect((await world.proxy(agent.key, 'GET', `/proxy/${SOURCE}/items`)).status).toBe(200); // hit
    expect((await world.proxy('wrong', 'GET', `/proxy/${SOURCE}/items`)).status).toBe(401);
    expect((await world.proxy(agent.key, 'DELETE', `/proxy/${SOURCE}/items`)).status).toBe(403);
    const m = await world.admin('GET', '/metrics');
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toContain('text/plain');
    expect(sample(m.text, 'gatehouse_requests_total', { channel: 'http', decision: 'allow', status: '200' })).toBe(2);
    expect(sample(m.text, 'gatehouse_requests_total', { channel: 'http', decision: 'deny', status: '401' })).toBe(1);
    expect(sample(m.text, 'gatehouse_requests_total', { channel: 'http', decision: 'deny', status: '403' })).toBe(1);
    expect(sample(m.text, 'gatehouse_request_duration_seconds_count', { channel: 'http', decision: 'allow', status: '200' })).toBe(2);
    expect(sample(m.text, 'gatehouse_cache_requests_total', { channel: 'http', outcome: 'hit' })).toBe(1);
    expect(sample(m.text, 'gatehouse_cache_requests_total', { channel: 'http', outcome: 'miss' })).toBe(1);
    expect(sample(m.text, 'gatehouse_cache_lookups_total', { result: 'l1_hit' })).toBe(1);
    expect(sample(m.text, 'gatehouse_approvals', { status: 'pending' })).toBe(0);
    expect(sample(m.text, 'gatehouse_audit_buffer_entries', {})).not.toBeNull();
    expect(sample(m.text, 'gatehouse_audit_spool_bytes', {})).toBe(0);
    expect(sample(m.text, 'gatehouse_wire_sessions', {})).toBe(0);
    expect(m.text).toContain('gatehouse_audit_write_duration_seconds_bucket');
    expect(m.text).toContain('process_cpu_seconds_total');
  });

  test('admin /metrics needs an admin; gateway /metrics the /stats credentials', async () => {
    expect((await fetch(`${world.svc.adminUrl}/metrics`)).status).toBe(401);
    expect((await fetch(`${world.svc.gatewayUrl}/metrics`)).status).toBe(401);
    expect((await fetch(`${world.svc.gatewayUrl}/metrics`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    expect((await fetch(`${world.svc.gatewayUrl}/metrics`, { headers: { authorization: `Bearer ${world.token}` } })).status).toBe(200);
  });

  test('Prometheus scrapes both listeners with a bearer token', async () => {
    const port = await freePort();
    const config = [
      'global: { scrape_interval: 1s, scrape_timeout: 1s }',
      'scrape_configs:',
      ...[['admin', world.svc.adminUrl], ['gateway', world.svc.gatewayUrl]].flatMap(([job, url]) => [
        `  - job_name: ${job}`,
        `    authorization: { type: Bearer, credentials: "${world.token}" }`,
        `    static_configs: [{ targets: ["${new URL(url!).host}"] }]`,
      ]),
    ].join('\n');
    await writeFile(path.join(dir, 'prometheus.yml'), config);
    prometheus = spawn('prometheus', [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' });
    const query = async (q: string) => {
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`).catch(() => null);
      if (!res || res.status !== 200) return [];
      return ((await res.json()) as { data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> } }).data.result;
    };
    const deadline = Date.now() + 30_000;
    let up: Awaited<ReturnType<typeof query>> = [];
    let requests: Awaited<ReturnType<typeof query>> = [];
    while (Date.now() < deadline) {
      up = await query('up == 1');
      requests = await query('gatehouse_requests_total{job="gateway",channel="http",status="200"}');
      if (up.length === 2 && requests.length > 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(up.map((r) => r.metric.job).sort()).toEqual(['admin', 'gateway']);
    expect(Number(requests[0]!.value[1])).toBe(2);
    const pending = await query('gatehouse_approvals{job="admin",status="pending"}');
    expect(pending.map((r) => r.value[1])).toEqual(['0']);
  }, 45_000);
});

describe('with observability.otlp_endpoint unset and public statistics', () => {
  let world: World;
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    // The OTLP exporters' default target: if anything were exported without an endpoint, it would arrive here.
    receiver = await startOtlpReceiver(4318).catch(() => startOtlpReceiver());
    world = await startWorld({ env: { SERVICE_OBSERVABILITY__PUBLIC_STATS_ENABLED: 'true' } });
  }, 60_000);

  afterAll(async () => {
    await world?.stop();
    await receiver?.close();
  });

  test('no tracer exists and nothing is sent; /metrics is open on both listeners', async () => {
    expect(world.svc.running.services.tracing).toBeNull();
    const agent = await world.agent('quiet-agent');
    expect((await world.proxy(agent.key, 'GET', '/proxy/none/x', { headers: { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` } })).status).toBe(404);
    expect((await fetch(`${world.svc.adminUrl}/metrics`)).status).toBe(200);
    const g = await fetch(`${world.svc.gatewayUrl}/metrics`);
    expect(g.status).toBe(200);
    expect(await g.text()).toContain('gatehouse_requests_total{channel="http",decision="deny",status="404"} 1');
    await new Promise((r) => setTimeout(r, 2_000));
    expect(receiver.bodies).toEqual([]);
  });
});
