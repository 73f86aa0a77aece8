import test from 'ava';
import { bounceSpikes } from '../../src/core/overview/overview-service.js';
import type { TimeSeriesPoint } from '../../src/core/analytics/analytics-service.js';

// "Needs attention" on the console's overview: a bounce spike is a recent day well above the
// month's usual bounce share.

const day = (i: number, delivered: number, bounced: number): TimeSeriesPoint => ({ date: `2026-01-${String(i + 1).padStart(2, '0')}`, sent: delivered + bounced, delivered, opened: 0, clicked: 0, bounced, complained: 0, machineOpened: 0, machineClicked: 0 });

test('a day of the last week with a bounce share far above the month\'s is a spike; small numbers and steady rates are not', (t) => {
  const month = Array.from({ length: 30 }, (_, i) => day(i, 1000, 5));
  t.deepEqual(bounceSpikes(month), []);
  month[27] = day(27, 800, 200);
  const spikes = bounceSpikes(month);
  t.is(spikes.length, 1);
  t.like(spikes[0], { kind: 'bounce-spike', date: '2026-01-28', bounced: 200, ratePercent: 20 });
  // Four bounces out of five is a high share, but too few to call a spike.
  t.deepEqual(bounceSpikes(Array.from({ length: 30 }, (_, i) => (i === 29 ? day(i, 1, 4) : day(i, 0, 0)))), []);
  // Older than a week: not news any more.
  const old = Array.from({ length: 30 }, (_, i) => (i === 5 ? day(i, 100, 100) : day(i, 1000, 0)));
  t.deepEqual(bounceSpikes(old), []);
  // A list that always bounces a lot has no spike, only a high rate (reported elsewhere).
  t.deepEqual(bounceSpikes(Array.from({ length: 30 }, (_, i) => day(i, 100, 20))), []);
});
