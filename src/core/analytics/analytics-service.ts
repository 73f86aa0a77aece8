import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { ZERO_COUNTERS, type AnalyticsRepository, type EngagementHit, type StatCounters, type StatDelta } from '../../store/repositories/analytics-repository.js';
import { forbidden, notFound } from '../errors.js';
import type { BusEvent } from '../events.js';
import { isMachineHit } from '../tracking/machine-hits.js';
import { orTooSlow } from '../query-too-slow.js';

// Daily rollups keyed by (team, domain, UTC day), kept up to date from bus events, so the
// analytics endpoints read a few dozen rollup rows instead of scanning emails.
//
// Units: `sent` counts emails (email.sent fires once per email); delivered, bounced and
// complained count recipients (one event per recipient's outcome); opened and clicked count
// emails, once each however often they are opened or clicked. Opens and clicks flagged as a
// machine's (core/tracking/machine-hits.ts) count apart, as machineOpened and machineClicked.

export interface AnalyticsScope {
  teamId: number;
  /** A key bound to a domain sees only that domain's numbers. */
  domainId: number | null;
}

export interface TimeSeriesPoint {
  date: string;
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  complained: number;
  /** Emails opened or clicked by a privacy proxy or link scanner (not in opened/clicked). */
  machineOpened: number;
  machineClicked: number;
}

export interface AnalyticsServiceDeps {
  analytics: AnalyticsRepository;
  clock: Clock;
  logger: Logger;
  domainBelongsToTeam(teamId: number, domainId: number): Promise<boolean>;
}

const DAY_MS = 24 * 60 * 60 * 1000;
const SERIES_KEYS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'machineOpened', 'machineClicked'] as const;

/** A UTC instant as toISOString writes it: its day is its first ten characters. */
const UTC_ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$/;

function dayOf(iso: string, fallbackMs: number): string {
  // Every event's time is written so; parsing and re-formatting it per event was measurable.
  if (UTC_ISO.test(iso)) return iso.slice(0, 10);
  const ms = Date.parse(iso);
  return new Date(Number.isNaN(ms) ? fallbackMs : ms).toISOString().slice(0, 10);
}

/** Percentages as useSend reports them: part per delivered x 100, 0 when nothing was delivered. */
function percent(part: number, delivered: number): number {
  return delivered === 0 ? 0 : Math.round((part / delivered) * 100 * 100) / 100;
}

/** Adds `delta` to the increments gathered for its day, team and domain. */
function addTo(gathered: Map<string, StatDelta>, delta: StatDelta): void {
  const key = `${delta.teamId}|${delta.domainId}|${delta.day}`;
  const d = gathered.get(key);
  if (!d) gathered.set(key, { ...delta });
  else for (const k of Object.keys(ZERO_COUNTERS) as (keyof StatCounters)[]) d[k] += delta[k];
}

/** How long rollup increments are gathered before one write. */
const ROLLUP_FLUSH_MS = 50;

