// The process's metrics (spec §9 observability): one registry rendered as Prometheus text at /metrics and mirrored to OTLP when an endpoint is set; see docs/observability.md.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Attributes, Meter, ObservableResult } from '@opentelemetry/api';
import type { AuditEntry } from '../audit/entry.js';
import { CountedSeries, type LabelSet } from './request-series.js';

/** Request latency buckets, seconds: a cache hit is sub-millisecond, an upstream call tens of milliseconds, a timeout seconds. */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** One gauge's current values, read when scraped (or exported): label values by label name, and the number. */
export type GaugeSample = { labels?: Record<string, string>; value: number };
export type GaugeReader = () => GaugeSample[] | Promise<GaugeSample[]>;

interface RequestSeries {
  count: LabelSet;
  seconds: LabelSet;
}

/** A histogram as OTLP export reads it from the registry (src/observability/telemetry.ts): its OTel name, and prom-client's values. */
export interface ExportedHistogram {
  name: string;
  description: string;
  /** prom-client's `get()` values: `<name>_bucket` (cumulative, with `le`), `_sum` and `_count` per label set. */
  values: ReadonlyArray<{ labels: Partial<Record<string, string | number>>; value: number; metricName?: string }>;
}

interface ReaderEntry {
  name: string;
  help: string;
  read: GaugeReader;
  kind: 'gauge' | 'counter';
}


export class Metrics {
  readonly registry = new Registry();
  readonly #requests: CountedSeries;
  readonly #requestSeconds: CountedSeries;
  readonly #cache: CountedSeries;
  readonly #auditInsertSeconds: Histogram<string>;
  readonly #auditInsertFailures: Counter<string>;
  /** channel → decision → status → bound series: after warm-up, counting a request allocates nothing. */
  readonly #series = new Map<string, Map<string, Map<number, RequestSeries>>>();
  readonly #cacheSeries = new Map<string, Map<string, LabelSet>>();
  readonly #gauges: ReaderEntry[] = [];
  #otelMeter: { add(entry: ReaderEntry): void } | null = null;

