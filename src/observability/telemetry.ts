// OpenTelemetry export (spec §9 observability): loaded and started only when observability.otlp_endpoint is set, with OTLP/HTTP trace and metric exporters; nothing at all otherwise.
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { AggregationTemporality, DataPointType, MeterProvider, PeriodicExportingMetricReader, type CollectionResult, type HistogramMetricData, type MetricProducer } from '@opentelemetry/sdk-metrics';
import { ValueType, type Attributes, type HrTime } from '@opentelemetry/api';
import { hrTime } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { LATENCY_BUCKETS, type ExportedHistogram, type Metrics } from './metrics.js';
import { Tracing } from './tracing.js';

export interface TelemetryOptions {
  /** The collector's base URL; `/v1/traces` and `/v1/metrics` are appended (as with OTEL_EXPORTER_OTLP_ENDPOINT). */
  endpoint: string;
  serviceName: string;
  role: string;
  instanceId: string;
  version: string;
  metricsIntervalMs: number;
  /** Head sampling of root spans; a sampled or unsampled parent (an agent's traceparent) is followed. */
  sampleRatio: number;
  /** New traces recorded a second at most (observability.trace_max_per_second). */
  maxTracesPerSecond: number;
}

/**
 * The running exporters of one process. The rest of the code sees only `Tracing` (possibly absent): with no
 * endpoint configured no provider, exporter, timer or propagator exists (docs/observability.md).
 */
export class Telemetry {
  readonly tracing: Tracing;
  readonly #traces: TracerProvider;
  readonly #meters: MeterProvider;

  private constructor(traces: TracerProvider, meters: MeterProvider, sampleRatio: number, maxTracesPerSecond: number) {
    this.#traces = traces;
    this.#meters = meters;
    this.tracing = new Tracing(traces.getTracer('gatehouse'), sampleRatio, maxTracesPerSecond);
  }

  static start(opts: TelemetryOptions, metrics: Metrics): Telemetry {
    const base = opts.endpoint.replace(/\/+$/, '');
    const resource = resourceFromAttributes({
      'service.name': opts.serviceName,
      'service.version': opts.version,
      'service.instance.id': opts.instanceId,
      'gatehouse.role': opts.role,
    });
    const traces = new TracerProvider({
      resource,
      // New traces are sampled by Tracing before a span exists; the SDK follows a client's sampled flag.
      sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${base}/v1/traces` }), scheduledDelayMillis: 1_000, maxQueueSize: 8_192, maxExportBatchSize: 512 })],
    });
    const meters = new MeterProvider({
      resource,
      readers: [
        new PeriodicExportingMetricReader({
          exporter: new OTLPMetricExporter({ url: `${base}/v1/metrics` }),
          exportIntervalMillis: opts.metricsIntervalMs,
          exportTimeoutMillis: Math.min(opts.metricsIntervalMs, 30_000),
          metricProducers: [registryHistograms(metrics)],
        }),
      ],
    });
    metrics.mirrorTo(meters.getMeter('gatehouse'));
    return new Telemetry(traces, meters, opts.sampleRatio, opts.maxTracesPerSecond);
  }

  /** Sends what is pending (tests, shutdown). */
  async flush(): Promise<void> {
    await Promise.allSettled([this.#traces.forceFlush(), this.#meters.forceFlush()]);
  }

  async shutdown(): Promise<void> {
    await Promise.allSettled([this.#traces.shutdown(), this.#meters.shutdown()]);
  }
}

/**
 * The registry's latency histograms as OTLP cumulative histograms, built when the reader exports (every
 * metrics_export_interval_ms) instead of one OTel `record` per request: the Prometheus histogram already counts
 * each request, so export adds no per-request work (docs/decisions/0023-operations-scale.md).
 */
function registryHistograms(metrics: Metrics): MetricProducer {
  const startTime: HrTime = hrTime();
  return {
    async collect(): Promise<CollectionResult> {
      const endTime = hrTime();
      const histograms = await metrics.histograms();
      return {
        // The reader keeps the SDK's own resource and takes only the scope metrics of an added producer.
        resourceMetrics: { resource: undefined as never, scopeMetrics: [{ scope: { name: 'gatehouse' }, metrics: histograms.map((h) => toOtlp(h, startTime, endTime)) }] },
        errors: [],
      };
    },
  };
}

function toOtlp(h: ExportedHistogram, startTime: HrTime, endTime: HrTime): HistogramMetricData {
  const series = new Map<string, { attributes: Attributes; cumulative: number[]; sum: number; count: number }>();
  for (const v of h.values) {
    const { le, ...labels } = v.labels;
    const key = JSON.stringify(labels);
    let s = series.get(key);
    if (!s) series.set(key, (s = { attributes: labels as Attributes, cumulative: [], sum: 0, count: 0 }));
    if (v.metricName?.endsWith('_sum')) s.sum = v.value;
    else if (v.metricName?.endsWith('_count')) s.count = v.value;
    else if (le !== '+Inf') s.cumulative.push(v.value);
  }
  return {
    descriptor: { name: h.name, description: h.description, unit: 's', valueType: ValueType.DOUBLE },
    aggregationTemporality: AggregationTemporality.CUMULATIVE,
    dataPointType: DataPointType.HISTOGRAM,
    dataPoints: [...series.values()].map((s) => ({
      startTime,
      endTime,
      attributes: s.attributes,
      // Prometheus buckets are cumulative (≤ le); OTLP's count each bucket alone, plus one above the last bound.
      value: { buckets: { boundaries: LATENCY_BUCKETS, counts: [...s.cumulative.map((c, i) => c - (i > 0 ? s.cumulative[i - 1]! : 0)), s.count - (s.cumulative.at(-1) ?? 0)] }, sum: s.sum, count: s.count },
    })),
  };
}
