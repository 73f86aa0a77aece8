/*
 * The spellings of traffic-shaping settings: a message rate ("5/s", "100/min", "2000/h") and a
 * duration ("30s", "30m", "4h", "1d"). Parsed once, at configuration time.
 */

const RATE = /^\s*(\d+(?:\.\d+)?)\s*\/\s*(s|sec|second|m|min|minute|h|hr|hour|d|day)\s*$/i;
const DURATION = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)\s*$/i;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, sec: 1000, second: 1000, m: 60_000, min: 60_000, minute: 60_000, h: 3_600_000, hr: 3_600_000, hour: 3_600_000, d: 86_400_000, day: 86_400_000 };

/** A rate: `count` messages per `perMs`; the spacing between two messages is perMs / count. */
export interface MessageRate {
  count: number;
  perMs: number;
  /** The spelling it was parsed from, for display. */
  text: string;
}

/** "N/s", "N/min", "N/h" (or "N/d"); undefined when it is not one. */
export function parseRate(text: string): MessageRate | undefined {
  const m = RATE.exec(text);
  if (!m) return undefined;
  const count = Number(m[1]);
  if (!(count > 0) || !Number.isFinite(count)) return undefined;
  return { count, perMs: UNIT_MS[m[2]!.toLowerCase()]!, text: text.trim() };
}

/** Milliseconds between two messages at this rate. */
export function spacingMs(rate: MessageRate): number {
  return rate.perMs / rate.count;
}

/** "30s", "30m", "4h", "1d" (or "500ms") in milliseconds; undefined when it is not one. */
export function parseDuration(text: string): number | undefined {
  const m = DURATION.exec(text);
  if (!m) return undefined;
  const ms = Number(m[1]) * UNIT_MS[m[2]!.toLowerCase()]!;
  return ms > 0 && Number.isFinite(ms) ? Math.round(ms) : undefined;
}
