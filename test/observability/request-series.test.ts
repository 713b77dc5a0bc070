// The per-request series counted in plain numbers render exactly as prom-client's own Counter and Histogram would for the same observations.
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { CountedSeries, type LabelSet } from '../../src/observability/request-series.js';
import { LATENCY_BUCKETS, Metrics } from '../../src/observability/metrics.js';

const LABELS = fc.record({ channel: fc.constantFrom('http', 'pgwire', 'mcp', 'admin'), decision: fc.constantFrom('allow', 'deny', 'error'), status: fc.constantFrom('200', '403', '499', 'a"b\\c\nd') });
/** Durations on the bounds, between them, beyond the last, zero, and fractions whose sums round. */
const SECONDS = fc.oneof(fc.constantFrom(0, ...LATENCY_BUCKETS, 31, 1e6), fc.double({ min: 0, max: 40, noNaN: true }));

describe('CountedSeries', () => {
  test('renders what prom-client renders for the same observations (histogram and counter)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(LABELS, SECONDS), { maxLength: 60 }), async (observations) => {
        const ours = new Registry();
        const theirs = new Registry();
        const hist = new CountedSeries('h_seconds', 'help of h', 'histogram', LATENCY_BUCKETS, ours);
        const count = new CountedSeries('c_total', 'help of c', 'counter', [], ours);
        const pHist = new Histogram({ name: 'h_seconds', help: 'help of h', labelNames: ['channel', 'decision', 'status'], buckets: LATENCY_BUCKETS, registers: [theirs] });
        const pCount = new Counter({ name: 'c_total', help: 'help of c', labelNames: ['channel', 'decision', 'status'], registers: [theirs] });
        const found = new Map<string, [LabelSet, LabelSet]>();
        for (const [labels, seconds] of observations) {
          const key = JSON.stringify(labels);
          let s = found.get(key);
          if (!s) found.set(key, (s = [hist.series(labels), count.series(labels)]));
          hist.observe(s[0], seconds);
          count.inc(s[1]);
          pHist.observe(labels, seconds);
          pCount.inc(labels);
        }
        expect(await ours.metrics()).toBe(await theirs.metrics());
        // After a reset neither shows a label set until it is observed again.
        ours.resetMetrics();
        theirs.resetMetrics();
        expect(await ours.metrics()).toBe(await theirs.metrics());
        const again = observations.at(-1);
        if (again !== undefined) {
          const s = found.get(JSON.stringify(again[0]))!;
          hist.observe(s[0], again[1]);
          count.inc(s[1]);
          pHist.observe(again[0], again[1]);
          pCount.inc(again[0]);
        }
        expect(await ours.metrics()).toBe(await theirs.metrics());
        expect((await hist.get()).values).toEqual((await pHist.get()).values.map(({ labels, value, metricName }) => ({ labels, value, metricName })));
        expect((await count.get()).values).toEqual((await pCount.get()).values.map(({ labels, value }) => ({ labels, value })));
      }),
      { numRuns: 200 },
    );
  });

  test('refuses a value that is not finite, as prom-client does', () => {
    const hist = new CountedSeries('h_seconds', 'help of h', 'histogram', LATENCY_BUCKETS);
    const s = hist.series({ channel: 'http' });
    for (const v of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) expect(() => hist.observe(s, v)).toThrow(TypeError);
    expect(s.count).toBe(0);
  });

  test('Metrics counts each entry once in the request counter, the histogram and the cache outcome', async () => {
    const m = new Metrics({ processMetrics: false });
    const entry = { channel: 'pgwire', decision: 'allow', status: 200, duration_ms: 0.7, cache: 'hit' } as const;
    for (let i = 0; i < 3; i++) m.observeEntry(entry as never);
    m.observeEntry({ ...entry, duration_ms: 2_000, cache: null } as never);
    const text = await m.render();
    expect(text).toContain('gatehouse_requests_total{channel="pgwire",decision="allow",status="200"} 4');
    expect(text).toContain('gatehouse_request_duration_seconds_bucket{le="0.001",channel="pgwire",decision="allow",status="200"} 3');
    expect(text).toContain('gatehouse_request_duration_seconds_bucket{le="2.5",channel="pgwire",decision="allow",status="200"} 4');
    expect(text).toContain('gatehouse_request_duration_seconds_count{channel="pgwire",decision="allow",status="200"} 4');
    expect(text).toContain('gatehouse_cache_requests_total{channel="pgwire",outcome="hit"} 3');
    expect(text).toContain('# TYPE gatehouse_request_duration_seconds histogram');
    expect(text).toContain('# TYPE gatehouse_requests_total counter');
  });
});
