// The per-request metric series (requests, their latency, cache outcomes) counted in plain numbers and exposed through the prom-client registry at scrape.
import type { Metric, Registry } from 'prom-client';

/**
 * One metric's values as prom-client's `get()` gives them (and its registry renders): label values by name, the number,
 * and for a histogram the series name (`_bucket` with `le`, `_sum`, `_count`).
 */
export interface SeriesValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** One label set: its count and, for a histogram, its sum and observations per bucket (not cumulative; past the last bound only in count). */
export interface LabelSet {
  readonly labels: Readonly<Record<string, string>>;
  count: number;
  sum: number;
  readonly buckets: Float64Array;
}

/**
 * A counter or histogram whose label sets are found by the caller once and counted with plain arithmetic. prom-client's
 * own `observe` and `inc` validate and hash the label object on every call, ≈ 1.2 µs per request for the request
 * counter and histogram together (docs/decisions/0030-telemetry-overhead.md, addendum "request series"). The registry
 * still renders them: `get()` answers in the shape prom-client's Counter and Histogram do, so the exposition is the same.
 */
export class CountedSeries {
  readonly aggregator = 'sum' as const;
  readonly #series: LabelSet[] = [];
  readonly #bounds: readonly number[];

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    bounds: readonly number[] = [],
    registry?: Registry,
  ) {
    this.#bounds = [...bounds].sort((a, b) => a - b);
    registry?.registerMetric(this as unknown as Metric);
  }

  /** A new label set (the caller keeps it and counts on it; label values in the order they are rendered). */
  series(labels: Readonly<Record<string, string>>): LabelSet {
    const s: LabelSet = { labels, count: 0, sum: 0, buckets: new Float64Array(this.#bounds.length) };
    this.#series.push(s);
    return s;
  }

  /** Counts one (a counter's increment). */
  inc(s: LabelSet): void {
    s.count += 1;
  }

  /** One observation of a histogram. A value that is not finite is refused, as prom-client refuses it. */
  observe(s: LabelSet, value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`${this.name}: value is not a finite number: ${value}`);
    s.count += 1;
    s.sum += value;
    const bounds = this.#bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        s.buckets[i]! += 1;
        return;
      }
    }
  }

  /** The values as prom-client's Counter and Histogram `get()` gives them: what the registry renders and OTLP reads. */
  get(): Promise<{ name: string; help: string; type: 'counter' | 'histogram'; values: SeriesValue[]; aggregator: 'sum' }> {
    const values: SeriesValue[] = [];
    for (const s of this.#series) {
      // A label set is shown once observed, and again only once observed after a reset, as prom-client shows it.
      if (s.count === 0) continue;
      if (this.type === 'counter') {
        values.push({ labels: { ...s.labels }, value: s.count });
        continue;
      }
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += s.buckets[i]!;
        values.push({ labels: { le: this.#bounds[i]!, ...s.labels }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator });
  }

  /** Forgets every label set's observations; callers keep their label sets, which are shown again once observed. */
  reset(): void {
    for (const s of this.#series) {
      s.count = 0;
      s.sum = 0;
      s.buckets.fill(0);
    }
  }
}
