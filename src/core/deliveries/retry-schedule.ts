// How long to wait before the next attempt after a temporary failure, by attempts made so
// far. Front-loaded like Postfix/ZoneMTA (most greylisting clears within minutes), then
// hourly-ish until the give-up age (architecture.md, Outbound; Haraka's temp_fail_intervals).
const MINUTE_MS = 60_000;
export const RETRY_DELAYS_MS: readonly number[] = [
  1 * MINUTE_MS, // after the 1st failure: greylisting usually clears in a minute or five
  5 * MINUTE_MS,
  10 * MINUTE_MS,
  20 * MINUTE_MS,
  30 * MINUTE_MS,
  60 * MINUTE_MS,
  2 * 60 * MINUTE_MS,
  3 * 60 * MINUTE_MS, // from here on, every 3 hours until the give-up age
];

/** ±15% so that thousands of deferrals to one host do not come back in one burst. */
export const RETRY_JITTER_RATIO = 0.15;

/** Cap on a remote "try again in N" hint, so a silly hint cannot park mail for days. */
export const MAX_HINT_MS = 6 * 60 * MINUTE_MS;

export function retryDelayMs(attemptsMade: number, hintMs?: number, random: () => number = Math.random): number {
  const base = RETRY_DELAYS_MS[Math.min(Math.max(attemptsMade - 1, 0), RETRY_DELAYS_MS.length - 1)]!;
  const r = random();
  const jittered = base * (1 - RETRY_JITTER_RATIO + 2 * RETRY_JITTER_RATIO * r);
  if (hintMs === undefined) return Math.round(jittered);
  // A remote "try again in N" is honoured when it asks for longer than our schedule, jittered
  // upwards only (never sooner than asked): otherwise every message it deferred comes back in
  // the same millisecond.
  const hinted = Math.min(hintMs, MAX_HINT_MS) * (1 + RETRY_JITTER_RATIO * r);
  return Math.round(Math.max(jittered, hinted));
}
