import type { AnalyticsService, TimeSeriesPoint } from '../analytics/analytics-service.js';
import type { DomainService } from '../domains/domain-service.js';
import type { Port25State } from '../operators/port25-watch.js';
import type { WebhookEndpointsService } from '../webhooks/webhook-endpoints-service.js';

// What a team should look at first (the console's overview): the numbers the analytics API
// gives, judged against the limits mailbox providers publish, and the things that stop mail
// or events from flowing. Thresholds are data, with their source:
//
// Complaint rate   0.1 %   Gmail and Yahoo bulk sender rules (2024): stay below it
//                  0.3 %   never reach it: delivery to Gmail degrades, mitigation is refused
// Hard bounces     2 %     common guidance for a healthy list (providers read more as spam)
//                  5 %     Amazon SES puts an account under review from here
// Bounce spike     a day in the last 7 whose bounce share of attempts is >= 5 % with at
//                  least 5 bounces, and at least twice the 30-day share
export const COMPLAINT_THRESHOLDS = { warn: 0.1, max: 0.3 } as const;
export const BOUNCE_THRESHOLDS = { warn: 2, max: 5 } as const;
const SPIKE = { minRate: 0.05, minBounces: 5, factor: 2, days: 7 } as const;

export type AttentionItem =
  | { kind: 'domain-unverified'; domainId: number; name: string; status: string; detail: string | null }
  | { kind: 'webhook-failing'; webhookId: string; url: string; autoDisabled: boolean; lastStatus: number | null; lastError: string | null; at: string }
  | { kind: 'bounce-spike'; date: string; bounced: number; ratePercent: number; baselinePercent: number }
  | { kind: 'complaint-rate'; ratePercent: number; level: 'warn' | 'max' }
  | { kind: 'bounce-rate'; ratePercent: number; level: 'warn' | 'max' }
  /**
   * This node's outbound port looks blocked: every team's mail waits, so every team sees it. In
   * counts only: the hosts that failed are other teams' recipients' MXes (the operator API names them).
   */
  | { kind: 'port25-blocked'; port: number; since: string; attempts: number; failedHosts: number };

const share = (part: number, whole: number) => (whole === 0 ? 0 : part / whole);
const pct = (x: number) => Math.round(x * 10000) / 100;

/** Days of the last week whose bounces jump well above the month's usual share. */
export function bounceSpikes(month: TimeSeriesPoint[]): AttentionItem[] {
  const total = month.reduce((a, p) => ({ bounced: a.bounced + p.bounced, attempts: a.attempts + p.bounced + p.delivered }), { bounced: 0, attempts: 0 });
  const baseline = share(total.bounced, total.attempts);
  return month.slice(-SPIKE.days).flatMap((p) => {
    const rate = share(p.bounced, p.bounced + p.delivered);
    if (p.bounced < SPIKE.minBounces || rate < SPIKE.minRate || rate < SPIKE.factor * baseline) return [];
    return [{ kind: 'bounce-spike' as const, date: p.date, bounced: p.bounced, ratePercent: pct(rate), baselinePercent: pct(baseline) }];
  });
}

export function createOverviewService(deps: { domains: DomainService; webhooks: WebhookEndpointsService; analytics: AnalyticsService; port25?: () => Port25State }) {
  return {
    async overview(scope: { teamId: number; domainId: number | null }) {
      const [week, month, reputation, domains, failing] = await Promise.all([
        deps.analytics.timeSeries(scope, { days: 7 }),
        deps.analytics.timeSeries(scope, { days: 30 }),
        deps.analytics.reputation(scope, {}),
        deps.domains.list(scope),
        deps.webhooks.failing(scope),
      ]);
      const attention: AttentionItem[] = [];
      const port25 = deps.port25?.();
      if (port25?.state === 'suspected-blocked') {
        attention.push({ kind: 'port25-blocked', port: port25.port, since: port25.since!, attempts: port25.attempts, failedHosts: port25.failedHosts });
      }
      for (const d of domains) {
        if (d.status !== 'SUCCESS') attention.push({ kind: 'domain-unverified', domainId: d.id, name: d.name, status: d.status, detail: d.verificationError });
      }
      for (const f of failing) {
        attention.push({ kind: 'webhook-failing', webhookId: f.webhook.id, url: f.webhook.url, autoDisabled: f.webhook.status === 'AUTO_DISABLED', lastStatus: f.lastAttempt.response?.status ?? null, lastError: f.lastAttempt.error, at: f.lastAttempt.createdAt });
      }
      attention.push(...bounceSpikes(month.result));
      if (reputation.complaintRate >= COMPLAINT_THRESHOLDS.warn) {
        attention.push({ kind: 'complaint-rate', ratePercent: reputation.complaintRate, level: reputation.complaintRate >= COMPLAINT_THRESHOLDS.max ? 'max' : 'warn' });
      }
      if (reputation.bounceRate >= BOUNCE_THRESHOLDS.warn) {
        attention.push({ kind: 'bounce-rate', ratePercent: reputation.bounceRate, level: reputation.bounceRate >= BOUNCE_THRESHOLDS.max ? 'max' : 'warn' });
      }
      return { week, month, reputation, domains, attention };
    },
  };
}
export type OverviewService = ReturnType<typeof createOverviewService>;
