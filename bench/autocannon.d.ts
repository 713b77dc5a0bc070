// The part of autocannon's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  namespace autocannon {
    interface Options {
      url: string;
      connections?: number;
      duration?: number;
      headers?: Record<string, string>;
      requests?: Array<{ setupRequest?: (request: Record<string, unknown>) => Record<string, unknown> }>;
    }
    interface Histogram {
      average: number;
      p50: number;
      p90: number;
      p97_5: number;
      p99: number;
      p99_9: number;
      max: number;
    }
    interface Result {
      /** `total`: requests completed in the run. */
      requests: Histogram & { total: number };
      latency: Histogram;
      errors: number;
      timeouts: number;
      non2xx: number;
      /** Seconds the measured run took. */
      duration: number;
    }
  }
  function autocannon(options: autocannon.Options): Promise<autocannon.Result>;
  export default autocannon;
}
