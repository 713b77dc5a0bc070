// Head sampling with a per-process budget (docs/observability.md "Sampling"): the ratio picks new traces, at most
// observability.trace_max_per_second of them a second are recorded, and a client's sampled traceparent is followed whatever the budget.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AlwaysOnSampler, InMemorySpanExporter, ParentBasedSampler, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { Tracing } from '../../src/observability/tracing.js';
import { startServerSpan } from '../../src/http/server.js';
import { observabilitySchema } from '../../src/config/schema.js';

/** A Tracing over a real SDK provider (as telemetry.ts builds it) with a clock the test moves. */
function tracingWith(ratio: number, perSecond: number) {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }), spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const clock = { ms: 1_000 };
  const tracing = new Tracing(provider.getTracer('test'), ratio, perSecond, () => clock.ms);
  return { tracing, clock, exporter };
}

const request = (headers: Record<string, string> = {}) => ({ method: 'GET', route: '/proxy/:source_id/*', headers, requestId: 'r', protocol: 'http' });

describe('trace budget', () => {
  it('records at most the budget of new traces in a second, then refills at the budget rate', () => {
    const { tracing, clock } = tracingWith(1, 3);
    expect([1, 2, 3, 4, 5].map(() => tracing.sampleNewTrace())).toEqual([true, true, true, false, false]);
    clock.ms += 500; // half a second refills 1.5 traces
    expect([1, 2].map(() => tracing.sampleNewTrace())).toEqual([true, false]);
    clock.ms += 10_000; // a long pause refills at most one second's budget
    expect([1, 2, 3, 4].map(() => tracing.sampleNewTrace())).toEqual([true, true, true, false]);
  });

  it('never records more than the budget over any run of requests and clock steps', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 300 }), (perSecond, steps) => {
        const { tracing, clock } = tracingWith(1, perSecond);
        let recorded = 0;
        for (const step of steps) {
          clock.ms += step;
          if (tracing.sampleNewTrace()) recorded++;
        }
        const elapsedS = steps.reduce((a, b) => a + b, 0) / 1000;
        // The bucket starts full (one second's budget) and refills at the budget rate.
        expect(recorded).toBeLessThanOrEqual(Math.floor(perSecond * (1 + elapsedS)));
      }),
    );
  });

  it('samples nothing at ratio 0, and the ratio still picks within the budget', () => {
    const none = tracingWith(0, 1_000);
    expect(Array.from({ length: 200 }, () => none.tracing.sampleNewTrace()).some(Boolean)).toBe(false);
    const tenth = tracingWith(0.1, 1_000_000);
    const picked = Array.from({ length: 20_000 }, () => tenth.tracing.sampleNewTrace()).filter(Boolean).length;
    expect(picked).toBeGreaterThan(1_600);
    expect(picked).toBeLessThan(2_400);
  });

  it("follows a client's sampled traceparent when the budget is spent, and records nothing for an unsampled one", () => {
    const { tracing, exporter } = tracingWith(1, 1);
    expect(startServerSpan(tracing, 'gateway', request())).toBeDefined();
    expect(startServerSpan(tracing, 'gateway', request())).toBeUndefined();
    const sampled = startServerSpan(tracing, 'gateway', request({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }));
    expect(sampled?.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    sampled!.end();
    expect(startServerSpan(tracing, 'gateway', request({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' }))).toBeUndefined();
    expect(exporter.getFinishedSpans().map((s) => s.spanContext().traceId)).toEqual(['0af7651916cd43dd8448eb211c80319c']);
  });

  it('is configured by observability.trace_max_per_second: 100 by default, a whole number from 1', () => {
    expect(observabilitySchema.parse({}).trace_max_per_second).toBe(100);
    for (const bad of [0, -1, 1.5, '10']) expect(observabilitySchema.safeParse({ trace_max_per_second: bad }).success).toBe(false);
    expect(observabilitySchema.parse({ trace_max_per_second: 1_000_000 }).trace_max_per_second).toBe(1_000_000);
  });
});
