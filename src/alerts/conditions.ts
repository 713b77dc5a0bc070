// The alert condition types and comparators: each condition's formula over a window's aggregated audit figures (docs/alerts.md "Conditions").

export const CONDITION_TYPES = [
  'error_rate',
  'denial_rate',
  'request_count',
  'rate_limited_count',
  'approval_backlog',
  'redaction_count',
  'latency_p95_ms',
  'first_seen',
  'denied_burst',
] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];

export const COMPARATORS = ['>', '>=', '<', '<=', '=='] as const;
export type Comparator = (typeof COMPARATORS)[number];

export const CHANNELS = ['log', 'slack', 'webhook'] as const;
export type NotificationChannel = (typeof CHANNELS)[number];

/** Spec §8: default 300. Bounds: a minute (the rollup grain) to a day. */
export const WINDOW_DEFAULT_SECONDS = 300;
export const WINDOW_MIN_SECONDS = 60;
export const WINDOW_MAX_SECONDS = 86_400;

/**
 * Latency histogram: bucket i (0-based) counts durations d with LATENCY_BOUNDS[i-1] < d <= LATENCY_BOUNDS[i] ms;
 * the last bucket counts everything above the last bound. Bounds grow by ×1.25 from 1 ms (about 60 s at the top).
 */
export const LATENCY_BOUNDS: readonly number[] = Object.freeze(Array.from({ length: 50 }, (_, i) => Math.round(1.25 ** i * 1000) / 1000));
export const LATENCY_BUCKETS = LATENCY_BOUNDS.length + 1;

/** The aggregated audit figures of one scope over one window (sums of per-minute rollups). */
export interface WindowFigures {
  requests: number;
  errors: number;
  denials: number;
  rate_limited: number;
  redactions: number;
  /** Cache hits, and lookups (hits and misses; bypasses are not lookups). */
  cache_hits: number;
  cache_lookups: number;
  latency_hist: number[];
  /** Denials of each identity in the window (denied_burst). */
  denials_by_identity: Map<number, number>;
  /** Reaches of a source or table not reached in the 30 days before (first_seen). */
  first_seen: number;
  approvals_pending: number;
  oldest_pending_seconds: number | null;
}

export function emptyFigures(): WindowFigures {
  return {
    requests: 0,
    errors: 0,
    denials: 0,
    rate_limited: 0,
    redactions: 0,
    cache_hits: 0,
    cache_lookups: 0,
    latency_hist: new Array<number>(LATENCY_BUCKETS).fill(0),
    denials_by_identity: new Map(),
    first_seen: 0,
    approvals_pending: 0,
    oldest_pending_seconds: null,
  };
}

export interface Measurement {
  value: number;
  details: Record<string, number | string | null>;
}

/** The upper bound of the bucket that holds the ⌈0.95·n⌉-th smallest duration; 0 without requests. */
export function p95FromHistogram(hist: readonly number[]): number {
  const n = hist.reduce((a, b) => a + b, 0);
  if (n === 0) return 0;
  const rank = Math.ceil(0.95 * n);
  let seen = 0;
  for (let i = 0; i < hist.length; i++) {
    seen += hist[i]!;
    if (seen >= rank) return i < LATENCY_BOUNDS.length ? LATENCY_BOUNDS[i]! : Number.POSITIVE_INFINITY;
  }
  return 0;
}

/** Bucket index of one duration (same rule as the SQL rollup: the first bound >= d). */
export function latencyBucket(durationMs: number): number {
  for (let i = 0; i < LATENCY_BOUNDS.length; i++) if (durationMs <= LATENCY_BOUNDS[i]!) return i;
  return LATENCY_BOUNDS.length;
}

/** The formulas of docs/alerts.md, one per condition type. */
export function measure(type: ConditionType, f: WindowFigures): Measurement {
  switch (type) {
    case 'error_rate':
      return { value: f.requests === 0 ? 0 : f.errors / f.requests, details: { errors: f.errors, requests: f.requests } };
    case 'denial_rate':
      return { value: f.requests === 0 ? 0 : f.denials / f.requests, details: { denials: f.denials, requests: f.requests } };
    case 'request_count':
      return { value: f.requests, details: {} };
    case 'rate_limited_count':
      return { value: f.rate_limited, details: {} };
    case 'approval_backlog':
      return { value: f.approvals_pending, details: { oldest_pending_seconds: f.oldest_pending_seconds } };
    case 'redaction_count':
      return { value: f.redactions, details: { requests: f.requests } };
    case 'latency_p95_ms': {
      const p95 = p95FromHistogram(f.latency_hist);
      return { value: Number.isFinite(p95) ? p95 : LATENCY_BOUNDS[LATENCY_BOUNDS.length - 1]!, details: { requests: f.requests, above_top_bucket: Number.isFinite(p95) ? 0 : 1 } };
    }
    case 'first_seen':
      return { value: f.first_seen, details: {} };
    case 'denied_burst': {
      let top: number | null = null;
      let most = 0;
      for (const [identity, n] of f.denials_by_identity) {
        if (n > most || (n === most && top !== null && identity < top)) {
          most = n;
          top = identity;
        }
      }
      return { value: most, details: { identity_id: top } };
    }
  }
}

export function compare(value: number, comparator: Comparator, threshold: number): boolean {
  switch (comparator) {
    case '>':
      return value > threshold;
    case '>=':
      return value >= threshold;
    case '<':
      return value < threshold;
    case '<=':
      return value <= threshold;
    case '==':
      return value === threshold;
  }
}
