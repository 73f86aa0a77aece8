import test from 'ava';
import { parseIsoDateTime } from '../../src/lib/iso-date-time.js';

// The suite runs with the machine's zone; local readings are compared with local constructors.
const iso = (s: string) => parseIsoDateTime(s)?.toISOString() ?? null;

test('date-times with an offset or Z name that instant', (t) => {
  t.is(iso('2026-11-25T09:30:00Z'), '2026-11-25T09:30:00.000Z');
  t.is(iso('2026-11-25t09:30z'), '2026-11-25T09:30:00.000Z');
  t.is(iso('2026-11-25 09:30:15.5+02:00'), '2026-11-25T07:30:15.500Z');
  t.is(iso('2026-11-25T09:30:00-0530'), '2026-11-25T15:00:00.000Z');
  t.is(iso('2024-02-29T00:00:00Z'), '2024-02-29T00:00:00.000Z');
  t.is(iso('2000-02-29T00:00:00Z'), '2000-02-29T00:00:00.000Z');
  t.is(iso('0050-06-01T00:00:00Z'), '0050-06-01T00:00:00.000Z', 'years below 100 are not read as 19xx');
});

test('without an offset (a date alone included) the time is local, like plain-English times', (t) => {
  t.is(parseIsoDateTime('2026-11-25')!.getTime(), new Date(2026, 10, 25).getTime());
  t.is(parseIsoDateTime('2026-11-25T09:30')!.getTime(), new Date(2026, 10, 25, 9, 30).getTime());
});

test('days, times and offsets that do not exist, and non-ISO text, are null', (t) => {
  for (const bad of [
    '2027-02-30T00:00:00Z',
    '2026-02-29',
    '1900-02-29',
    '2026-04-31',
    '2026-13-01',
    '2026-00-10',
    '2026-11-00',
    '2026-11-25T24:00:00Z',
    '2026-11-25T12:60:00Z',
    '2026-11-25T12:00:60Z',
    '2026-11-25T12:00:00+15:00',
    '2026-11-25T12:00:00+01:60',
    '1',
    'Nov 25',
    '2026-11-25T09',
    '20261125',
    '',
  ]) {
    t.is(parseIsoDateTime(bad), null, bad);
  }
});