  constructor(opts: { processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    // Counted once per request: plain numbers, rendered through the registry (request-series.ts).
    this.#requests = new CountedSeries('gatehouse_requests_total', 'Requests ended, by front door (channel), decision and status (one per audit entry).', 'counter', [], this.registry);
    this.#requestSeconds = new CountedSeries('gatehouse_request_duration_seconds', 'Request duration from arrival to the audit entry, by front door, decision and status.', 'histogram', LATENCY_BUCKETS, this.registry);
    this.#cache = new CountedSeries('gatehouse_cache_requests_total', 'Governed cache outcomes of requests (hit, miss, bypass), by front door.', 'counter', [], this.registry);
    this.#auditInsertSeconds = new Histogram({ name: 'gatehouse_audit_write_duration_seconds', help: 'Time to store one batch of audit entries in PostgreSQL.', labelNames: ['outcome'], buckets: LATENCY_BUCKETS, registers });
    this.#auditInsertFailures = new Counter({ name: 'gatehouse_audit_write_failures_total', help: 'Audit batches PostgreSQL did not take (they go to the spool).', registers });
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  /** Counts one ended request from its canonical audit entry (every front door ends each request with exactly one). */
  observeEntry(entry: AuditEntry): void {
    const series = this.#seriesFor(entry.channel, entry.decision, entry.status);
    this.#requests.inc(series.count);
    this.#requestSeconds.observe(series.seconds, entry.duration_ms / 1000);
    if (entry.cache !== null) this.#cache.inc(this.#cacheFor(entry.channel, entry.cache));
  }

  /** One batch insert of the audit writer: its duration and whether PostgreSQL took it. */
  observeAuditInsert(seconds: number, ok: boolean): void {
    const outcome = ok ? 'ok' : 'failed';
    this.#auditInsertSeconds.observe({ outcome }, seconds);
    if (!ok) this.#auditInsertFailures.inc();
  }

  /**
   * The latency histograms as OTLP export reads them, at export time (an OTel MetricProducer over this registry):
   * a request costs export nothing (docs/decisions/0023-operations-scale.md).
   */
  async histograms(): Promise<ExportedHistogram[]> {
    return [
      { name: 'gatehouse.request.duration', description: 'Request duration from arrival to the audit entry, by front door (channel), decision and status; its count is the request count.', values: (await this.#requestSeconds.get()).values },
      { name: 'gatehouse.audit.write.duration', description: 'Time to store one batch of audit entries.', values: (await this.#auditInsertSeconds.get()).values },
    ];
  }

  /**
   * A gauge read at scrape (and export) time from the component that owns the number. Registering a name again
   * replaces its reader (a listener rebuilt on the same services reports its own state).
   */
  addGauge(name: string, help: string, labelNames: readonly string[], read: GaugeReader): void {
    this.#addReader('gauge', name, help, labelNames, read);
  }

  /** A monotonic count a component keeps itself (cache hits, pool waits), exposed as a counter read at scrape time. */
  addCounterReader(name: string, help: string, labelNames: readonly string[], read: GaugeReader): void {
    this.#addReader('counter', name, help, labelNames, read);
  }

  #addReader(kind: 'gauge' | 'counter', name: string, help: string, labelNames: readonly string[], read: GaugeReader): void {
    const existing = this.#gauges.find((g) => g.name === name);
    if (existing) {
      if (existing.kind !== kind) throw new TypeError(`metric ${name} registered as a ${existing.kind}`);
      existing.read = read;
      return;
    }
    const entry = { name, help, read, kind };
    this.#gauges.push(entry);
    const registers = [this.registry];
    if (kind === 'gauge') {
      new Gauge({
        name, help, labelNames, registers,
        async collect() {
          this.reset();
          for (const s of await entry.read()) {
            if (s.labels) this.set(s.labels, s.value);
            else this.set(s.value);
          }
        },
      });
    } else {
      new Counter({
        name, help, labelNames, registers,
        async collect() {
          this.reset();
          for (const s of await entry.read()) {
            if (s.labels) this.inc(s.labels, s.value);
            else this.inc(s.value);
          }
        },
      });
    }
    this.#otelMeter?.add(entry);
  }

  /** Prometheus text exposition format 0.0.4. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Mirrors counters and gauges into an OpenTelemetry meter (OTLP export; histograms: histograms()); called only when an endpoint is configured. */
  mirrorTo(meter: Meter): void {
    const observe = (g: ReaderEntry): void => {
      const otelName = g.name.replace(/^gatehouse_/, 'gatehouse.').replace(/_total$/, '');
      const instrument = g.kind === 'counter' ? meter.createObservableCounter(otelName, { description: g.help }) : meter.createObservableGauge(otelName, { description: g.help });
      instrument.addCallback(async (result: ObservableResult) => {
        for (const s of await g.read()) result.observe(s.value, s.labels);
      });
    };
    // Counters are read from the Prometheus registry when exported, not counted twice per request.
    const fromRegistry = (otelName: string, metric: CountedSeries, help: string) =>
      meter.createObservableCounter(otelName, { description: help }).addCallback(async (result: ObservableResult) => {
        for (const v of (await metric.get()).values) result.observe(v.value, v.labels as Attributes);
      });
    fromRegistry('gatehouse.requests', this.#requests, 'Requests ended, by front door (channel), decision and status.');
    fromRegistry('gatehouse.cache.requests', this.#cache, 'Governed cache outcomes of requests, by front door.');
    for (const g of this.#gauges) observe(g);
    this.#otelMeter = { add: observe };
  }

  #seriesFor(channel: string, decision: string, status: number): RequestSeries {
    let byDecision = this.#series.get(channel);
    if (!byDecision) this.#series.set(channel, (byDecision = new Map()));
    let byStatus = byDecision.get(decision);
    if (!byStatus) byDecision.set(decision, (byStatus = new Map()));
    let series = byStatus.get(status);
    if (!series) {
      const labels = { channel, decision, status: String(status) };
      series = { count: this.#requests.series(labels), seconds: this.#requestSeconds.series(labels) };
      byStatus.set(status, series);
    }
    return series;
  }

  #cacheFor(channel: string, outcome: string): LabelSet {
    let byOutcome = this.#cacheSeries.get(channel);
    if (!byOutcome) this.#cacheSeries.set(channel, (byOutcome = new Map()));
    let counter = byOutcome.get(outcome);
    if (!counter) byOutcome.set(outcome, (counter = this.#cache.series({ channel, outcome })));
    return counter;
  }
}
