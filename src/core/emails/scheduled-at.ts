import * as chrono from 'chrono-node';
import { badRequest } from '../errors.js';

/** A time this far in the past is taken as "now" (clock skew between client and server). */
export const PAST_TOLERANCE_MS = 5 * 60 * 1000;
/** Schedules further out than this are refused: likely a mistake (a wrong year). */
export const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 60 * 60 * 1000;

const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

/**
 * ISO 8601, or plain English ("tomorrow 9am", "in 2 hours") resolved with chrono-node in the
 * server's time zone (the process TZ; chrono ignores IANA names, DESIGN 8).
 * Returns null when the time is "now or within tolerance in the past".
 */
export function parseScheduledAt(input: string, now: Date, field = 'scheduledAt'): Date | null {
  const text = input.trim();
  if (!text) throw badRequest(`${field}: must not be empty`);
  let at: Date | null = null;
  if (ISO_8601.test(text)) {
    const ms = Date.parse(text);
    if (!Number.isNaN(ms)) at = new Date(ms);
  } else {
    at = chrono.parseDate(text, now, { forwardDate: true });
  }
  if (!at || Number.isNaN(at.getTime())) {
    throw badRequest(`${field}: "${input}" is not an ISO 8601 date-time or a time in plain English such as "tomorrow 9am"`);
  }
  const delta = at.getTime() - now.getTime();
  if (delta < -PAST_TOLERANCE_MS) throw badRequest(`${field}: ${at.toISOString()} is in the past`);
  if (delta > MAX_SCHEDULE_AHEAD_MS) throw badRequest(`${field}: ${at.toISOString()} is more than a year ahead`);
  return delta <= 0 ? null : at;
}
