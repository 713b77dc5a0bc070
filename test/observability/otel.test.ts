// OpenTelemetry export against a real OTLP/HTTP receiver: span structure for a governed proxy request, a wire statement and an MCP tool call; W3C parents accepted and not forwarded; no secret in anything exported or logged.
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startWorld, OWNER_PASSWORD, type World } from '../support/world.js';
import { createTestDatabase, TEST_PG_HOST, TEST_PG_PORT, type TestDatabase } from '../support/pg.js';
import { startUpstream, type TestUpstream } from '../egress/upstream-server.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';

const HTTP_SOURCE = 'otel_http';
const PG_SOURCE = 'otel_pg';
const UPSTREAM_TOKEN = `upstream-token-${randomBytes(12).toString('hex')}`;

let receiver: OtlpReceiver;
let upstream: TestUpstream;
let database: TestDatabase;
let world: World;
let agent: { id: number; key: string };
const upstreamHeaders: IncomingHttpHeaders[] = [];
const logLines: string[] = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  upstream = await startUpstream({
    '/base/items': (req, res) => {
      upstreamHeaders.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' }).end(JSON.stringify({ items: [{ id: 1, email: 'jane@example.com' }] }));
    },
    '/base/slow': (_req, res) => {
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'), 1_500);
    },
  });
  database = await createTestDatabase();
  const c = await database.connect();
  await c.query("create table customers (id int primary key, name text); insert into customers values (1, 'Ada')");
  await c.end();
  world = await startWorld({
    privateSources: [HTTP_SOURCE, PG_SOURCE],
    env: { SERVICE_OBSERVABILITY__OTLP_ENDPOINT: receiver.url, SERVICE_OBSERVABILITY__METRICS_EXPORT_INTERVAL_MS: '300', SERVICE_OBSERVABILITY__TRACE_SAMPLE_RATIO: '1', SERVICE_OBSERVABILITY__LOG_LEVEL: 'debug' },
    logDestination: { write: (line: string) => void logLines.push(line) },
  });
  await world.httpSource(HTTP_SOURCE, `http://127.0.0.1:${upstream.port}/base/`, { token: UPSTREAM_TOKEN });
  const created = await world.admin('POST', '/api/data-sources', {
    name: PG_SOURCE,
    source_id: PG_SOURCE,
    source_type: 'postgres',
    connection_config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: database.name, user: 'postgres', ssl_mode: 'disable', pool_max: 4 },
    create_default_roles: true,
  });
  expect(created.status).toBe(201);
  const deadline = Date.now() + 5_000;
  while (!world.svc.running.services.registry.get(PG_SOURCE) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  agent = await world.agent('otel-agent', [
    { source_id: HTTP_SOURCE, role_key: 'reader' },
    { source_id: PG_SOURCE, role_key: 'reader' },
  ]);
}, 90_000);

afterAll(async () => {
  await world?.stop();
  await upstream?.close();
  await database?.drop();
  await receiver?.close();
});

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) => spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);
const names = (spans: ReceivedSpan[]) => spans.map((s) => s.name).sort();

