// A real OTLP/HTTP receiver for telemetry tests: takes the JSON protocol (what the OTLP/HTTP exporters send), keeps every raw body, and flattens spans and metric names.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  status: { code?: number; message?: string };
  attributes: Record<string, string | number | boolean>;
  resource: Record<string, string | number | boolean>;
  /** Start and end, nanoseconds since the epoch. */
  start: bigint;
  end: bigint;
}

export interface OtlpReceiver extends AsyncDisposable {
  port: number;
  url: string;
  /** Every request body as received, by path: what a grep for secrets must cover. */
  bodies: Array<{ path: string; contentType: string; text: string }>;
  spans(): ReceivedSpan[];
  metricNames(): string[];
  /** Resolves when `predicate` holds over the spans received, or rejects after `timeoutMs`. */
  waitForSpans(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

function flatten(attrs: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const a of attrs ?? []) {
    const v = a.value;
    out[a.key] = v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.boolValue ?? v.doubleValue ?? '';
  }
  return out;
}

export async function startOtlpReceiver(port = 0): Promise<OtlpReceiver> {
  const bodies: OtlpReceiver['bodies'] = [];
  const spans: ReceivedSpan[] = [];
  const metricNames = new Set<string>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '';
      bodies.push({ path, contentType: req.headers['content-type'] ?? '', text });
      try {
        const doc = JSON.parse(text) as Record<string, unknown>;
        if (path === '/v1/traces') {
          for (const rs of (doc.resourceSpans as Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }>) ?? []) {
            const resource = flatten(rs.resource?.attributes);
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) {
                spans.push({
                  traceId: s.traceId as string,
                  spanId: s.spanId as string,
                  parentSpanId: (s.parentSpanId as string | undefined) ?? '',
                  name: s.name as string,
                  kind: s.kind as number,
                  status: (s.status as ReceivedSpan['status'] | undefined) ?? {},
                  attributes: flatten(s.attributes as KeyValue[]),
                  resource,
                  start: BigInt(s.startTimeUnixNano as string),
                  end: BigInt(s.endTimeUnixNano as string),
                });
              }
            }
          }
        } else if (path === '/v1/metrics') {
          for (const rm of (doc.resourceMetrics as Array<{ scopeMetrics: Array<{ metrics: Array<{ name: string }> }> }>) ?? []) {
            for (const sm of rm.scopeMetrics ?? []) for (const m of sm.metrics ?? []) metricNames.add(m.name);
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  const actual = (server.address() as AddressInfo).port;
  const close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    port: actual,
    url: `http://127.0.0.1:${actual}`,
    bodies,
    spans: () => [...spans],
    metricNames: () => [...metricNames],
    async waitForSpans(predicate, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(spans)) {
        if (Date.now() > deadline) throw new Error(`spans not received in ${timeoutMs} ms; have: ${spans.map((s) => s.name).join(', ')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      return [...spans];
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
