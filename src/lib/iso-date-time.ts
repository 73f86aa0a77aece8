// Strict ISO 8601 date and date-time reading. Date.parse alone is too lenient for an API:
// it reads "1" as 2001-01-01 and rolls 2027-02-30 over to March 2, and it reads a date alone
// as UTC midnight but a date-time without an offset as local time.

const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * The instant an ISO 8601 date or date-time names, or null when the text is not one or names
 * a day or time that does not exist (month 13, February 30, 24:00, an offset beyond ±14:00).
 * Without an offset (a date alone included) the time is read in the server's time zone, as
 * plain-English times are.
 */
export function parseIsoDateTime(input: string): Date | null {
  const m = ISO_8601.exec(input.trim());
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map((v) => (v === undefined ? 0 : Number(v))) as [number, number, number, number, number, number];
  const ms = m[7] ? Math.floor(Number(`0.${m[7]}`) * 1000) : 0;
  const zone = m[8];
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  if (day > daysInMonth(year, month)) return null;
  if (zone === undefined) {
    const local = new Date(2000, 0, 1, hour, minute, second, ms);
    local.setFullYear(year, month - 1, day); // setFullYear, unlike the constructor, keeps years 0-99 as given
    return local;
  }
  let offsetMinutes = 0;
  if (zone.toUpperCase() !== 'Z') {
    const digits = zone.replace(':', '');
    const hours = Number(digits.slice(1, 3));
    const minutes = Number(digits.slice(3, 5));
    if (hours > 14 || minutes > 59) return null;
    offsetMinutes = (digits[0] === '-' ? -1 : 1) * (hours * 60 + minutes);
  }
  const utc = new Date(Date.UTC(2000, 0, 1, hour, minute, second, ms));
  utc.setUTCFullYear(year, month - 1, day);
  return new Date(utc.getTime() - offsetMinutes * 60_000);
}

/** The first and last instants whose toISOString() has a four-digit year (RFC 3339's years). */
export const EARLIEST_ISO_MS = -62_167_219_200_000; // 0000-01-01T00:00:00.000Z (Date.UTC reads year 0 as 1900)
export const LATEST_ISO_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * Whether `at` prints with a four-digit year, so its toISOString() orders as text among stored
 * timestamps. An offset can carry a valid date-time past them ("9999-12-31T23:00:00-14:00" is in
 * the year 10000, "+010000-..."), and "+" sorts before every digit: a bound past 9999 compared
 * as text would come before every date instead of after.
 */
export function hasFourDigitYear(at: Date): boolean {
  const ms = at.getTime();
  return ms >= EARLIEST_ISO_MS && ms <= LATEST_ISO_MS;
}