export function createAnalyticsService(deps: AnalyticsServiceDeps) {
  // Increments are buffered briefly and written together: under load many events share one
  // transaction instead of one write each. Readers flush first, so the API always sees every
  // event emitted before it.
  let deltas = new Map<string, StatDelta>();
  let hits: EngagementHit[] = [];
  let scheduled = false;
  let writing: Promise<void> = Promise.resolve();
  /** Events already counted inside their emitter's transaction (committed with it). */
  const countedInTransaction = new WeakSet<BusEvent>();

  /** What an event adds to the rollups: a counter increment, an engagement hit, or nothing. */
  function incrementOf(event: BusEvent): { delta: StatDelta | null; hit: EngagementHit | null } | null {
    const domainId = event.domainId ?? 0;
    const day = dayOf(event.occurredAt, deps.clock.nowMs());
    const delta = (counter: keyof StatCounters, extra?: keyof StatCounters) => {
      const d: StatDelta = { ...ZERO_COUNTERS, teamId: event.teamId, domainId, day };
      d[counter] += 1;
      if (extra) d[extra] += 1;
      return { delta: d, hit: null };
    };
    switch (event.type) {
      case 'email.sent':
        return delta('sent');
      case 'email.delivered':
        return delta('delivered');
      case 'email.bounced': {
        const bounce = event.data.bounce as { type?: string } | undefined;
        return delta('bounced', bounce?.type === 'Permanent' ? 'hardBounced' : undefined);
      }
      case 'email.complained':
        return delta('complained');
      case 'email.opened':
      case 'email.clicked': {
        const emailId = event.data.id;
        if (typeof emailId !== 'string') return null;
        const opened = event.type === 'email.opened';
        const machine = isMachineHit(event);
        const kind = opened ? (machine ? 'machineOpened' : 'opened') : machine ? 'machineClicked' : 'clicked';
        return { delta: null, hit: { emailId, kind, teamId: event.teamId, domainId, day } };
      }
      default:
        return null;
    }
  }

  function bump(delta: StatDelta): void {
    addTo(deltas, delta);
    schedule();
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    // Coalesce for a moment: under delivery load one write per turn cost ~7% of the engine's
    // CPU (profiled); every 50 ms is plenty for daily rollups, and readers flush first anyway.
    setTimeout(() => {
      scheduled = false;
      void flush();
    }, ROLLUP_FLUSH_MS).unref();
  }

  function flush(): Promise<void> {
    const batch = [...deltas.values()];
    const batchHits = hits;
    deltas = new Map();
    hits = [];
    if (batch.length || batchHits.length) {
      writing = writing.then(() =>
        deps.analytics.apply(batch, batchHits).catch((err) => deps.logger.error({ err, rows: batch.length }, 'updating analytics rollups failed')),
      );
    }
    return writing;
  }

  async function resolveDomain(scope: AnalyticsScope, domainId: number | undefined): Promise<number | null> {
    if (domainId === undefined) return scope.domainId;
    if (scope.domainId !== null && scope.domainId !== domainId) throw forbidden(`this API key is restricted to domain ${scope.domainId}`);
    if (!(await deps.domainBelongsToTeam(scope.teamId, domainId))) throw notFound(`domainId: domain ${domainId} not found`);
    return domainId;
  }

  return {
    /**
     * Transactional subscriber (events.onInTransaction): the increments are written inside the
     * emitter's transaction, so a process killed right after a status commit has its counts
     * too. The batch's increments for one day, team and domain go as one row (an attempt's SENT
     * and DELIVERED: one statement instead of two). It may run again for the same events if the
     * write is redone; a rolled-back run left nothing behind.
     */
    handleInTransaction(batch: readonly BusEvent[]): void {
      const summed = new Map<string, StatDelta>();
      for (const event of batch) {
        const inc = incrementOf(event);
        if (!inc) continue;
        countedInTransaction.add(event);
        // A hit counts only if it is the email's first of its kind: the store decides, one by one.
        if (inc.hit) deps.analytics.applyInOpenTransaction(null, inc.hit);
        if (inc.delta) addTo(summed, inc.delta);
      }
      for (const delta of summed.values()) deps.analytics.applyInOpenTransaction(delta, null);
    },

    /** Bus subscriber ('*'), after the commit: counts (buffered) what no transaction counted. */
    handleBusEvent(event: BusEvent): void {
      if (countedInTransaction.has(event)) return;
      const inc = incrementOf(event);
      if (!inc) return;
      if (inc.delta) bump(inc.delta);
      if (inc.hit) {
        hits.push(inc.hit);
        schedule();
      }
    },

    /** Writes everything buffered so far (readers and shutdown call it). */
    flush,

    /** `days` points ending today (UTC), oldest first, zero-filled, and their totals. */
    async timeSeries(scope: AnalyticsScope, q: { days: 7 | 30; domainId?: number }) {
      const domainId = await resolveDomain(scope, q.domainId);
      await flush();
      const today = Date.parse(deps.clock.now().toISOString().slice(0, 10));
      const dates = Array.from({ length: q.days }, (_, i) => new Date(today - (q.days - 1 - i) * DAY_MS).toISOString().slice(0, 10));
      const rows = new Map((await orTooSlow(deps.analytics.daily(scope.teamId, domainId, dates[0]!, dates[dates.length - 1]!))).map((r) => [r.day, r]));
      const totalCounts = { sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0, machineOpened: 0, machineClicked: 0 };
      const result: TimeSeriesPoint[] = dates.map((date) => {
        const r = rows.get(date);
        const point: TimeSeriesPoint = { date, sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0, machineOpened: 0, machineClicked: 0 };
        for (const k of SERIES_KEYS) {
          point[k] = r?.[k] ?? 0;
          totalCounts[k] += point[k];
        }
        return point;
      });
      return { result, totalCounts };
    },

    /** All-time reputation: hard bounces and complaints as percentages of delivered. */
    async reputation(scope: AnalyticsScope, q: { domainId?: number }) {
      const domainId = await resolveDomain(scope, q.domainId);
      await flush();
      const t = await orTooSlow(deps.analytics.totals(scope.teamId, domainId));
      return {
        delivered: t.delivered,
        hardBounced: t.hardBounced,
        complained: t.complained,
        bounceRate: percent(t.hardBounced, t.delivered),
        complaintRate: percent(t.complained, t.delivered),
      };
    },
  };
}
export type AnalyticsService = ReturnType<typeof createAnalyticsService>;
