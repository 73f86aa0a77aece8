import test from 'ava';
import { createAnalyticsService } from '../../src/core/analytics/analytics-service.js';
import type { BusEvent } from '../../src/core/events.js';
import { ManualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/logger.js';
import type { AnalyticsRepository, EngagementHit, StatDelta } from '../../src/store/repositories/analytics-repository.js';

// The rollups of a transaction's events: what the store is asked to write inside it.

function serviceWithCalls() {
  const calls: { delta: StatDelta | null; hit: EngagementHit | null }[] = [];
  const analytics = { applyInOpenTransaction: (delta: StatDelta | null, hit: EngagementHit | null) => void calls.push({ delta, hit }) } as unknown as AnalyticsRepository;
  const service = createAnalyticsService({ analytics, clock: new ManualClock(), logger: createLogger('silent'), domainBelongsToTeam: async () => true });
  return { service, calls };
}

const event = (type: BusEvent['type'], domainId: number, at: string, data: Record<string, unknown> = {}): BusEvent => ({ type, teamId: 7, domainId, occurredAt: at, data });

test("one attempt's SENT and DELIVERED are one row of increments; another day or domain is a row of its own", (t) => {
  const { service, calls } = serviceWithCalls();
  service.handleInTransaction([
    event('email.sent', 1, '2026-03-08T23:59:59.000Z'),
    event('email.delivered', 1, '2026-03-08T23:59:59.500Z'),
    event('email.bounced', 1, '2026-03-08T23:59:59.900Z', { bounce: { type: 'Permanent' } }),
    event('email.delivered', 1, '2026-03-09T00:00:00.100Z'),
    event('email.delivered', 2, '2026-03-08T12:00:00.000Z'),
    event('email.queued', 1, '2026-03-08T12:00:00.000Z'),
  ]);
  t.deepEqual(
    calls.map((c) => c.delta),
    [
      { teamId: 7, domainId: 1, day: '2026-03-08', sent: 1, delivered: 1, opened: 0, clicked: 0, bounced: 1, hardBounced: 1, complained: 0, machineOpened: 0, machineClicked: 0 },
      { teamId: 7, domainId: 1, day: '2026-03-09', sent: 0, delivered: 1, opened: 0, clicked: 0, bounced: 0, hardBounced: 0, complained: 0, machineOpened: 0, machineClicked: 0 },
      { teamId: 7, domainId: 2, day: '2026-03-08', sent: 0, delivered: 1, opened: 0, clicked: 0, bounced: 0, hardBounced: 0, complained: 0, machineOpened: 0, machineClicked: 0 },
    ],
  );
  t.true(calls.every((c) => c.hit === null));
});

test('opens and clicks go to the store one by one (only an email\'s first of each kind counts), and nothing for an event that counts nothing', (t) => {
  const { service, calls } = serviceWithCalls();
  service.handleInTransaction([event('email.opened', 1, '2026-03-08T10:00:00.000Z', { id: 'em_a' }), event('email.opened', 1, '2026-03-08T10:00:01.000Z', { id: 'em_a' })]);
  t.deepEqual(
    calls.map((c) => [c.delta, c.hit?.emailId, c.hit?.kind]),
    [
      [null, 'em_a', 'opened'],
      [null, 'em_a', 'opened'],
    ],
  );
  calls.length = 0;
  service.handleInTransaction([event('email.queued', 1, '2026-03-08T10:00:00.000Z')]);
  t.is(calls.length, 0);
});
