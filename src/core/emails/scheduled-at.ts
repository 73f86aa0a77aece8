import { createRequire } from 'node:module';
import type * as Chrono from 'chrono-node';
import { LATEST_ISO_MS, parseIsoDateTime } from '../../lib/iso-date-time.js';
import { badRequest } from '../errors.js';

/**
 * The longest scheduledAt taken (send, batch, reschedule, campaigns). Plain-English parsing grows
 * faster than the text: a megabyte of "tomorrow and ..." held the event loop for ~20 s.
 */
export const MAX_SCHEDULED_AT_CHARS = 200;

/** A time this far in the past is taken as "now" (clock skew between client and server). */
export const PAST_TOLERANCE_MS = 5 * 60 * 1000;

const ISO_LIKE = /^\d{4}-\d{2}-\d{2}/;
/** Words around a recognised time that change nothing ("at noon tomorrow"). */
const FILLER = new Set(['', 'at', 'on']);

/** chrono-node and its locales take ~20 MB: loaded on the first plain-English time, not at start. */
let chronoModule: typeof Chrono | undefined;
const chrono = (): typeof Chrono => (chronoModule ??= createRequire(import.meta.url)('chrono-node') as typeof Chrono);

/**
 * chrono finds times inside any text ("not tomorrow" gives tomorrow, "tomorrow at 25:00" gives
 * tomorrow at the current time), so the text must be one time and nothing else but filler.
 */
function parsePlainEnglish(text: string, now: Date): Date | null {
  const results = chrono().parse(text, now, { forwardDate: true });
  if (results.length !== 1) return null;
  const [r] = results as [Chrono.ParsedResult];
  const rest = (text.slice(0, r.index) + ' ' + text.slice(r.index + r.text.length)).replace(/[\s.,!]+/g, ' ').trim().toLowerCase();
  return FILLER.has(rest) ? r.start.date() : null;
}

/**
 * ISO 8601, or plain English ("tomorrow 9am", "in 2 hours") resolved with chrono-node in the
 * server's time zone (the process TZ; chrono-node ignores IANA zone names).
 * Returns null when the time is "now or within tolerance in the past".
 */
export function parseScheduledAt(input: string, now: Date, field = 'scheduledAt'): Date | null {
  if (input.length > MAX_SCHEDULED_AT_CHARS) throw badRequest(`${field}: must be at most ${MAX_SCHEDULED_AT_CHARS} characters`);
  const text = input.trim();
  if (!text) throw badRequest(`${field}: must not be empty`);
  const at = ISO_LIKE.test(text) ? parseIsoDateTime(text) : parsePlainEnglish(text, now);
  if (!at || Number.isNaN(at.getTime())) {
    throw badRequest(`${field}: "${input}" is not an ISO 8601 date-time or a time in plain English such as "tomorrow 9am"`);
  }
  // RFC 3339 (and the API's date-time) has four-digit years; later instants print as "+010000-...".
  if (at.getTime() > LATEST_ISO_MS) throw badRequest(`${field}: must be before the year 10000`);
  const delta = at.getTime() - now.getTime();
  if (delta < -PAST_TOLERANCE_MS) throw badRequest(`${field}: ${at.toISOString()} is in the past`);
  return delta <= 0 ? null : at;
}