describe('traces', () => {
  test('a governed proxy request: server span under the agent\'s traceparent carrying the request, stage spans and the audit write beneath it; traceparent never forwarded', async () => {
    const traceId = randomBytes(16).toString('hex');
    const parentId = randomBytes(8).toString('hex');
    const a = await world.proxy(agent.key, 'GET', `/proxy/${HTTP_SOURCE}/items`, { headers: { traceparent: `00-${traceId}-${parentId}-01`, tracestate: 'vendor=x' } });
    expect(a.status).toBe(200);
    expect(upstreamHeaders.at(-1)).toBeDefined();
    expect(upstreamHeaders.at(-1)!.traceparent).toBeUndefined();
    expect(upstreamHeaders.at(-1)!.tracestate).toBeUndefined();

    const spans = await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceId && s.name === 'gatehouse.audit.write'));
    const server = spans.find((s) => s.traceId === traceId && s.parentSpanId === parentId)!;
    expect(server).toBeDefined();
    expect(server.name).toBe('GET /proxy/:source_id/*');
    expect(server.kind).toBe(2); // SERVER
    expect(server.attributes['http.route']).toBe('/proxy/:source_id/*');
    expect(server.attributes['http.response.status_code']).toBe(200);
    expect(server.attributes['gatehouse.identity_id']).toBe(agent.id);
    expect(server.attributes['gatehouse.source_id']).toBe(HTTP_SOURCE);
    expect(server.resource['service.name']).toBe('gatehouse');

    // The server span is the request's span (docs/decisions/0030-telemetry-overhead.md): no level between it and the stages.
    const request = server;
    expect(request.attributes['gatehouse.decision']).toBe('allow');
    expect(request.attributes['gatehouse.cache']).toBe('miss');
    expect(names(childrenOf(spans, request))).toEqual(
      ['gatehouse.audit.write', 'gatehouse.cache_lookup', 'gatehouse.cache_store', 'gatehouse.policy', 'gatehouse.redact', 'gatehouse.upstream'].sort(),
    );
    // Stage spans are timed from before each stage ran to after it returned: inside the request span, in pipeline
    // order, one after the other. The SDK anchors each span to Date.now()'s millisecond, hence the 1 ms allowance.
    const ms = 1_000_000n;
    const stages = ['gatehouse.policy', 'gatehouse.cache_lookup', 'gatehouse.upstream', 'gatehouse.redact', 'gatehouse.cache_store'].map((n) => childrenOf(spans, request).find((s) => s.name === n)!);
    for (const [i, stage] of stages.entries()) {
      expect(stage.start).toBeGreaterThanOrEqual(request.start - ms);
      expect(stage.end).toBeGreaterThanOrEqual(stage.start);
      expect(stage.end).toBeLessThanOrEqual(request.end + ms);
      if (i > 0) expect(stage.start).toBeGreaterThanOrEqual(stages[i - 1]!.end - ms);
    }
    // The upstream answers within milliseconds over loopback: its span is not a clock artefact of whole milliseconds or seconds.
    expect(stages[2]!.end - stages[2]!.start).toBeGreaterThan(0n);
    expect(stages[2]!.end - stages[2]!.start).toBeLessThan(5_000_000_000n);

    // The same request again is a cache hit: no upstream span, the hit on the request span.
    const traceId2 = randomBytes(16).toString('hex');
    const again = await world.proxy(agent.key, 'GET', `/proxy/${HTTP_SOURCE}/items`, { headers: { traceparent: `00-${traceId2}-${parentId}-01` } });
    expect(again.status).toBe(200);
    const spans2 = await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceId2 && s.name === 'gatehouse.audit.write'));
    const hit = spans2.find((s) => s.traceId === traceId2 && s.name === 'GET /proxy/:source_id/*')!;
    expect(hit.attributes['gatehouse.cache']).toBe('hit');
    expect(names(childrenOf(spans2, hit))).not.toContain('gatehouse.upstream');
  });

  test('a request the cache does not apply to has no idle cache spans', async () => {
    const traceId = randomBytes(16).toString('hex');
    // A conditional request bypasses the governed cache (nothing is looked up or stored).
    const a = await world.proxy(agent.key, 'GET', `/proxy/${HTTP_SOURCE}/items`, { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`, 'if-none-match': '"x"' } });
    expect(a.status).toBe(200);
    const spans = await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceId && s.name === 'gatehouse.audit.write'));
    const request = spans.find((s) => s.traceId === traceId && s.name === 'GET /proxy/:source_id/*')!;
    expect(request.attributes['gatehouse.cache']).toBe('bypass');
    expect(names(childrenOf(spans, request))).toEqual(['gatehouse.audit.write', 'gatehouse.policy', 'gatehouse.redact', 'gatehouse.upstream']);
  });

  test('a client that goes away before the answer: the server span ends as client_closed', async () => {
    const traceId = randomBytes(16).toString('hex');
    const url = new URL(`${world.svc.gatewayUrl}/proxy/${HTTP_SOURCE}/slow`);
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s = connect(Number(url.port), url.hostname, () => resolve(s)).once('error', reject);
    });
    socket.write(`GET ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${agent.key}\r\ntraceparent: 00-${traceId}-${randomBytes(8).toString('hex')}-01\r\n\r\n`);
    await new Promise((r) => setTimeout(r, 300));
    socket.destroy();
    const spans = await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceId && s.name === 'GET /proxy/:source_id/*'));
    const server = spans.find((s) => s.traceId === traceId && s.name === 'GET /proxy/:source_id/*')!;
    expect(server.status).toEqual({ code: 2, message: 'client_closed' });
    expect(server.attributes['http.response.status_code']).toBeUndefined();
  });

  test('a client\'s unsampled traceparent is followed: no span of that trace is recorded', async () => {
    const traceId = randomBytes(16).toString('hex');
    expect((await world.proxy(agent.key, 'GET', `/proxy/${HTTP_SOURCE}/items`, { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-00` } })).status).toBe(200);
    // A later sampled request's spans arriving shows the exporter has flushed past the unsampled one.
    const marker = randomBytes(16).toString('hex');
    expect((await world.proxy(agent.key, 'GET', `/proxy/${HTTP_SOURCE}/items`, { headers: { traceparent: `00-${marker}-${randomBytes(8).toString('hex')}-01` } })).status).toBe(200);
    await receiver.waitForSpans((all) => all.some((s) => s.traceId === marker && s.name === 'gatehouse.audit.write'));
    expect(receiver.spans().filter((s) => s.traceId === traceId)).toEqual([]);
  });

  test('a refused request: the error code on the server span, no upstream span', async () => {
    const traceId = randomBytes(16).toString('hex');
    const a = await world.proxy('not-a-key', 'GET', `/proxy/${HTTP_SOURCE}/items`, { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } });
    expect(a.status).toBe(401);
    const spans = await receiver.waitForSpans((all) => all.some((s) => s.traceId === traceId && s.name === 'gatehouse.audit.write'));
    const request = spans.find((s) => s.traceId === traceId && s.name === 'GET /proxy/:source_id/*')!;
    expect(request.status.code).toBe(2); // ERROR
    expect(request.attributes['gatehouse.error_code']).toBe('unauthenticated');
    expect(names(childrenOf(spans, request))).toEqual(['gatehouse.audit.write']);
  });

  test('one span per wire statement, its stages beneath it', async () => {
    const port = world.svc.running.addresses['gateway.pg_port']!.port;
    const c = new pg.Client({ host: '127.0.0.1', port, user: 'otel-agent', password: agent.key, database: PG_SOURCE });
    await c.connect();
    const r = await c.query('select name from customers where id = $1', [1]);
    expect(r.rows).toEqual([{ name: 'Ada' }]);
    await c.end();
    const spans = await receiver.waitForSpans((all) => all.some((s) => s.name === 'gatehouse.pgwire.statement' && s.attributes['gatehouse.source_id'] === PG_SOURCE && s.attributes['gatehouse.operation'] === 'read'));
    const statement = spans.find((s) => s.name === 'gatehouse.pgwire.statement' && s.attributes['gatehouse.operation'] === 'read')!;
    expect(statement.parentSpanId).toBe('');
    expect(statement.attributes['gatehouse.identity_id']).toBe(agent.id);
    await receiver.waitForSpans((all) => childrenOf(all, statement).some((s) => s.name === 'gatehouse.audit.write'));
    expect(names(childrenOf(receiver.spans(), statement))).toEqual(expect.arrayContaining(['gatehouse.policy', 'gatehouse.audit.write']));
  });

  test('one span per MCP tool call beneath the HTTP request span', async () => {
    const client = new Client({ name: 'otel-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
    const result = await client.callTool({ name: 'query', arguments: { source_id: PG_SOURCE, sql: 'select id from customers' } });
    expect(result.isError).toBeFalsy();
    await client.close();
    const spans = await receiver.waitForSpans((all) => all.some((s) => s.name === 'gatehouse.mcp.tool_call' && s.attributes['gatehouse.action'] === 'mcp.query'));
    const call = spans.find((s) => s.name === 'gatehouse.mcp.tool_call' && s.attributes['gatehouse.action'] === 'mcp.query')!;
    const server = spans.find((s) => s.spanId === call.parentSpanId)!;
    expect(server.name).toBe('POST /mcp');
    expect(server.kind).toBe(2);
    await receiver.waitForSpans((all) => childrenOf(all, call).some((s) => s.name === 'gatehouse.audit.write'));
    expect(names(childrenOf(receiver.spans(), call))).toEqual(expect.arrayContaining(['gatehouse.policy', 'gatehouse.audit.write']));
  });

  test('admin requests get server spans too', async () => {
    const a = await world.admin('GET', '/api/identities');
    expect(a.status).toBe(200);
    await receiver.waitForSpans((all) => all.some((s) => s.name === 'GET /api/identities' && s.attributes['gatehouse.listener'] === 'admin' && s.attributes['http.response.status_code'] === 200));
  });
});

