// OpenTelemetry export (spec §9 observability): loaded and started only when observability.otlp_endpoint is set, with OTLP/HTTP trace and metric exporters; nothing at all otherwise.
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import type { Metrics } from './metrics.js';
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
}

/**
 * The running exporters of one process. The rest of the code sees only `Tracing` (possibly absent): with no
 * endpoint configured no provider, exporter, timer or propagator exists (docs/observability.md).
 */
export class Telemetry {
  readonly tracing: Tracing;
  readonly #traces: TracerProvider;
  readonly #meters: MeterProvider;

  private constructor(traces: TracerProvider, meters: MeterProvider, sampleRatio: number) {
    this.#traces = traces;
    this.#meters = meters;
    this.tracing = new Tracing(traces.getTracer('gatehouse'), sampleRatio);
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
      readers: [new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter({ url: `${base}/v1/metrics` }), exportIntervalMillis: opts.metricsIntervalMs, exportTimeoutMillis: Math.min(opts.metricsIntervalMs, 30_000) })],
    });
    metrics.mirrorTo(meters.getMeter('gatehouse'));
    return new Telemetry(traces, meters, opts.sampleRatio);
  }

  /** Sends what is pending (tests, shutdown). */
  async flush(): Promise<void> {
    await Promise.allSettled([this.#traces.forceFlush(), this.#meters.forceFlush()]);
  }

  async shutdown(): Promise<void> {
    await Promise.allSettled([this.#traces.shutdown(), this.#meters.shutdown()]);
  }
}
