import type { AnalyticsScope, AnalyticsService } from '../../core/analytics/analytics-service.js';
import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { badRequest } from '../../core/errors.js';
import type { RouteDef } from '../route-types.js';
import { parseIntId, singleQuery } from '../validation.js';

function scope(auth: AuthContext): AnalyticsScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

function domainIdParam(query: Record<string, string | string[] | undefined>): number | undefined {
  const raw = singleQuery(query, 'domainId');
  return raw === undefined ? undefined : parseIntId(raw, 'domainId');
}

export function analyticsRoutes(analytics: AnalyticsService): RouteDef[] {
  return [
    {
      method: 'GET',
      path: '/analytics/email-time-series',
      access: 'full',
      summary: 'Daily sent/delivered/opened/clicked/bounced/complained for the last 7 or 30 days, with totals.',
      handler: async ({ auth, query }) => {
        const days = singleQuery(query, 'days') ?? '30';
        if (days !== '7' && days !== '30') throw badRequest('days: must be 7 or 30');
        return analytics.timeSeries(scope(auth), { days: days === '7' ? 7 : 30, domainId: domainIdParam(query) });
      },
    },
    {
      method: 'GET',
      path: '/analytics/reputation-metrics',
      access: 'full',
      summary: 'All-time delivered, hard bounces and complaints, with bounce and complaint rates in percent.',
      handler: async ({ auth, query }) => analytics.reputation(scope(auth), { domainId: domainIdParam(query) }),
    },
  ];
}