test('metrics are exported over OTLP', async () => {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && !receiver.metricNames().includes('gatehouse.requests')) await new Promise((r) => setTimeout(r, 100));
  expect(receiver.metricNames()).toEqual(expect.arrayContaining(['gatehouse.requests', 'gatehouse.request.duration', 'gatehouse.audit_buffer_entries', 'gatehouse.wire_sessions']));
  const body = receiver.bodies.find((b) => b.path === '/v1/metrics')!;
  expect(body.contentType).toContain('application/json');
  // The request histogram is read from the Prometheus registry at export time: buckets add up to its count, one
  // bucket more than bounds, and its count is the request counter's (both read in the same export).
  type Dp = { attributes: Array<{ key: string }>; count?: string | number; bucketCounts?: Array<string | number>; explicitBounds?: number[]; asDouble?: number; asInt?: string | number };
  type M = { name: string; histogram?: { dataPoints: Dp[] }; sum?: { dataPoints: Dp[] } };
  const last = [...receiver.bodies].reverse().find((b) => b.path === '/v1/metrics' && b.text.includes('gatehouse.request.duration'))!;
  const metrics = (JSON.parse(last.text) as { resourceMetrics: Array<{ scopeMetrics: Array<{ metrics: M[] }> }> }).resourceMetrics.flatMap((r) => r.scopeMetrics.flatMap((sm) => sm.metrics));
  const histogram = metrics.find((m) => m.name === 'gatehouse.request.duration')!.histogram!.dataPoints;
  let histogramCount = 0;
  for (const dp of histogram) {
    expect(dp.bucketCounts!.length).toBe(dp.explicitBounds!.length + 1);
    expect(dp.bucketCounts!.reduce((a: number, c) => a + Number(c), 0)).toBe(Number(dp.count));
    histogramCount += Number(dp.count);
  }
  const requests = metrics.find((m) => m.name === 'gatehouse.requests')!.sum!.dataPoints.reduce((a, dp) => a + Number(dp.asDouble ?? dp.asInt ?? 0), 0);
  expect(histogramCount).toBeGreaterThan(0);
  expect(histogramCount).toBe(requests);
});

test('no key, token or password in anything exported or logged', async () => {
  await new Promise((r) => setTimeout(r, 1_500));
  const scraped = await world.admin('GET', '/metrics');
  expect(scraped.status).toBe(200);
  const everything = [...receiver.bodies.map((b) => b.text), ...logLines, scraped.text].join('\n');
  expect(receiver.bodies.some((b) => b.path === '/v1/traces')).toBe(true);
  expect(logLines.length).toBeGreaterThan(10);
  for (const secret of [agent.key, world.token, OWNER_PASSWORD, UPSTREAM_TOKEN]) {
    expect(everything.includes(secret), `a secret (${secret.slice(0, 6)}…) was exported or logged`).toBe(false);
  }
});
