// Rate-limit strings of policy actions (`100/minute`, `10/second`, `5000/day`, `300/15minutes`) and their strictness order.

export interface RateLimitSpec {
  readonly points: number;
  readonly durationSec: number;
}

const UNIT_SECONDS: Readonly<Record<string, number>> = {
  s: 1, sec: 1, second: 1,
  m: 60, min: 60, minute: 60,
  h: 3600, hour: 3600,
  d: 86_400, day: 86_400,
};

/** Upper bounds keep a typo (`1000000000000/second`) from becoming an unlimited budget or a 30-year window. */
export const MAX_RATE_POINTS = 1_000_000_000;
export const MAX_RATE_DURATION_SEC = 366 * 86_400;

const RATE_RE = /^\s*(\d{1,10})\s*\/\s*(\d{1,6})?\s*([a-z]+)\s*$/;

/** Parses `<points>/[<count>]<unit>`; unit is second|minute|hour|day (or s|sec|m|min|h|d), plural allowed. Returns null when invalid. */
export function parseRateLimit(text: string): RateLimitSpec | null {
  const m = RATE_RE.exec(text.toLowerCase());
  if (m === null) return null;
  const points = Number(m[1]);
  const count = m[2] === undefined ? 1 : Number(m[2]);
  const unit = unitSeconds(m[3] as string);
  if (unit === undefined) return null;
  const durationSec = count * unit;
  if (!Number.isSafeInteger(points) || points < 1 || points > MAX_RATE_POINTS) return null;
  if (durationSec < 1 || durationSec > MAX_RATE_DURATION_SEC) return null;
  return { points, durationSec };
}

/** Negative when `a` is stricter than `b`: fewer points per second, then the smaller burst, then the longer window. */
export function compareStrictness(a: RateLimitSpec, b: RateLimitSpec): number {
  const ra = a.points * b.durationSec;
  const rb = b.points * a.durationSec;
  if (ra !== rb) return ra - rb;
  if (a.points !== b.points) return a.points - b.points;
  return b.durationSec - a.durationSec;
}

/** Plurals only of the words (`minutes`, `secs`), never of the one-letter forms: `ms` is not "minutes". */
function unitSeconds(word: string): number | undefined {
  const exact = UNIT_SECONDS[word];
  if (exact !== undefined) return exact;
  if (word.length > 2 && word.endsWith('s')) return UNIT_SECONDS[word.slice(0, -1)];
  return undefined;
}
