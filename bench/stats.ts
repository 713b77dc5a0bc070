// Sample statistics for the benchmarks: one percentile definition (nearest rank), so every report states the same statistic.

/** The value at quantile `q` (0..1) of an ascending sample, nearest rank without interpolation. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

/** The median of a few figures (rounds of a run): the middle one, or the mean of the two middle ones of an even count. */
export function median(values: readonly number[]): number {
  const sorted = Float64Array.from(values).sort();
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export interface Summary {
  readonly median: number;
  readonly p99: number;
}

/** Median and p99 of a sample; sorts `times` in place. */
export function summarize(times: Float64Array): Summary {
  times.sort();
  return { median: quantile(times, 0.5), p99: quantile(times, 0.99) };
}
